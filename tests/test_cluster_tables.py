"""What distributed knows about a cluster run beyond compute, on real LocalClusters of worker
processes: actions, transfers, memory and spilling, workers joining, a worker killed."""

from __future__ import annotations

import json
import os
import signal
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import daskprofile  # noqa: E402
from daskprofile import cluster_tables as ct  # noqa: E402
from daskprofile import distributed as dd  # noqa: E402
from daskprofile.distributed._worker import WorkerProbe  # noqa: E402
from daskprofile.export._cluster_stream import rerun_rows  # noqa: E402
from daskprofile.export._common import task_arrays  # noqa: E402
from daskprofile.jupyter.feed import Feed  # noqa: E402
from daskprofile.record.cursors import frozen_cursors  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("distributed_threads")]

MB = 1_000_000


def inc(x: int) -> int:
    return x + 1


def slow(x: int, delay: float) -> int:
    time.sleep(delay)
    return x + 1


def _cluster(**kwargs: Any) -> Any:
    return distributed.LocalCluster(
        threads_per_worker=1, processes=True, dashboard_address=None, **kwargs
    )


# ---------------------------------------------------------------- spilling and transfers
@pytest.fixture
def spilling() -> Iterator[Any]:
    """Two worker processes of 600 MB that spill from 120 MB of managed memory."""
    config = {"distributed.worker.memory.target": 0.2, "distributed.worker.memory.spill": 0.3}
    with (
        dask.config.set(config),
        _cluster(n_workers=2, memory_limit="600MB") as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(inc, 0)
        yield client


def test_spilling_and_transfers_fill_actions_transfers_and_memory(
    spilling: Any, tmp_path: Path
) -> None:
    client = spilling
    workers = set(client.scheduler_info()["workers"])
    t = time.perf_counter()
    with daskprofile.profile(client=client) as run:
        x = da.random.random((6000, 6000), chunks=(500, 500)).persist()  # 288 MB
        distributed.wait(x)
        total = (x + x.T).sum().compute()  # blocks of the other worker: transfers
    wall = time.perf_counter() - t
    assert total > 0
    assert run.meta.errors == []
    assert run.meta.reduced == {}

    # transfers, from both ends
    transfers = run.transfers
    assert set(transfers["direction"]) == {"incoming", "outgoing"}
    to_client = transfers["destination"] == ""  # the client gathering results: no worker
    assert (transfers[to_client]["direction"] == "outgoing").all()
    transfers = transfers[~to_client]
    assert set(transfers["source"]) == workers
    assert set(transfers["destination"]) == workers
    assert (transfers["source"] != transfers["destination"]).all()
    assert (transfers["stop"] >= transfers["start"]).all()
    assert transfers["start"].min() >= -0.05  # (clock corrections: a few ms)
    assert transfers["stop"].max() <= wall + 0.05
    assert (transfers["bytes"] > 0).all()
    assert (transfers["keys"] >= 1).all()
    # 500 x 500 float64 blocks (2 MB), several to a transfer
    big = transfers[transfers["bytes"] >= 2 * MB]
    assert (big["bytes"] % (2 * MB) < 1000).all()
    assert (big["keys"] >= big["bytes"] // (2 * MB)).all()  # (and small partial sums)
    assert big["bytes"].sum() > 40 * MB
    outgoing = transfers[transfers["direction"] == "outgoing"]
    assert (outgoing["compressed"] > 0).all()
    assert transfers[transfers["direction"] == "incoming"]["compressed"].isna().all()
    assert "numpy.ndarray" in set(transfers["type"])

    # actions: each transfer a task waited for, and the disk reads/writes distributed
    # records (only those over 5 ms: how many depends on the machine's load)
    actions = run.actions
    kinds = set(actions["action"])
    assert "transfer" in kinds
    assert kinds <= set(ct.ACTIONS)
    assert set(actions["worker"]) <= workers
    assert (actions["stop"] >= actions["start"]).all()
    assert set(actions["key"]) <= set(run.tasks["key"])
    fetched = actions[actions["action"] == "transfer"]
    assert set(fetched["peer"]) <= workers
    assert (fetched["peer"] != fetched["worker"]).all()
    assert (fetched["bytes"].dropna() > 0).all()
    assert fetched["bytes"].notna().mean() > 0.9
    assert fetched["bytes"].max() == big["bytes"].max()
    incoming = transfers[transfers["direction"] == "incoming"]
    assert len(fetched) <= len(incoming)

    # memory: samples of each worker, spilling visible
    memory = run.memory
    assert set(memory["worker"]) == workers
    assert (memory["limit"] == 600 * MB).all()
    for _, samples in memory.groupby("worker"):
        assert len(samples) >= 5
        assert (samples["process"] > samples["managed"]).all()
        assert samples["spilled"].max() > 10 * MB
        assert samples["spilled_keys"].max() >= 5
        assert samples["spill_count"].iloc[-1] >= 5
        assert samples["spill_bytes"].iloc[-1] > 0
        assert (samples["unmanaged_old"] <= samples["unmanaged"]).all()
    assert memory["unspill_count"].max() > 0  # the sum read spilled blocks back

    # workers: both, present before the run
    members = run.workers
    assert set(members["address"]) == workers
    assert members["joined"].isna().all()
    assert members["left"].isna().all()
    assert (members["memory_limit"] == 600 * MB).all()
    assert (members["threads"] == 1).all()

    # bandwidth by pair, by type, over time
    pairs = run.bandwidth()
    assert len(pairs) == 2
    assert (pairs["bandwidth"] > MB).all()
    assert pairs["bytes"].sum() == incoming["bytes"].sum()
    assert "numpy.ndarray" in set(run.bandwidth("type")["type"])
    over_time = run.bandwidth("time", dt=0.25)
    assert (over_time["bandwidth"] * 0.25).sum() == pytest.approx(pairs["bytes"].sum())

    # a finished run keeps at most 64 B per action and transfer row, plus its lookups (a
    # few names; test_cluster_log measures the whole on 100,000 rows)
    for name in ("actions", "transfers"):
        table = run.raw(name)
        rows = {k: v for k, v in table.items() if isinstance(v, (np.ndarray, bytes))}
        assert ct.retained(rows) / len(table["start"]) <= 64, name
        assert ct.retained(table) - ct.retained(rows) < 20_000, name

    # saved and loaded, as a dict and back
    loaded = daskprofile.load(run.save(tmp_path / "run.npz"))
    again = daskprofile.Run.from_dict(json.loads(json.dumps(run.to_dict())))
    for other in (loaded, again):
        for name in ct.NAMES:
            pd.testing.assert_frame_equal(getattr(other, name), getattr(run, name), obj=name)


# ---------------------------------------------------------------- workers joining
def test_a_worker_joining_mid_run_appears_with_its_memory() -> None:
    with _cluster(n_workers=2, memory_limit="1GB") as cluster, distributed.Client(cluster) as c:
        before = set(c.scheduler_info()["workers"])
        with daskprofile.profile(client=c) as run:
            assert c.gather(c.map(inc, range(10))) == list(range(1, 11))
            joined_after = time.perf_counter() - run.t0
            cluster.scale(3)
            c.wait_for_workers(3, timeout=60)
            time.sleep(0.5)  # a few memory samples of the new worker
            assert c.gather(c.map(inc, range(10, 40))) == list(range(11, 41))
        info = c.scheduler_info()["workers"]
        pids = c.run(os.getpid)
    (new,) = set(info) - before
    members = run.workers.set_index("address")
    assert set(members.index) == set(info)
    assert members.loc[list(before), "joined"].isna().all()
    assert joined_after < members.loc[new, "joined"] < time.perf_counter() - run.t0
    assert members["left"].isna().all()
    assert members.loc[new, "name"] == str(info[new]["name"])
    assert members.loc[new, "threads"] == 1
    assert members.loc[new, "memory_limit"] == info[new]["memory_limit"] == 1_000_000_000
    assert members.loc[new, "pid"] == pids[new]
    memory = run.memory
    assert set(memory["worker"]) == set(info)
    assert memory[memory["worker"] == new]["time"].min() >= members.loc[new, "joined"] - 0.5


# ---------------------------------------------------------------- a worker killed
def test_a_worker_killed_mid_run_leaves_lost_tasks_rerun_and_killed_ones_recorded() -> None:
    config = {"distributed.scheduler.allowed-failures": 0}  # running there: KilledWorker
    with (
        dask.config.set(config),
        _cluster(n_workers=2, memory_limit="1GB") as cluster,
        distributed.Client(cluster) as c,
    ):
        c.run(inc, 0)
        pids = c.run(os.getpid)
        t = time.perf_counter()
        with daskprofile.profile(client=c) as run:
            a = c.map(inc, range(8), pure=False)
            distributed.wait(a)
            # the workers send the rows they made within 0.15 s; a worker killed sooner
            # takes them with it (the results it held are computed again all the same)
            _until(lambda: len(run.tasks) >= len(a))
            b = c.map(slow, a, delay=0.5, pure=False)
            victim = _running_somewhere(c)
            held = {k for k, where in c.who_has(a).items() if victim in where}
            os.kill(pids[victim], signal.SIGKILL)
            results = c.gather(b, errors="skip")
            failed = [f for f in b if f.status == "error"]
            errors = {type(f.exception()).__name__ for f in failed}
            c.wait_for_workers(2, timeout=60)  # the nanny starts a new one
            # the lost results the client still holds are computed again, even those no
            # task of ``b`` needs any more (their tasks were killed): wait for them too
            distributed.wait(a, timeout=60)
        elapsed = time.perf_counter() - t
        info = c.scheduler_info()["workers"]
    assert elapsed < 60
    assert failed
    assert len(results) == len(b) - len(failed)
    assert errors == {"KilledWorker"}

    members = run.workers.set_index("address")
    assert victim in members.index
    assert set(info) <= set(members.index)
    gone = members.loc[victim]
    assert gone["reason"] == "lost"
    assert gone["cause"].startswith(("handle-worker-cleanup", "nanny-close")), gone["cause"]
    assert 0 < gone["left"] < elapsed
    assert set(gone["killed"]) == {f.key for f in failed}
    assert set(gone["lost"]) <= held
    assert gone["lost"], "the killed worker held results still needed"
    (newcomer,) = set(info) - set(members.index[members["joined"].isna()])
    assert members.loc[newcomer, "joined"] > gone["left"] - 1

    reruns = run.reruns.set_index("key")
    assert set(gone["lost"]) <= set(reruns.index)
    lost = reruns.loc[list(gone["lost"])]
    assert (lost["why"] == "lost").all()
    assert (lost["worker"] == victim).all()
    assert (lost["runs"] == 2).all()  # computed again: a second task row
    assert reruns.loc[[f.key for f in failed], "killed"].all()
    # the snapshot's task stream marks their rows on the victim: "re-run: lost on <victim>"
    arrays = task_arrays(run)
    rows, why = rerun_rows(arrays, run.reruns)
    marked = dict(zip(arrays.keys(rows), why, strict=True))
    assert set(gone["lost"]) <= set(marked)
    assert {marked[k] for k in gone["lost"]} == {f"lost on {victim}"}
    # and the panel gets those rows in a ``reruns`` message
    cursors = frozen_cursors(run)
    sent = [d for d, _ in Feed(run, cursors).replay() if d["type"] == "reruns"]
    rows = [r for d in sent for r in d["rows"]]
    assert set(gone["lost"]) <= set(cursors.keys(rows))
    assert {w for d in sent for w in d["workers"]} == {victim}
    tasks = run.tasks
    assert {dd.task_worker_address(w) for w in tasks["worker"]} <= set(members.index)
    # the tasks failed for it say so, in the task rows and the exceptions
    killed_rows = tasks[tasks["key"].isin([str(f.key) for f in failed])]
    assert set(killed_rows["error"]) == {"KilledWorker"}
    exceptions = run.exceptions.set_index("key")
    for f in failed:
        assert exceptions.loc[str(f.key), "type"] == "KilledWorker"
        assert victim in exceptions.loc[str(f.key), "message"]


def _until(ready: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ready()


def _running_somewhere(client: Any, timeout: float = 10.0) -> str:
    """A worker that is running one of the slow tasks now."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = [w for w, keys in client.processing().items() if keys]
        if busy and all(client.run(_is_running).get(w) for w in busy[:1]):
            return str(busy[0])
        time.sleep(0.05)
    raise AssertionError("no worker ran the slow tasks")


def _is_running(dask_worker: Any) -> bool:
    return bool(dask_worker.active_keys)


# ---------------------------------------------------------------- workers without daskprofile
class UnregistrableWorkerProbe(WorkerProbe):
    def setup(self, worker: Any) -> None:
        raise RuntimeError("cannot set up")


def test_without_the_worker_plugin_actions_come_from_the_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dd.DistributedCollector, "worker_probe", UnregistrableWorkerProbe)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        workers = set(c.scheduler_info()["workers"])
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            with daskprofile.profile(client=c, dt=0.1) as run:
                x = da.ones((2000, 2000), chunks=(250, 250)).persist()
                distributed.wait(x)
                assert (x + x.T).sum().compute() == 2 * 2000 * 2000
                time.sleep(1.2)  # heartbeats
    reduced = run.meta.reduced
    assert {"actions", "transfers", "memory"} <= set(reduced)
    assert "startstops" in reduced["actions"]
    assert "heartbeats" in reduced["memory"]
    fetched = run.actions[run.actions["action"] == "transfer"]
    assert len(fetched) > 0
    assert set(fetched["worker"]) <= workers
    assert set(fetched["peer"]) <= workers
    assert (fetched["peer"] != fetched["worker"]).all()
    assert (fetched["stop"] >= fetched["start"]).all()
    assert fetched["bytes"].isna().all()
    assert set(fetched["key"]) <= set(run.tasks["key"])
    assert run.transfers.empty
    assert set(run.memory["worker"]) == workers
    assert set(run.workers["address"]) == workers
