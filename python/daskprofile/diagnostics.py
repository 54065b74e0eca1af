"""Drop-in replacements for ``dask.diagnostics``, measured where tasks run.

``Profiler``, ``ResourceProfiler``, ``CacheProfiler`` and ``ProgressBar`` take dask's
arguments and fill dask's ``results`` namedtuples, but:

* task times are taken in the worker thread or process that ran the task, and
  ``worker_id`` is that thread ident or process id (also for the sync scheduler);
* they are safe when several threads compute at once;
* ``Profiler.results`` is readable while the compute runs;
* ``ResourceProfiler`` watches the whole process tree from a thread and stops within a
  few milliseconds of the block's end whatever ``dt``;
* ``CacheProfiler`` finds released results among a task's dependencies instead of
  scanning the whole cache after every task;
* ``ProgressBar`` redraws from a timer thread (no flush per task) and ends without delay.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections import namedtuple
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import IO, Any

import numpy as np
from dask.utils import format_time

from .callbacks import Callback, worker_id
from .collectors import StackWorkerHook, merge_stacks
from .hooks import Compute, TaskBatch, TaskEvent
from .keys import GroupIndex
from .options import duration, optional_callable
from .record.cluster_progress import ClusterCounts, ClusterProgress, flush_for
from .run import Run

__all__ = [
    "CacheData",
    "CacheProfiler",
    "Profiler",
    "ProgressBar",
    "ResourceData",
    "ResourceProfiler",
    "StackProfiler",
    "TaskData",
    "to_run",
    "visualize",
]

TaskData = namedtuple("TaskData", ("key", "task", "start_time", "end_time", "worker_id"))
ResourceData = namedtuple("ResourceData", ("time", "mem", "cpu"))
CacheData = namedtuple("CacheData", ("key", "task", "metric", "cache_time", "free_time"))


class _Timed(Callback):
    """``start_time``/``end_time`` around a ``with`` block; ``results`` cleared on entry."""

    results: list[Any]

    def __init__(self) -> None:
        self.results = []
        self.start_time: float | None = None
        self.end_time: float | None = None

    def __enter__(self) -> _Timed:
        self.clear()
        self.start_time = perf_counter()
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.end_time = perf_counter()
        super().__exit__(*exc)

    def clear(self) -> None:
        """Forget the results (and start/end times)."""
        self.results = []
        self.start_time = None
        self.end_time = None

    def visualize(self, **kwargs: Any) -> Any:
        """Plot these results (see :func:`visualize`)."""
        return visualize([self], **kwargs)

    def _plot(self, **kwargs: Any) -> Any:
        """This profiler's bokeh figure: what ``dask.diagnostics.visualize`` stacks, so a
        user who swaps only the profilers' import keeps dask's ``visualize`` working."""
        from .export import figures

        metric_name = getattr(self, "_metric_name", "count")
        return figures.plot(to_run([self]), [_kind(self)], metric_name=metric_name, **kwargs)


class Profiler(_Timed):
    """Task-level profiler: ``results`` is a list of ``TaskData(key, task, start_time,
    end_time, worker_id)``, times in ``perf_counter`` seconds taken where the task ran.
    Failed tasks are left out of ``results`` (as in dask)."""

    def __init__(self) -> None:
        super().__init__()
        self._dsk: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def on_compute_start(self, compute: Compute) -> None:
        with self._lock:
            self._dsk.update(compute.dsk)

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        if event.error is None:
            key = event.key
            task = compute.dsk.get(key)
            wid = worker_id(compute, event)
            self.results.append(TaskData(key, task, event.start, event.stop, wid))

    def clear(self) -> None:
        super().clear()
        self._dsk = {}


class ResourceProfiler(_Timed):
    """CPU and memory of the kernel and all its worker processes: ``results`` is a list
    of ``ResourceData(time, mem, cpu)`` (perf_counter s, MB RSS summed, % of one core).

    In a ``with`` block it samples the whole block; registered, only while computes run.
    """

    def __init__(self, dt: float = 1) -> None:
        super().__init__()
        self._dt = duration("dt", dt)
        self._collector: Any = None
        self._cursor = 0
        self._entered = False
        self._computes = 0
        self._state_lock = threading.Lock()

    def _is_running(self) -> bool:
        return self._collector is not None and bool(self._collector.running)

    def _start_collect(self) -> None:
        if self._collector is None:
            from .collectors.resources import ResourceCollector

            self._collector = ResourceCollector(self._dt)
            self._cursor = 0
        self._collector.start()

    def _stop_collect(self) -> None:
        collector = self._collector
        if collector is None:
            return
        collector.stop()
        rows, self._cursor = collector.since(self._cursor)
        mem = np.asarray(rows["memory"], dtype=np.float64) / 1e6
        self.results.extend(
            map(ResourceData, rows["time"].tolist(), mem.tolist(), rows["cpu"].tolist())
        )

    def __enter__(self) -> ResourceProfiler:
        self._entered = True
        super().__enter__()
        self._start_collect()
        return self

    def __exit__(self, *exc: object) -> None:
        self._entered = False
        try:
            self._stop_collect()
            self.close()
        finally:
            super().__exit__(*exc)

    def on_compute_start(self, compute: Compute) -> None:
        with self._state_lock:
            self._computes += 1
            if not self._entered:
                self._start_collect()

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        with self._state_lock:
            self._computes -= 1
            if not self._entered and self._computes == 0:
                self._stop_collect()

    def close(self) -> None:
        """Stop the sampler thread (idempotent)."""
        collector, self._collector = self._collector, None
        if collector is not None:
            collector.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class CacheProfiler(_Timed):
    """Scheduler cache profiler: ``results`` is a list of ``CacheData(key, task, metric,
    cache_time, free_time)``; ``metric(result)`` sizes each result (default: 1)."""

    def __init__(
        self, metric: Callable[[Any], Any] | None = None, metric_name: str | None = None
    ) -> None:
        super().__init__()
        self._metric = optional_callable("metric", metric)
        if metric_name is not None and not isinstance(metric_name, str):
            raise TypeError(f"metric_name must be a string, got {metric_name!r}")
        if metric_name:
            self._metric_name = metric_name
        elif metric is not None:
            self._metric_name = getattr(metric, "__name__", "metric")
        else:
            self._metric_name = "count"
        self._dsk: dict[Any, Any] = {}
        self._live: dict[int, dict[Hashable, tuple[Any, float]]] = {}

    def on_compute_start(self, compute: Compute) -> None:
        self._dsk.update(compute.dsk)
        self._live[compute.id] = {}

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        live = self._live.get(compute.id)
        if event.error is not None or live is None:
            return
        now = perf_counter()
        value = 1 if self._metric is None else self._metric(result)
        live[event.key] = (value, now)
        released = state.get("released", ())
        dsk = compute.dsk
        for dep in state["dependencies"].get(event.key, ()):
            if dep in released:
                entry = live.pop(dep, None)
                if entry is not None:
                    self.results.append(CacheData(dep, dsk.get(dep), entry[0], entry[1], now))

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        live = self._live.pop(compute.id, None) or {}
        now = perf_counter()
        dsk = compute.dsk
        for key, (value, start) in live.items():
            self.results.append(CacheData(key, dsk.get(key), value, start, now))

    def clear(self) -> None:
        super().clear()
        self._dsk = {}


class ProgressBar(Callback):
    """A text progress bar, dask's format: ``[####    ] | 50% Completed | 1.2s``.

    ``minimum``: seconds before anything is shown; ``width``: bar width; ``dt``: redraw
    period; ``out``: file to write to (default ``sys.stdout``). A timer thread redraws;
    nothing is done per task, and the bar ends as soon as the compute does.

    Graphs sent to a ``dask.distributed`` cluster while the bar is on (``with`` or
    ``register()``) are shown too: one line per burst of cluster work, from its first graph
    until every graph of the burst has finished, counted from the scheduler's batches
    (:mod:`daskprofile.record.cluster_progress`). Leaving the block waits a moment for the
    last batch (at most two batch periods and a second), then removes everything.
    """

    def __init__(
        self, minimum: float = 0, width: int = 40, dt: float = 0.1, out: IO[str] | None = None
    ) -> None:
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive integer, got {width!r}")
        if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) or minimum < 0:
            raise ValueError(f"minimum must be a number of seconds >= 0, got {minimum!r}")
        self._minimum = minimum
        self._width = width
        self._dt = duration("dt", dt)
        self._file = sys.stdout if out is None else out
        self.last_duration = 0.0
        self._running = False
        self._state: dict[str, Any] | None = None
        self._wake = threading.Event()
        self._timer: threading.Thread | None = None
        self._start_time = 0.0
        self._cluster = ClusterProgress(on_graph=self._cluster_graph, flush=flush_for(self._dt))
        self._cluster_lock = threading.Lock()
        self._burst: _Burst | None = None
        self._leaving = False  # the block ends: the end is drawn by _cluster_done only

    # ------------------------------------------------------------ registration
    def __enter__(self) -> ProgressBar:
        super().__enter__()
        self._cluster.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if not getattr(self, "_was_registered", False):
                self._cluster_off()
        finally:
            super().__exit__(*exc)

    def register(self) -> None:
        super().register()
        self._cluster.start()

    def unregister(self) -> None:
        try:
            self._cluster_off()
        finally:
            super().unregister()

    # ------------------------------------------------------------ local computes
    def _start(self, dsk: Any) -> None:
        self._state = None
        self._start_time = perf_counter()
        self._running = True
        self._wake.clear()
        self._timer = threading.Thread(
            target=self._timer_func, name="daskprofile-progress", daemon=True
        )
        self._timer.start()

    def _start_state(self, dsk: Any, state: dict[str, Any]) -> None:
        self._state = state

    def _finish(self, dsk: Any, state: dict[str, Any], errored: bool) -> None:
        self._running = False
        self._wake.set()
        if self._timer is not None:
            self._timer.join()
        elapsed = perf_counter() - self._start_time
        self.last_duration = elapsed
        if elapsed < self._minimum:
            return
        if errored:
            self._update_bar(elapsed)
        else:
            self._draw_bar(1, elapsed)
        self._write("\n")

    def _timer_func(self) -> None:
        while not self._wake.wait(self._dt):
            elapsed = perf_counter() - self._start_time
            if elapsed > self._minimum:
                self._update_bar(elapsed)

    def _update_bar(self, elapsed: float) -> None:
        s = self._state
        if not s:
            self._draw_bar(0, elapsed)
            return
        ndone = len(s["finished"])
        ntasks = ndone + len(s["ready"]) + len(s["waiting"]) + len(s["running"])
        if ndone < ntasks:
            self._draw_bar(ndone / ntasks, elapsed)

    # ------------------------------------------------------------ cluster graphs
    def _cluster_graph(self) -> None:
        """A graph was sent to a cluster (submitting thread): start a burst if none runs."""
        with self._cluster_lock:
            if self._burst is not None:
                return
            burst = self._burst = _Burst(perf_counter(), self._cluster.counts())
            burst.thread = threading.Thread(
                target=self._cluster.guard,
                args=(self._burst_timer, burst),
                name="daskprofile-progress",
                daemon=True,
            )
            burst.thread.start()

    def _burst_timer(self, burst: _Burst) -> None:
        """Redraw the burst every ``dt``; end it once all its graphs have finished."""
        while not burst.stop.wait(self._dt):
            with self._cluster_lock:  # (a graph announced meanwhile is pending: not ended)
                if self._burst is not burst:
                    return
                counts = self._cluster.counts()
                ended = counts.complete and not self._leaving
                if ended:
                    self._burst = None
            if ended:
                self._end_burst(burst, counts, finished=True)
                return
            elapsed = perf_counter() - burst.start
            if elapsed > self._minimum:
                self._draw_counts(counts.since(burst.base), elapsed)

    def _draw_counts(self, counts: ClusterCounts, elapsed: float) -> None:
        done, total = counts.tasks()
        if not total:
            self._draw_bar(0, elapsed)
        elif done < total:
            self._draw_bar(done / total, elapsed)

    def _end_burst(self, burst: _Burst, counts: ClusterCounts, finished: bool) -> None:
        elapsed = perf_counter() - burst.start
        self.last_duration = elapsed
        if elapsed < self._minimum:
            return
        added = counts.since(burst.base)
        if finished and not added.erred:
            self._draw_bar(1, elapsed)
        else:
            self._draw_counts(added, elapsed)
        self._write("\n")

    def _cluster_off(self) -> None:
        """Leaving: wait (bounded) for the last batches, draw the end, remove everything."""
        cluster = self._cluster
        self._leaving = True
        try:
            finished = cluster.settle()
            if finished:
                cluster.guard(self._cluster_done, True)
                cluster.stop()
            else:  # left running: stopping brings the last counts in first
                cluster.stop()
                cluster.guard(self._cluster_done, False)
        finally:
            self._leaving = False

    def _cluster_done(self, finished: bool) -> None:
        """The block ends: the running burst's last line (``finished``: every graph ended)."""
        with self._cluster_lock:
            burst, self._burst = self._burst, None
        if burst is None:
            return
        burst.stop.set()
        if burst.thread is not None and burst.thread is not threading.current_thread():
            burst.thread.join()
        self._end_burst(burst, self._cluster.counts(), finished)

    # ------------------------------------------------------------ drawing
    def _draw_bar(self, frac: float, elapsed: float) -> None:
        bar = "#" * int(self._width * frac)
        percent = int(100 * frac)
        self._write(f"\r[{bar:<{self._width}}] | {percent}% Completed | {format_time(elapsed)}")

    def _write(self, text: str) -> None:
        with contextlib.suppress(ValueError, AttributeError):
            self._file.write(text)
            self._file.flush()


