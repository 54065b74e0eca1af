"""MemorySampler: distributed's API on the local schedulers and on a real LocalCluster."""

from __future__ import annotations

import asyncio
import gc
import mmap
import time
from typing import Any

import dask
import numpy as np
import pandas as pd
import pytest

from daskprofile import MemorySampler


def _allocate(n_bytes: int) -> int:
    """A task that holds ``n_bytes`` of fresh memory for a moment: an anonymous mapping
    with every page written, so the process's RSS rises whatever memory the allocator
    kept from earlier tests (a ``np.ones`` can be served from it and change nothing)."""
    with mmap.mmap(-1, n_bytes) as block:
        pages = np.frombuffer(block, dtype=np.uint8)
        pages[:] = 1
        time.sleep(0.3)
        ok = int(pages[-1] == 1)
        del pages  # the mapping closes only when no view of it is left
    return ok


def _compute(scheduler: str, n_bytes: int = 80_000_000) -> None:
    tasks = [dask.delayed(_allocate)(n_bytes, dask_key_name=f"alloc-{i}") for i in range(2)]
    dask.compute(*tasks, scheduler=scheduler)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_local_sampler_records_the_process_memory(scheduler: str) -> None:
    gc.collect()  # an earlier test's garbage freed mid-run would hide the rise
    ms = MemorySampler()
    before = time.time()
    with ms.sample("run", interval=0.05):
        _compute(scheduler)
    after = time.time()
    points = ms.samples["run"]
    assert len(points) >= 4
    times = [t for t, _ in points]
    assert before - 0.1 <= times[0] <= times[-1] <= after + 0.1
    assert times == sorted(times)
    rss = np.array([b for _, b in points])
    assert rss.min() > 10_000_000  # a Python process with numpy
    assert rss.max() - rss.min() > 50_000_000  # the 80 MB blocks were seen


def test_processes_scheduler_memory_is_summed_over_the_worker_processes() -> None:
    ms = MemorySampler()
    with ms.sample("procs", interval=0.05):
        _compute("processes", n_bytes=120_000_000)
    rss = np.array([b for _, b in ms.samples["procs"]])
    assert rss.max() - rss[0] > 100_000_000


def test_default_label_and_several_series() -> None:
    ms = MemorySampler()
    with ms.sample(interval=0.02):
        time.sleep(0.05)
    with ms.sample("b", interval=0.02):
        time.sleep(0.1)
    assert len(ms.samples) == 2
    assert "b" in ms.samples
    df = ms.to_pandas()
    assert list(df.columns)[1] == "b"
    assert isinstance(df.index, pd.DatetimeIndex)
    aligned = ms.to_pandas(align=True)
    assert isinstance(aligned.index, pd.TimedeltaIndex)
    assert aligned.index[0] == pd.Timedelta(0)
    # both series start at 0 when aligned: no NaN in the first row
    assert aligned.iloc[0].notna().all()


def test_sample_records_even_when_the_block_raises() -> None:
    ms = MemorySampler()
    with pytest.raises(ZeroDivisionError), ms.sample("boom", interval=0.02):
        1 / 0
    assert len(ms.samples["boom"]) >= 1


@pytest.mark.parametrize("interval", [0, -1, float("nan"), float("inf"), "soon", None, True])
def test_invalid_interval_is_a_value_error_naming_it(interval: object) -> None:
    with pytest.raises(ValueError, match="interval"):
        MemorySampler().sample(interval=interval)  # type: ignore[arg-type]


@pytest.mark.parametrize("measure", ["managed", "nope", None, 3])
def test_invalid_local_measure_is_a_value_error_naming_it(measure: object) -> None:
    with pytest.raises(ValueError, match="measure"):
        MemorySampler().sample(measure=measure)  # type: ignore[arg-type]


def test_interval_accepts_duration_strings() -> None:
    ms = MemorySampler()
    with ms.sample("s", interval="20ms"):
        time.sleep(0.1)
    assert len(ms.samples["s"]) >= 3


def test_plot_without_matplotlib_is_a_bokeh_figure() -> None:
    pytest.importorskip("bokeh")
    ms = MemorySampler()
    with ms.sample("a", interval=0.02):
        time.sleep(0.06)
    fig = ms.plot(align=True, title="mem")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from bokeh.models import Plot

        assert isinstance(fig, Plot)
        assert fig.title.text == "mem"


@pytest.fixture(scope="module")
def distributed() -> Any:
    """distributed, with the threads it keeps for the life of the process already started
    (its offload executor), so the per-test leftover check does not count them."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        client.submit(sum, [1]).result()
    return distributed


@pytest.mark.slow
@pytest.mark.parametrize("processes", [False, True])
def test_distributed_cluster_is_sampled_by_the_scheduler(distributed: Any, processes: bool) -> None:
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=processes, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        ms = MemorySampler()
        with ms.sample("cluster", interval=0.05):  # the default client
            _compute("distributed")
        with ms.sample("managed", client=client, measure="managed", interval=0.05):
            client.compute(dask.delayed(np.ones)(1_000_000)).result()
        with pytest.raises(ValueError, match="measure"):
            ms.sample(measure="bogus")
    assert len(ms.samples["cluster"]) >= 3
    assert max(b for _, b in ms.samples["cluster"]) > 50_000_000
    assert len(ms.samples["managed"]) >= 1
    assert set(ms.to_pandas().columns) == {"cluster", "managed"}


@pytest.mark.slow
def test_asynchronous_client_gives_an_async_context_manager(distributed: Any) -> None:

    async def main() -> MemorySampler:
        async with (
            distributed.LocalCluster(
                n_workers=1, processes=False, asynchronous=True, dashboard_address=":0"
            ) as cluster,
            distributed.Client(cluster, asynchronous=True) as client,
        ):
            ms = MemorySampler()
            async with ms.sample("async", client=client, interval=0.05):
                await asyncio.sleep(0.2)
            return ms

    ms = asyncio.run(main())
    assert len(ms.samples["async"]) >= 2
