"""``MemorySampler``: distributed's API, for the local schedulers and for distributed.

::

    ms = daskprofile.MemorySampler()
    with ms.sample("naive"):
        x.compute()
    with ms.sample("rechunked"):
        y.compute()
    ms.plot(align=True)

With a ``distributed`` client (given, or the default client) the scheduler samples the
cluster's memory, exactly as ``distributed.diagnostics.MemorySampler`` does. Otherwise a
thread of this process samples the RSS of this process and all its descendants (worker
processes of the ``processes`` scheduler included), with daskprofile's resource sampler.

``samples`` maps each label to ``[(unix time in s, bytes), ...]``, the format of
distributed's sampler, so both kinds of series mix in one table or plot.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from time import perf_counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LOCAL_MEASURES", "MemorySampler"]

#: what the local sampler measures: the RSS of the process tree
LOCAL_MEASURES = ("process",)

Samples = list[tuple[float, int]]


def _check_interval(interval: object) -> float:
    """A positive, finite number of seconds (or duration string); ValueError otherwise."""
    from .options import duration

    try:
        return duration("interval", interval)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def _distributed_measures() -> list[str]:
    """The measures distributed's scheduler can sample (ints of ``MemoryState``)."""
    from distributed.scheduler import MemoryState

    slots = [s for s in MemoryState.__slots__ if not s.startswith("_")]
    props = [n for n, v in vars(MemoryState).items() if isinstance(v, property)]
    return [*slots, *(p for p in props if not p.startswith("_"))]


def _check_measure(measure: object, distributed: bool) -> str:
    """``measure`` if this kind of sampler can measure it; ValueError naming it otherwise."""
    allowed = _distributed_measures() if distributed else list(LOCAL_MEASURES)
    if isinstance(measure, str) and measure in allowed:
        return measure
    where = "a distributed cluster" if distributed else "the local schedulers (process-tree RSS)"
    raise ValueError(f"measure must be one of {allowed} for {where}, got {measure!r}")


def _default_client() -> Any:
    """The default ``distributed`` client, or None (distributed is never imported here)."""
    if "distributed" not in sys.modules:
        return None
    try:
        import distributed

        return getattr(distributed, "default_client")()  # noqa: B009 - untyped
    except (ImportError, ValueError):
        return None


class MemorySampler:
    """Sample memory every ``interval`` seconds while blocks run; one series per label.

    Same API as ``distributed.diagnostics.MemorySampler``: :meth:`sample` is a context
    manager (asynchronous with an asynchronous client), :attr:`samples` holds
    ``{label: [(unix time, bytes), ...]}``, :meth:`to_pandas` and :meth:`plot` show them.
    """

    samples: dict[str, Samples]

    def __init__(self) -> None:
        self.samples = {}

    def sample(
        self,
        label: str | None = None,
        *,
        client: Any = None,
        measure: str = "process",
        interval: float = 0.5,
    ) -> Any:
        """Context manager recording memory into ``self.samples[label]``.

        ``client``: a ``distributed.Client`` (default: the default client if there is one,
        else the local process tree is sampled). ``measure``: for a cluster, one of
        distributed's ``MemoryState`` measures; locally ``"process"`` (RSS of this process
        and its descendants). ``interval``: seconds between samples.
        """
        seconds = _check_interval(interval)
        client = client if client is not None else _default_client()
        measure = _check_measure(measure, distributed=client is not None)
        if client is None:
            return self._sample_local(label, seconds)
        if client.asynchronous:
            return self._sample_async(label, client, measure, seconds)
        return self._sample_sync(label, client, measure, seconds)

    @contextmanager
    def _sample_local(self, label: str | None, interval: float) -> Iterator[None]:
        from .collectors.resources import ResourceCollector

        collector = ResourceCollector(dt=interval)
        offset = time.time() - perf_counter()  # perf_counter -> unix time
        collector.start()
        try:
            yield
        finally:
            collector.stop()
            data = collector.snapshot()
            points = zip((data["time"] + offset).tolist(), data["memory"].tolist(), strict=True)
            self.samples[label or str(uuid.uuid4())] = list(points)

    @contextmanager
    def _sample_sync(
        self, label: str | None, client: Any, measure: str, interval: float
    ) -> Iterator[None]:
        key = client.sync(
            client.scheduler.memory_sampler_start,
            client=client.id,
            measure=measure,
            interval=interval,
        )
        try:
            yield
        finally:
            points = client.sync(client.scheduler.memory_sampler_stop, key=key)
            self.samples[label or key] = [(float(t), int(b)) for t, b in points]

    @asynccontextmanager
    async def _sample_async(
        self, label: str | None, client: Any, measure: str, interval: float
    ) -> AsyncIterator[None]:
        key = await client.scheduler.memory_sampler_start(
            client=client.id, measure=measure, interval=interval
        )
        try:
            yield
        finally:
            points = await client.scheduler.memory_sampler_stop(key=key)
            self.samples[label or key] = [(float(t), int(b)) for t, b in points]

    def to_pandas(self, *, align: bool = False) -> pd.DataFrame:
        """One column per label, indexed by time (datetime; timedelta since each series'
        first sample with ``align=True``), values in bytes."""
        import pandas as pd

        series = {label: _series(label, points, align) for label, points in self.samples.items()}
        df = pd.DataFrame(series)
        if len(series) > 1:
            # fill the gaps between a series' own samples, never past its last one
            df = df.ffill().where(df.bfill().notna())
        return df  # type: ignore[no-any-return]

    def plot(self, *, align: bool = False, **kwargs: Any) -> Any:
        """Plot the series in GiB over time.

        With matplotlib installed (or a pandas ``backend=`` given), this is distributed's
        plot: ``kwargs`` go to :meth:`pandas.DataFrame.plot`. Otherwise a bokeh figure is
        returned (``kwargs`` go to :func:`bokeh.plotting.figure`); show it with
        ``bokeh.io.show``.
        """
        df = _resampled(self.to_pandas(align=align)) / 2**30
        if "backend" in kwargs or _has_matplotlib():
            return df.plot(xlabel="time", ylabel="Memory (GiB)", **kwargs)
        return _bokeh_plot(df, align, **kwargs)


def _series(label: str, points: Samples, align: bool) -> pd.Series:
    import pandas as pd

    times = pd.to_datetime([t for t, _ in points], unit="s")
    s = pd.Series([b for _, b in points], index=times, name=label, dtype="float64")
    if align and len(s):
        s.index = s.index - s.index[0]
    return s[~s.index.duplicated()]


def _resampled(df: pd.DataFrame) -> pd.DataFrame:
    """One point a second (a millisecond if that collapses everything to one point)."""
    if df.empty:
        return df
    out: pd.DataFrame = df.resample("1s").nearest()
    return df.resample("1ms").nearest() if len(out) == 1 else out


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _bokeh_plot(df: pd.DataFrame, align: bool, **kwargs: Any) -> Any:
    import numpy as np
    from bokeh.palettes import Category10_10
    from bokeh.plotting import figure

    x_type = "linear" if align else "datetime"
    options: dict[str, Any] = {
        "x_axis_type": x_type,
        "x_axis_label": "seconds" if align else "time",
        "y_axis_label": "Memory (GiB)",
        "height": 300,
        "sizing_mode": "stretch_width",
    }
    fig = figure(**(options | kwargs))
    index: Any = df.index
    x = np.asarray(index.total_seconds() if align else index)
    for i, label in enumerate(df.columns):
        color = Category10_10[i % 10]
        fig.line(x, df[label].to_numpy(), legend_label=str(label), color=color, line_width=2)
    return fig