@dataclass(eq=False)
class _Burst:
    """Cluster work drawn on one line: from a graph sent while none ran until all ended."""

    start: float
    base: ClusterCounts  # the counts before it (subtracted)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class StackProfiler(_Timed):
    """Statistical stack profiler: ``results`` is ``{group: tree}`` (distributed's form)
    for the tasks run in the block, sampled every ``interval`` seconds."""

    def __init__(self, interval: float = 0.01, cycle: float = 1.0) -> None:
        super().__init__()
        from .collectors.stacks import StackCollector

        self._interval = duration("interval", interval)
        self._collector = StackCollector(self._interval, duration("cycle", cycle))
        self.worker_hooks = (StackWorkerHook(self._interval, self._collector.cycle),)
        self.results: Any = {}

    track_running = True

    def __enter__(self) -> StackProfiler:
        super().__enter__()
        self.results = {}
        self._collector.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._collector.stop()
            self.results = self._collector.trees(self.start_time, None)
        finally:
            super().__exit__(*exc)

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        merge_stacks(self._collector, batch.extra, compute)

    def hot_lines(self, func_or_name: object) -> list[tuple[str, int, int]]:
        """``(filename, line, samples)`` of one function's lines, hottest first."""
        from .stacktree import hot_lines

        return hot_lines(self.results, func_or_name)

    def clear(self) -> None:
        super().clear()
        self.results = {}


