"""dask.distributed support: a real LocalCluster (in-process and processes), no mocks."""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

import daskprofile  # noqa: E402
from daskprofile import distributed as dd  # noqa: E402
from daskprofile.distributed._scheduler_graphs import GraphProbe  # noqa: E402
from daskprofile.distributed._worker import WorkerProbe  # noqa: E402
from daskprofile.distributed.collector import ALL_TASKS  # noqa: E402
from daskprofile.stacktree import to_folded_lines  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("distributed_threads")]

OUR_THREADS = ("daskprofile-distributed", "daskprofile-resources")


def slow(x: int) -> int:
    time.sleep(0.1)
    return x


def spin(seconds: float) -> float:
    """Pure Python busy work: the innermost frame of every sample is this function."""
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass
    return seconds


def crunch(seconds: float) -> float:
    """CPU work that releases the GIL (hashing large buffers), as numpy-style tasks do.

    In-process workers share the GIL with the samplers: pure Python busy loops in two
    task threads can starve a sampler thread for a whole short block.
    """
    data = bytes(1 << 22)
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        hashlib.sha256(data).digest()
    return seconds


def divide(x: int) -> float:
    return 1 / x


def _our_threads(dask_worker: Any = None) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(OUR_THREADS)]


def _settled(read: Callable[[], Any], expected: Any, timeout: float = 3.0) -> Any:
    """``read()`` once it equals ``expected`` (samplers end within ms of the block), or last."""
    deadline = time.monotonic() + timeout
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.02)
        value = read()
    return value


def _cluster_state(client: Any) -> dict[str, Any]:
    """What plugins, topics and daskprofile threads the cluster holds."""

    def on_scheduler(dask_scheduler: Any) -> dict[str, Any]:
        topics = dask_scheduler._broker._topics
        return {
            "plugins": sorted(dask_scheduler.plugins),
            "worker_plugins": sorted(dask_scheduler.worker_plugins),
            "topics": sorted(t for t in topics if t.startswith("daskprofile")),
        }

    def on_worker(dask_worker: Any) -> tuple[list[str], list[str]]:
        return sorted(dask_worker.plugins), _our_threads()

    return {"scheduler": client.run_on_scheduler(on_scheduler), "workers": client.run(on_worker)}


@pytest.fixture(params=[False, True], ids=["inprocess", "processes"])
def client(request: pytest.FixtureRequest) -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=request.param,
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        c.run(slow, 0)  # workers import this module before any timing
        yield c


@pytest.fixture
def inproc_client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _workers(client: Any) -> set[str]:
    return set(client.scheduler_info()["workers"])


# ---------------------------------------------------------------- tasks
def test_every_task_is_timed_on_its_worker(client: Any) -> None:
    with daskprofile.profile(client=client, dt=0.05) as run:
        assert client.gather(client.map(slow, range(8))) == list(range(8))
    tasks = run.tasks
    assert len(tasks) == 8
    assert set(tasks["group"]) == {"slow"}
    assert (tasks["status"] == "ok").all()
    duration = tasks["stop"] - tasks["start"]
    assert duration.between(0.095, 0.3).all(), duration
    assert (tasks["start"] >= tasks["submit"] - 0.01).all()
    # worker labels name the real worker addresses, one thread each
    addresses = {dd.task_worker_address(w) for w in tasks["worker"]}
    assert addresses == _workers(client)
    assert tasks["worker"].nunique() == 2
    for _, rows in tasks.sort_values("start").groupby("worker"):
        assert (rows["start"].to_numpy()[1:] >= rows["stop"].to_numpy()[:-1] - 1e-6).all()
    # the two workers ran in parallel: some tasks of different workers overlap in time
    rows = list(tasks[["worker", "start", "stop"]].itertuples(index=False))
    assert any(
        a.worker != b.worker and a.start < b.stop and b.start < a.stop for a in rows for b in rows
    )
    assert run.meta["schedulers"] == ["distributed"]
    assert run.meta["computes"] == 1
    assert run.meta["errors"] == []


