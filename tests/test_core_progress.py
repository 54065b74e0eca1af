"""ProgressBar and ResourceProfiler drop-ins: prompt endings, dask's text format; the
counts a bar shows of cluster graphs (the cluster itself: test_progress_cluster.py)."""

from __future__ import annotations

import io
import time
from operator import add

import dask
import pytest

from daskprofile import ProgressBar, ResourceProfiler
from daskprofile.record.cluster_progress import ClusterCounts

DSK = {"a": 1, "b": (add, "a", 1), "c": (add, "b", 1)}


def test_progressbar_returns_promptly() -> None:
    # dask's ProgressBar waits ~dt (100 ms) at the end of every compute
    out = io.StringIO()
    timings = []
    for _ in range(5):
        t = time.perf_counter()
        with ProgressBar(out=out, dt=1.0):
            dask.threaded.get(DSK, "c")
        timings.append(time.perf_counter() - t)
    assert min(timings) < 0.03
    assert out.getvalue().count("100% Completed") == 5


def test_progressbar_text_format_like_dask() -> None:
    out = io.StringIO()
    with ProgressBar(out=out, width=10):
        dask.delayed(time.sleep)(0.35).compute(scheduler="threads")
    text = out.getvalue()
    last = text.rstrip("\n").split("\r")[-1]
    bar, percent, elapsed = (p.strip() for p in last.split("|"))
    assert bar == "[##########]"
    assert percent == "100% Completed"
    assert elapsed.endswith("s")
    assert text.count("\r[          ] | 0% Completed") >= 1  # drawn by the timer meanwhile
    assert text.endswith("\n")


def test_progressbar_does_not_flush_per_task() -> None:
    class CountingIO(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            CountingIO.flushes += 1

    out = CountingIO()
    dsk = {("x-abc12345", i): (add, i, 1) for i in range(500)}
    with ProgressBar(out=out, dt=10):
        dask.threaded.get(dsk, list(dsk))
    assert CountingIO.flushes <= 2


def test_progressbar_error_leaves_no_thread() -> None:
    def fail() -> None:
        raise ZeroDivisionError

    pbar = ProgressBar(out=io.StringIO())
    with pytest.raises(ZeroDivisionError), pbar:
        dask.threaded.get({"a": (fail,)}, "a")
    assert not pbar._running
    assert pbar._timer is not None
    assert not pbar._timer.is_alive()


def test_resource_profiler_ends_promptly_whatever_dt() -> None:
    # dask's waits up to dt (1 s by default) and counts its own tracker process
    t = time.perf_counter()
    with ResourceProfiler(dt=5) as rprof:
        dask.threaded.get(DSK, "c")
        end = time.perf_counter()
    assert time.perf_counter() - end < 0.05  # the bound on leaving the block
    assert time.perf_counter() - t < 0.5
    assert len(rprof.results) >= 1
    assert not rprof._is_running()
    r = rprof.results[0]
    assert r.mem > 1
    assert r.cpu >= 0


def test_cluster_counts_are_all_done_only_once_every_graph_finished_cleanly() -> None:
    running = ClusterCounts(done={"a": 3, "b": 9}, total={"a": 5, "b": 2}, graphs=2, pending=1)
    assert running.groups() == {"a": (3, 5), "b": (2, 2)}  # a task run twice: never above
    assert running.tasks() == (5, 7)
    assert not running.complete
    # a graph whose tasks were partly in memory already: they never run, yet it is done
    finished = ClusterCounts(done={"a": 3}, total={"a": 5}, graphs=1, pending=0)
    assert finished.complete
    assert finished.tasks() == (5, 5)
    failed = ClusterCounts(done={"a": 3}, total={"a": 5}, graphs=1, pending=0, erred=1)
    assert failed.tasks() == (3, 5)


def test_cluster_counts_since_a_base_keep_graphs_and_pending() -> None:
    base = ClusterCounts(done={"a": 5}, total={"a": 5}, graphs=1, pending=0)
    now = ClusterCounts(done={"a": 6, "b": 1}, total={"a": 10, "b": 4}, graphs=2, pending=1)
    added = now.since(base)
    assert (dict(added.done), dict(added.total)) == ({"a": 1, "b": 1}, {"a": 5, "b": 4})
    assert (added.graphs, added.pending, added.complete) == (2, 1, False)
    assert added.tasks() == (2, 9)