# ------------------------------------------------------------------ runs + visualize
def to_run(profilers: Sequence[Any]) -> Run:
    """A :class:`Run` made of drop-in profilers' results (for the exporters)."""
    starts = [p.start_time for p in profilers if getattr(p, "start_time", None) is not None]
    ends = [p.end_time for p in profilers if getattr(p, "end_time", None) is not None]
    data: dict[str, Any] = {}
    times: list[float] = []
    for p in profilers:
        if isinstance(p, Profiler):
            data["tasks"] = _task_table(p.results)
            times += [r.start_time for r in p.results]
        elif isinstance(p, ResourceProfiler):
            data["resources"] = _resource_table(p.results)
            times += [r[0] for r in p.results]
        elif isinstance(p, CacheProfiler):
            data["cache"] = _cache_table(p.results)
            times += [r.cache_time for r in p.results]
        elif isinstance(p, StackProfiler):
            data["stacks"] = p.results
    t0 = min(starts or times or [0.0])
    t1 = max(ends or [t0])
    return Run({"id": "profilers", "t0": t0, "t1": t1, "finished": True}, data)


def _worker_label(worker_id: Any, ordinal: dict[Any, int]) -> str:
    """``worker 0``, ``worker 1``, ... in order of first appearance (dask's ids are thread
    idents or pids: long numbers that say nothing on an axis)."""
    return f"worker {ordinal.setdefault(worker_id, len(ordinal))}"