def test_failed_tasks_are_recorded_with_their_exception_type(inproc_client: Any) -> None:
    with daskprofile.profile(client=inproc_client) as run:
        futures = inproc_client.map(divide, [1, 0])
        assert futures[0].result() == 1
        with pytest.raises(ZeroDivisionError):
            futures[1].result()
    tasks = run.tasks.set_index("status")
    assert tasks.loc["error", "error"] == "ZeroDivisionError"
    assert tasks.loc["ok", "group"] == "divide"


def clock_moved(seconds: float) -> tuple[float, float]:
    """Sleep; half-way, the worker's estimate of the scheduler's clock moves by 0.3 s (as
    a heartbeat's can); the shared monotonic clock around it."""
    start = time.perf_counter()
    time.sleep(seconds / 2)
    distributed.get_worker().scheduler_delay += 0.3
    time.sleep(seconds / 2)
    return start, time.perf_counter()


def test_a_task_keeps_its_times_when_the_clock_correction_moves_while_it_runs(
    inproc_client: Any,
) -> None:
    """On the kernel's host the correction distributed adds to a task's times is taken off
    again: the one in force when the task started, also when it changed since."""
    with daskprofile.profile(client=inproc_client) as run:
        futures = [inproc_client.submit(clock_moved, 0.1, pure=False) for _ in range(2)]
        truth = dict(zip((f.key for f in futures), inproc_client.gather(futures), strict=True))
    tasks = run.tasks.set_index("key")
    t0 = run.meta.t0
    for key, (start, stop) in truth.items():
        # (20 ms, as for a far worker's clock: a GIL hand-over between distributed's stamp
        # and the task's own may take a switch interval; the move is 300 ms)
        assert abs(tasks.loc[key, "start"] - (start - t0)) < 0.02, key
        assert abs(tasks.loc[key, "stop"] - (stop - t0)) < 0.02, key
        assert tasks.loc[key, "submit"] <= tasks.loc[key, "start"]


def test_group_of_dask_collections_and_fused_tasks(inproc_client: Any) -> None:
    da = pytest.importorskip("dask.array")
    x = da.ones((40, 40), chunks=10)
    with daskprofile.profile(client=inproc_client, stacks=False, resources=False) as run:
        assert float(((x + 1) * 2).sum().compute()) == 40 * 40 * 4
    groups = set(run.tasks["group"])
    assert any(g.startswith("sum") for g in groups), groups
    assert not any("-" in g and g[-1].isdigit() for g in groups)
    assert len(run.tasks) >= 16


def test_only_this_clients_tasks_unless_asked(inproc_client: Any) -> None:
    address = inproc_client.scheduler.address
    with distributed.Client(address) as other:
        with daskprofile.profile(client=inproc_client, stacks=False, resources=False) as mine:
            other.submit(slow, 1, key="other-1").result()
            inproc_client.submit(slow, 2, key="mine-1").result()
        with daskprofile.profile(
            client=inproc_client, all_clients=True, stacks=False, resources=False
        ) as every:
            other.submit(slow, 3, key="other-2").result()
    assert list(mine.tasks["key"]) == ["mine-1"]
    assert list(every.tasks["key"]) == ["other-2"]


# ---------------------------------------------------------------- resources, cache, stacks
def test_resources_per_worker_process(client: Any) -> None:
    with daskprofile.profile(client=client, dt=0.05) as run:
        client.gather(client.map(crunch, [0.3, 0.31]))
    res = run.resources
    assert len(res) >= 3
    assert (res["memory"] > 10_000_000).all()
    assert res["cpu"].max() > 30
    info = run.meta["distributed"]
    covered = {w for p in info["processes"] for w in p["workers"]}
    assert covered == _workers(client)
    for proc in info["processes"]:
        assert len(proc["time"]) == len(proc["cpu"]) == len(proc["memory"]) >= 3
    pids = {p["pid"] for p in info["processes"]}
    assert len(pids) == (2 if _workers_in_processes(client) else 1)
    assert {w["pid"] for w in info["workers"].values()} == pids