def _task_table(results: list[TaskData]) -> dict[str, Any]:
    groups, workers = GroupIndex(), GroupIndex()
    ordinal: dict[Any, int] = {}
    n = len(results)
    start = np.fromiter((r.start_time for r in results), np.float64, n)
    return {
        "key": [str(r.key) for r in results],
        "group": np.fromiter((groups.index(r.key, r.task) for r in results), np.uint32, n),
        "worker": np.fromiter(
            (workers.group_id(_worker_label(r.worker_id, ordinal)) for r in results),
            np.uint16,
            n,
        ),
        "submit": start,
        "start": start,
        "stop": np.fromiter((r.end_time for r in results), np.float64, n),
        "error": np.zeros(n, np.uint16),
        "compute": np.ones(n, np.uint32),
        "groups": groups.groups,
        "workers": workers.groups,
        "error_types": [None],
        "dropped": 0,
    }


def _resource_table(results: list[ResourceData]) -> dict[str, Any]:
    n = len(results)
    rows = [ResourceData(*r) for r in results]  # plain (time, mem, cpu) tuples too, as dask
    return {
        "time": np.fromiter((r.time for r in rows), np.float64, n),
        "cpu": np.fromiter((r.cpu for r in rows), np.float64, n),
        "memory": np.fromiter((r.mem * 1e6 for r in rows), np.int64, n),
        "processes": np.ones(n, np.int32),
    }


def _cache_table(results: list[CacheData]) -> dict[str, Any]:
    groups = GroupIndex()
    events: list[tuple[float, int, float]] = []
    for r in results:
        gid = groups.index(r.key, r.task)
        metric = float(r.metric)
        events += [(r.cache_time, gid, metric), (r.free_time, gid, -metric)]
    events.sort(key=lambda e: e[0])
    occupancy: dict[int, float] = {}
    rows = []
    for t, gid, delta in events:
        occupancy[gid] = occupancy.get(gid, 0.0) + delta
        rows.append((t, gid, occupancy[gid]))
    return {
        "time": np.array([r[0] for r in rows], np.float64),
        "group": np.array([r[1] for r in rows], np.uint32),
        "metric": np.array([r[2] for r in rows], np.float64),
        "groups": groups.groups,
        "dropped": 0,
    }


def visualize(
    profilers: Any,
    filename: str | os.PathLike[str] | None = None,
    show: bool = True,
    save: bool | None = None,
    mode: str | None = None,
    **kwargs: Any,
) -> Any:
    """Plot drop-in profilers (one or a list), stacked on one time axis; dask's API.

    Returns the bokeh figure (a ``gridplot`` for several). ``kwargs`` go to every
    ``bokeh.plotting.figure`` (``width``, ``height``, ``tools``, ``title``, ...).
    ``save`` (default: when not in a notebook) writes one self-contained file,
    ``filename`` (default ``profile.html``), with BokehJS inlined unless ``mode="cdn"``;
    ``show`` shows it inline in a notebook, else in a browser.
    """
    from .export import figures

    if "file_path" in kwargs:
        warnings.warn(
            "visualize(): the file_path keyword argument is deprecated; use filename",
            FutureWarning,
            stacklevel=2,
        )
        filename = kwargs.pop("file_path")
    profs = list(profilers) if isinstance(profilers, (list, tuple)) else [profilers]
    kinds = [_kind(p) for p in profs]
    metric_name = next((p._metric_name for p in profs if isinstance(p, CacheProfiler)), "count")
    layout = figures.plot(to_run(profs), kinds, metric_name=metric_name, **kwargs)
    figures.publish(layout, filename, show=show, save=save, mode=mode)
    return layout


def _kind(profiler: Any) -> str:
    for cls, kind in (
        (Profiler, "tasks"),
        (ResourceProfiler, "resources"),
        (CacheProfiler, "cache"),
        (StackProfiler, "stacks"),
    ):
        if isinstance(profiler, cls):
            return kind
    raise TypeError(
        "profilers must be daskprofile Profiler, ResourceProfiler, CacheProfiler or "
        f"StackProfiler instances, got {type(profiler).__name__}"
    )