def _workers_in_processes(client: Any) -> bool:
    import os

    return any(pid != os.getpid() for pid in client.run(os.getpid).values())


def test_cache_is_bytes_held_per_group(inproc_client: Any) -> None:
    with daskprofile.profile(client=inproc_client, stacks=False, resources=False) as run:
        futures = inproc_client.map(np.ones, [100_000, 200_000])
        inproc_client.gather(futures)
        time.sleep(0.3)
    cache = run.cache
    ones = cache[cache["group"] == "ones"]
    assert ones["metric"].max() >= 300_000 * 8
    assert run.meta["distributed"]["cache_metric"] == "nbytes"


def test_stacks_keep_the_task_function_as_innermost_frame(client: Any) -> None:
    with daskprofile.profile(client=client, interval=0.005) as run:
        client.gather(client.map(spin, [0.4, 0.41]))
    tree = run.stacks["spin"]
    assert tree["count"] >= 20
    top = {n["description"]["name"]: n for n in tree["children"].values()}
    # cut where distributed calls: no frame of distributed's own at the root. A sample can
    # also land as the worker measures the result (dask.sizeof) in the task's thread.
    assert not [n for n in top.values() if "/distributed/" in n["description"]["filename"]]
    leaf = top["spin"]
    assert leaf["count"] >= 0.9 * tree["count"]
    assert not leaf["children"]  # its samples end in spin itself
    lines = run.hot_lines(spin)
    assert len(lines)
    assert lines["samples"].sum() >= 20
    assert run.stack_history
    assert "spin" in run.stack_history[0][2]


def short_spin(seconds: float) -> float:
    return spin(seconds)


def test_short_gil_holding_tasks_get_their_share_of_samples(client: Any) -> None:
    # A task shorter than the switch interval runs to its end holding the GIL; the sampler
    # got the GIL between tasks only: these short tasks had ~1% of the samples for ~50%
    # of the time until the workers' samplers caught them (see _ShortTaskCatcher).
    args = [(short_spin, 0.0005)] * 1200 + [(spin, 0.01)] * 60
    random.Random(0).shuffle(args)
    interval = 0.005
    with daskprofile.profile(client=client, interval=interval) as run:
        client.gather([client.submit(fn, a, pure=False) for fn, a in args])
    tasks = run.tasks
    seconds = (tasks["stop"] - tasks["start"]).groupby(tasks["group"]).sum()
    samples = {group: tree["count"] for group, tree in run.stacks.items()}
    assert samples.get("short_spin", 0) >= 0.3 * seconds["short_spin"] / interval
    time_share = seconds["short_spin"] / seconds.sum()
    assert samples.get("short_spin", 0) / sum(samples.values()) >= 0.5 * time_share


# ---------------------------------------------------------------- lifecycle
def test_plugins_topic_and_threads_are_removed(client: Any) -> None:
    before = _cluster_state(client)
    with daskprofile.profile(client=client) as run:
        during = _cluster_state(client)
        client.gather(client.map(slow, range(2)))
    after = _settled(lambda: _cluster_state(client), before)
    assert after == before
    assert during != before
    assert any(p.startswith("daskprofile") for p in during["scheduler"]["plugins"])
    assert all(threads for _, threads in during["workers"].values())
    assert not _settled(_our_threads, [])
    assert run.finished


def test_late_messages_after_the_block_are_dropped_without_an_error_log(
    inproc_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker's last rows may still be on their way when the block ends: distributed
    logs an error for an event of a topic without handler; the handler left drops them
    and holds nothing of the run, and is gone later. (A client reaching the scheduler by
    address subscribes to the run's topic; one made on a cluster of this process does
    not: the next test.)"""
    import logging

    from daskprofile.distributed import collector as dc

    address = inproc_client.scheduler.address
    with distributed.Client(address) as by_address:
        with daskprofile.profile(client=by_address) as run:
            by_address.gather(by_address.map(slow, range(2)))
        assert len(run.tasks) == 2
        late = [t for t in by_address._event_handlers if t.startswith("daskprofile-")]
        assert late, by_address._event_handlers
        with caplog.at_level(logging.ERROR, logger="distributed.client"):
            for t in late:
                by_address.sync(by_address._handle_event, t, (time.time(), b"late"))
        assert not [r for r in caplog.records if "event handler" in r.getMessage()]
        # the handler left holds nothing of the run (a module-level function)
        assert all(by_address._event_handlers[t] is dc._drop_late_event for t in late)
        assert run.finished
        old, dc.LATE_EVENTS = dc.LATE_EVENTS, 0.0
        try:
            with daskprofile.profile(client=by_address):
                pass
        finally:
            dc.LATE_EVENTS = old

        def ours() -> list[str]:
            return [t for t in by_address._event_handlers if t.startswith("daskprofile-")]

        assert _settled(ours, late) == late  # that one is gone, the first waits 30 s


@pytest.mark.parametrize("client", [False, True], indirect=True, ids=["threads", "processes"])
def test_a_scheduler_in_this_process_hands_the_events_over_directly(client: Any) -> None:
    """The client of a LocalCluster made here does not subscribe to the run's topic: the
    scheduler plugin hands it the events (the workers' first ones too, logged before the
    plugin came), and nothing of it is left after the block."""
    from daskprofile.distributed import _common
    from daskprofile.distributed.collector import DistributedCollector

    collector = DistributedCollector(client)
    with collector:
        assert collector.local
        assert collector.started
        assert not collector.failed
        assert list(_common.LOCAL_SINKS) == [collector.topic]
        client.gather(client.map(slow, range(6), pure=False))
    assert not collector.failed
    assert len(collector.tasks.columns) == 6
    assert len(collector.resources_snapshot()["time"]) > 0  # the workers' samples came too
    assert not [t for t in client._event_handlers if t.startswith("daskprofile-")]
    assert _common.LOCAL_SINKS == {}
    topics = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler._broker._topics))
    assert not [t for t in topics if t.startswith("daskprofile-")]
    with daskprofile.profile(client=client) as run:  # and through a recording
        client.gather(client.map(slow, range(3), pure=False))
    assert len(run.tasks) == 3
    assert _common.LOCAL_SINKS == {}
    # the scheduler was called directly: ``run_on_scheduler`` would have logged each call
    # in its event log, which keeps 100,000 of them (the notebook's memory, run after run)
    ours = [
        event
        for _, event in client.cluster.scheduler.get_events("all")
        if b"daskprofile.distributed" in event.get("function", b"")
    ]
    assert not ours, ours


def test_live_tables_fill_while_the_block_runs(inproc_client: Any) -> None:
    with daskprofile.profile(client=inproc_client) as run:
        inproc_client.gather(inproc_client.map(slow, range(4)))
        deadline = time.monotonic() + 3
        while len(run.tasks) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(run.tasks) == 4
        assert not run.finished
        assert daskprofile.record.history.live_runs() == [run]
    assert daskprofile.record.history.history()[-1] is run


def test_default_client_is_used(inproc_client: Any) -> None:
    assert dd.active_client() is inproc_client
    with daskprofile.profile() as run:
        dask.delayed(slow)(1).compute()
    assert list(run.tasks["group"]) == ["slow"]


def test_daskprofile_profile_records_the_default_clients_cluster(inproc_client: Any) -> None:
    before = _cluster_state(inproc_client)
    with daskprofile.profile(stacks=False) as run:
        dask.delayed(slow)(1, dask_key_name="plain-1").compute()  # the client's scheduler
    assert list(run.tasks["key"]) == ["plain-1"]
    assert dd.task_worker_address(run.tasks["worker"][0]) in _workers(inproc_client)
    assert run.meta["schedulers"] == ["distributed"]
    assert "distributed" in run.meta
    assert daskprofile.record.history.live_runs() == []
    assert _settled(lambda: _cluster_state(inproc_client), before) == before


def test_local_and_cluster_tasks_in_one_run(inproc_client: Any) -> None:
    with daskprofile.profile(client=inproc_client, stacks=False) as run:
        dask.delayed(slow)(1, dask_key_name="local-1").compute(scheduler="threads")
        inproc_client.submit(slow, 2, key="remote-1").result()
    tasks = run.tasks.set_index("key")
    assert set(tasks.index) == {"local-1", "remote-1"}
    assert dd.task_worker_address(tasks.loc["remote-1", "worker"]) in _workers(inproc_client)
    assert not tasks.loc["local-1", "worker"].startswith("inproc://")
    assert set(run.meta["schedulers"]) == {"threads", "distributed"}
    assert run.meta["computes"] == 2


def test_without_a_client_it_is_the_local_profile() -> None:
    assert dd.active_client() is None
    with daskprofile.profile() as run:
        dask.delayed(slow)(1).compute(scheduler="sync")
    assert len(run.tasks) == 1
    assert "distributed" not in run.meta


# ---------------------------------------------------------------- values
def test_round_trip_and_html(client: Any, tmp_path: Path) -> None:
    with daskprofile.profile(client=client) as run:
        client.gather(client.map(spin, [0.2, 0.21]))
        client.gather(client.map(slow, range(4)))
    loaded = daskprofile.load(run.save(tmp_path / "run.npz"))
    pd.testing.assert_frame_equal(loaded.tasks, run.tasks)
    pd.testing.assert_frame_equal(loaded.resources, run.resources)
    pd.testing.assert_frame_equal(loaded.cache, run.cache)
    assert to_folded_lines(loaded.stacks) == to_folded_lines(run.stacks)
    assert loaded.meta["distributed"] == run.meta["distributed"]
    again = daskprofile.Run.from_dict(run.to_dict())
    pd.testing.assert_frame_equal(again.tasks, run.tasks)
    html = Path(loaded.to_html(tmp_path / "run.html")).read_text()
    assert "spin" in html
    assert "slow" in html


# ---------------------------------------------------------------- failures
class BrokenGraphProbe(GraphProbe):
    def _group_ids(self, states: list[Any]) -> int | list[int]:
        raise RuntimeError("boom in the scheduler plugin")


class BrokenOnScheduler(dd.DistributedCollector):
    graph_probe = BrokenGraphProbe


class UnregistrableWorkerProbe(WorkerProbe):
    def setup(self, worker: Any) -> None:
        raise RuntimeError("cannot set up")


class BrokenOnWorkers(dd.DistributedCollector):
    worker_probe = UnregistrableWorkerProbe


def test_a_failing_plugin_warns_once_and_never_fails_the_computation(
    inproc_client: Any,
) -> None:
    before = _cluster_state(inproc_client)
    collector = BrokenOnScheduler(inproc_client, stacks=False, resources=False, flush=0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        collector.start()
        assert inproc_client.gather(inproc_client.map(slow, range(4))) == list(range(4))
        time.sleep(0.2)
        assert inproc_client.submit(slow, 9).result() == 9
        collector.stop()
    ours = [w for w in caught if "daskprofile" in str(w.message)]
    assert len(ours) == 1
    assert "boom in the scheduler plugin" in str(ours[0].message)
    assert [e["collector"] for e in collector.errors] == ["distributed"]
    assert _settled(lambda: _cluster_state(inproc_client), before) == before


def _our_loop_tasks(client: Any) -> list[str]:
    """daskprofile's tasks on the client's event loop (the heartbeat poller)."""

    async def ours() -> list[str]:
        names = [getattr(t.get_coro(), "__qualname__", "") for t in asyncio.all_tasks()]
        return sorted(n for n in names if n.startswith("DistributedCollector."))

    found: list[str] = client.sync(ours)
    return found


def test_a_plugin_that_cannot_register_leaves_nothing_behind(inproc_client: Any) -> None:
    """Workers that cannot take the worker plugin (here its setup raises; on a real
    cluster, workers without daskprofile): the compute runs, the scheduler's records
    stay, resources come from the heartbeats, and nothing is left behind."""
    before = _cluster_state(inproc_client)
    collector = BrokenOnWorkers(inproc_client, flush=0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        collector.start()
        assert _our_loop_tasks(inproc_client) == ["DistributedCollector._poll_heartbeats"]
        seconds = [1.0, 1.01, 1.02, 1.03]  # ~2 s on two workers
        assert inproc_client.gather(inproc_client.map(crunch, seconds)) == seconds
        collector.stop()
    ours = [w for w in caught if "daskprofile" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert ours[0].category is RuntimeWarning
    assert "cannot set up" in str(ours[0].message)
    assert collector.started is False
    assert not collector.failed
    assert collector.errors == []

    # the scheduler plugin's records
    tasks = collector.tasks_snapshot()
    assert len(tasks["key"]) == 4
    assert set(tasks["groups"]) == {"crunch"}
    assert {dd.task_worker_address(w) for w in tasks["workers"]} == _workers(inproc_client)

    # what is reduced, and why
    assert set(collector.reduced) == {"stacks", "resources", "actions", "transfers", "memory"}
    for why in collector.reduced.values():
        assert why.startswith("the worker plugin could not be registered (RuntimeError: "), why
    assert "heartbeats" in collector.reduced["resources"]
    trees = collector.trees()
    assert set(trees) <= {ALL_TASKS}
    assert (ALL_TASKS in trees) == ("distributed's profiler" in collector.reduced["stacks"])

    # each worker's CPU and memory from its heartbeats
    series = {p["workers"][0]: p for p in collector.process_resources()}
    assert set(series) == _workers(inproc_client)
    for proc in series.values():
        assert len(proc["time"]) >= 3, proc
        assert (proc["memory"] > 10_000_000).all()
        assert (np.diff(proc["time"]) > 0).all()
    totals = collector.resources_snapshot()
    assert len(totals["time"]) >= 10
    assert (totals["memory"] > 0).all()  # a heartbeat's sample holds until the next one
    assert totals["processes"].max() == 2

    # nothing left: plugins, topic, threads, the poller
    assert _our_loop_tasks(inproc_client) == []
    assert _settled(lambda: _cluster_state(inproc_client), before) == before
    assert not _settled(_our_threads, [])


def test_a_run_names_what_it_recorded_in_a_reduced_way(
    inproc_client: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(dd.DistributedCollector, "worker_probe", UnregistrableWorkerProbe)
    before = _cluster_state(inproc_client)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with daskprofile.profile(client=inproc_client, dt=0.1) as run:
            assert inproc_client.gather(inproc_client.map(crunch, [1.0, 1.01])) == [1.0, 1.01]
    assert len([w for w in caught if "daskprofile" in str(w.message)]) == 1
    assert len(run.tasks) == 2
    assert set(run.meta.reduced) == {"stacks", "resources", "actions", "transfers", "memory"}
    assert (ALL_TASKS in run.stacks) == ("distributed's profiler" in run.meta.reduced["stacks"])
    assert run.meta.errors == []
    assert len(run.resources) >= 5
    assert (run.resources["memory"] > 0).all()
    processes = run.meta.distributed["processes"]
    assert {w for p in processes for w in p["workers"]} == _workers(inproc_client)
    loaded = daskprofile.load(run.save(tmp_path / "run.npz"))
    assert loaded.meta.reduced == run.meta.reduced
    # a run on a cluster whose workers take the plugin: nothing reduced
    monkeypatch.undo()
    with daskprofile.profile(client=inproc_client, stacks=False) as plain:
        inproc_client.submit(slow, 1).result()
    assert plain.meta.reduced == {}
    assert _settled(lambda: _cluster_state(inproc_client), before) == before
