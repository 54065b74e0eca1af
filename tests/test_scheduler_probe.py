"""The scheduler plugin's batches on a real in-process LocalCluster: graphs, pending, rows."""

from __future__ import annotations

import heapq
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

from daskprofile.distributed._common import MESSAGE_VERSION, unpack  # noqa: E402
from daskprofile.distributed._scheduler import (  # noqa: E402
    SchedulerProbe,
    finish_probe,
    forget_topic,
)
from daskprofile.keys import key_label  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("distributed_threads")]

FLUSH = 0.05


def inc(x: int) -> int:
    return x + 1


def divide(x: int) -> float:
    return 1 / x


def gated(name: str, value: int = 0) -> int:
    """Wait for the ``distributed.Event`` ``name`` (set by the test), then return."""
    distributed.Event(name).wait(timeout=30)
    return value


@pytest.fixture
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        c.submit(inc, 0).result()  # the worker imports this module before any probe
        yield c


class Probed:
    """A probe registered on the client's scheduler and the batches it published."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name
        self.finished: list[dict[str, Any]] | None = None

    def batches(self) -> list[dict[str, Any]]:
        """Batches so far (the event log), in order; all of them once finished."""
        if self.finished is not None:
            return self.finished
        return self._check([unpack(msg) for _, msg in self.client.get_events(self.name)])

    def finish(self) -> list[dict[str, Any]]:
        """Stop the probe: all its batches, the last one included."""
        final = self.client.run_on_scheduler(finish_probe, name=self.name)
        sent = [unpack(msg) for _, msg in self.client.get_events(self.name)]
        self.finished = self._check(sent + ([final] if final else []))
        return self.finished

    @staticmethod
    def _check(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seqs = [m["seq"] for m in batches]
        assert seqs == list(range(len(batches))), seqs  # none missing, none twice
        return batches

    def pending(self, compute: int) -> list[int]:
        """Every value of ``pending`` sent for ``compute`` so far."""
        return [m["pending"][compute] for m in self.batches() if compute in m["pending"]]

    def until(self, test: Callable[[], Any], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := test()) and time.monotonic() < deadline:
            time.sleep(FLUSH / 2)
        return value


@contextmanager
def probed(client: Any, **options: Any) -> Iterator[Probed]:
    name = f"daskprofile-test-{uuid.uuid4().hex}"
    probe = SchedulerProbe(name, [client.id], **{"flush": FLUSH, **options})
    client.register_plugin(probe, name)
    try:
        yield Probed(client, name)
    finally:
        client.unregister_scheduler_plugin(name)
        client.run_on_scheduler(forget_topic, topic=name, client=client.id)


def graphs(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [g for m in batches for g in m["graphs"]]


def groups(batches: list[dict[str, Any]]) -> list[str]:
    return [name for m in batches for name in m["groups"]]


def rows(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Task rows of all batches, one dict per task."""
    out = []
    for m in batches:
        tasks = m["tasks"]
        out += [
            dict(zip(tasks, values, strict=True)) for values in zip(*tasks.values(), strict=True)
        ]
    return out


# ---------------------------------------------------------------- graphs
def test_a_graph_carries_its_compute_keys_and_totals(client: Any) -> None:
    with probed(client) as probe:
        futures = client.map(inc, range(10))
        assert client.gather(futures) == list(range(1, 11))
        batches = probe.finish()
    assert {m["v"] for m in batches} == {MESSAGE_VERSION}
    [graph] = graphs(batches)
    assert graph["compute"] == 1
    assert graph["client"] == client.id
    assert graph["keys"] == heapq.nsmallest(3, (f.key for f in futures))
    names = groups(batches)
    assert [[names[gid], n] for gid, n in graph["totals"]] == [["inc", 10]]
    tasks = rows(batches)
    assert sorted(r["key"] for r in tasks) == sorted(f.key for f in futures)
    assert {r["compute"] for r in tasks} == {1}
    assert batches[-1]["computes"] == 1
    assert probe.pending(1)[-1] == 0


def test_totals_per_group_match_the_tasks_of_a_dask_array_graph(client: Any) -> None:
    da = pytest.importorskip("dask.array")
    x = da.ones((40, 40), chunks=10)
    with probed(client) as probe:
        total = client.compute((x + 1).sum())
        assert total.result() == 40 * 40 * 2
        kept = client.persist(x * 3)
        distributed.wait(kept)
        assert client.compute(kept.sum()).result() == 40 * 40 * 3
        batches = probe.finish()
    first, persist, second = graphs(batches)
    assert [g["compute"] for g in (first, persist, second)] == [1, 2, 3]
    assert first["keys"] == [key_label(total.key)]
    names = groups(batches)
    assert any(names[gid].startswith("sum") for gid, _ in first["totals"]), names
    ran: dict[int, dict[int, int]] = {}
    for r in rows(batches):
        per_group = ran.setdefault(r["compute"], {})
        per_group[r["group"]] = per_group.get(r["group"], 0) + 1
    # every task of a fresh graph runs: its totals are the groups of the rows it produced
    assert dict(map(tuple, first["totals"])) == ran[1]
    assert dict(map(tuple, persist["totals"])) == ran[2]
    # the persisted chunks are touched again, not run again: in the totals, not pending
    persisted = sum(n for _, n in persist["totals"])
    assert persisted == 16
    assert sum(n for _, n in second["totals"]) == persisted + sum(ran[3].values())
    assert all(probe.pending(c)[-1] == 0 for c in (1, 2, 3))


def test_a_graph_carries_its_dependency_edges_as_the_scheduler_holds_them(client: Any) -> None:
    """Edges by position in ``edge_keys``: the graph's keys, then dependencies computed by
    an earlier graph; a graph of independent tasks carries none."""
    da = pytest.importorskip("dask.array")
    x = da.ones((20, 20), chunks=10)
    with probed(client) as probe:
        assert client.gather(client.map(inc, range(4))) == [1, 2, 3, 4]
        kept = client.persist(x + 1)
        distributed.wait(kept)
        total = client.compute(kept.sum())
        assert total.result() == 20 * 20 * 2
        batches = probe.finish()
    independent, persisted, summed = graphs(batches)
    assert "edges" not in independent
    graph = client.run_on_scheduler(
        lambda dask_scheduler: {
            key_label(k): sorted(key_label(d.key) for d in ts.dependencies)
            for k, ts in dask_scheduler.tasks.items()
        }
    )
    waited: dict[str, list[str]] = {}
    for g in (persisted, summed):
        if "edges" not in g:  # (chunks made in one fused task each: nothing waits)
            continue
        labels = [key_label(tuple(k) if isinstance(k, list) else k) for k in g["edge_keys"]]
        tasks, deps = g["edges"]
        for i, j in zip(tasks, deps, strict=True):
            waited.setdefault(labels[i], []).append(labels[j])
    assert waited
    for key, found in waited.items():
        assert sorted(set(found)) == graph[key], key
    # the sum's first tasks wait for the persisted chunks: keys of the earlier graph
    chunks = {key_label(k) for row in kept.__dask_keys__() for k in row}
    assert chunks <= {dep for found in waited.values() for dep in found}


# ---------------------------------------------------------------- pending
def test_pending_reaches_zero_when_the_future_is_done(client: Any) -> None:
    gate = f"gate-{uuid.uuid4().hex}"
    event = distributed.Event(gate, client=client)
    with probed(client) as probe:
        future = client.submit(gated, gate, 7)
        assert probe.until(lambda: probe.pending(1))
        time.sleep(6 * FLUSH)  # several batches while the task waits
        assert not future.done()
        assert probe.pending(1) == [1]
        event.set()
        assert future.result() == 7
        assert probe.until(lambda: 0 in probe.pending(1))
        time.sleep(4 * FLUSH)
        batches = probe.finish()
    assert probe.pending(1) == [1, 0]  # sent once with 0, then never again
    assert [r["key"] for r in rows(batches)] == [future.key]


def test_a_task_running_for_two_computes_counts_for_both(client: Any) -> None:
    dask = pytest.importorskip("dask")
    gate = f"gate-{uuid.uuid4().hex}"
    event = distributed.Event(gate, client=client)
    shared = dask.delayed(gated)(gate, 1, dask_key_name="shared-1")
    with probed(client) as probe:
        first = client.compute(shared)
        assert probe.until(lambda: probe.pending(1))
        # a second graph holding the same task, which is running for the first
        second = client.compute(dask.delayed(inc)(shared, dask_key_name="after-1"))
        assert probe.until(lambda: probe.pending(2))
        time.sleep(4 * FLUSH)
        assert probe.pending(1)[-1] == 1
        assert probe.pending(2)[-1] == 2
        event.set()
        assert first.result() == 1
        assert second.result() == 2
        assert probe.until(lambda: 0 in probe.pending(1) and 0 in probe.pending(2))
        batches = probe.finish()
    one, two = graphs(batches)
    assert (one["compute"], one["keys"], two["compute"], two["keys"]) == (
        1,
        ["shared-1"],
        2,
        ["after-1"],
    )
    assert sum(n for _, n in two["totals"]) == 2
    # one run each; the shared task's row is of the latest graph holding it
    assert sorted((r["key"], r["compute"]) for r in rows(batches)) == [
        ("after-1", 2),
        ("shared-1", 2),
    ]


def test_tasks_cancelled_before_running_are_finished(client: Any) -> None:
    gate = f"gate-{uuid.uuid4().hex}"
    event = distributed.Event(gate, client=client)
    with probed(client) as probe:
        busy = client.map(gated, [gate, gate], key=["busy-1", "busy-2"])  # both threads
        waiting = client.submit(inc, 1, key="waits-1")  # compute 2: no thread free
        assert probe.until(lambda: probe.pending(2))
        time.sleep(4 * FLUSH)
        assert probe.pending(2)[-1] == 1
        waiting.cancel()
        assert probe.until(lambda: 0 in probe.pending(2))
        assert probe.pending(1)[-1] == 2  # still running
        event.set()
        assert client.gather(busy) == [0, 0]
        assert probe.until(lambda: 0 in probe.pending(1))
        batches = probe.finish()
    assert sorted(r["key"] for r in rows(batches)) == ["busy-1", "busy-2"]


def test_a_failed_task_and_its_dependent_are_finished(client: Any) -> None:
    with probed(client) as probe:
        bad = client.submit(divide, 0, key="bad-1")
        after = client.submit(inc, bad, key="after-1")
        with pytest.raises(ZeroDivisionError):
            after.result()
        assert probe.until(lambda: 0 in probe.pending(1) and 0 in probe.pending(2))
        batches = probe.finish()
    tasks = rows(batches)
    assert [(r["key"], r["error"]) for r in tasks] == [("bad-1", "ZeroDivisionError")]


def test_tasks_in_memory_already_are_not_pending(client: Any) -> None:
    with probed(client) as probe:
        futures = client.map(inc, range(4))
        client.gather(futures)
        again = client.map(inc, range(4))  # the same keys, in memory: nothing to run
        assert [f.key for f in again] == [f.key for f in futures]
        assert probe.until(lambda: probe.pending(2))
        batches = probe.finish()
    assert probe.pending(2) == [0]
    assert sum(n for _, n in graphs(batches)[1]["totals"]) == 4
    assert len(rows(batches)) == 4


def _known(dask_scheduler: Any, key: str) -> bool:
    return key in dask_scheduler.tasks


def test_a_key_run_by_another_client_then_submitted_is_not_finished(client: Any) -> None:
    """Another client's run of a key, noted before this client's graph took the key up in
    the same batch, is neither its row nor one of its tasks finished."""
    gate = f"gate-{uuid.uuid4().hex}"
    event = distributed.Event(gate, client=client)
    with distributed.Client(client.scheduler.address) as other, probed(client, flush=30) as probe:
        theirs = other.submit(gated, "open-gate", key="reused-1")
        distributed.Event("open-gate", client=other).set()
        assert theirs.result() == 0
        del theirs
        assert probe.until(lambda: not client.run_on_scheduler(_known, key="reused-1"))
        ours = client.submit(gated, gate, 5, key="reused-1")  # the same key, anew
        time.sleep(0.2)
        assert not ours.done()
        batches = probe.finish()  # one batch: everything above applied at once
        event.set()
        assert ours.result() == 5
    assert [g["compute"] for g in graphs(batches)] == [1]
    assert probe.pending(1) == [1]
    assert not rows(batches)


# ---------------------------------------------------------------- rows, failures
def test_rows_times_and_workers(client: Any) -> None:
    with probed(client) as probe:
        t0 = time.time()
        client.gather(client.map(inc, range(20)))
        t1 = time.time()
        batches = probe.finish()
    tasks = rows(batches)
    assert len(tasks) == 20
    labels = [w for m in batches for w in m["workers"]]
    [address] = client.scheduler_info()["workers"]
    assert {labels[r["worker"]].rsplit(" thread ", 1)[0] for r in tasks} == {address}
    info = {a: i for m in batches for a, i in m["worker_info"].items()}
    assert info[address]["nthreads"] == 2
    for r in tasks:
        assert t0 - 1 < r["submit"] <= r["start"] + 0.5
        assert r["start"] <= r["stop"] < t1 + 1
        assert r["error"] is None


def test_cache_is_bytes_held_per_group(client: Any) -> None:
    np = pytest.importorskip("numpy")
    with probed(client) as probe:
        futures = client.map(np.ones, [1000, 2000])
        client.gather(futures)
        held = probe.until(lambda: [m for m in probe.batches() if m["cache"]["group"]])
        names = groups(probe.batches())
        [(gid, metric)] = [
            (g, v)
            for m in held
            for g, v in zip(m["cache"]["group"], m["cache"]["metric"], strict=True)
        ][-1:]
        assert names[gid] == "ones"
        assert metric == 3000 * 8
        del futures
        released = probe.until(lambda: probe.batches()[-1]["cache"]["metric"] == [0])
        assert released


class BrokenProbe(SchedulerProbe):
    def _note_graph(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom in update_graph")


def test_a_failure_switches_the_probe_off_and_is_sent(client: Any) -> None:
    name = f"daskprofile-test-{uuid.uuid4().hex}"
    client.register_plugin(BrokenProbe(name, [client.id], flush=FLUSH), name)
    try:
        assert client.gather(client.map(inc, range(5))) == list(range(1, 6))
        last = client.run_on_scheduler(finish_probe, name=name)
        sent = [unpack(msg) for _, msg in client.get_events(name)] + ([last] if last else [])
    finally:
        client.unregister_scheduler_plugin(name)
        client.run_on_scheduler(forget_topic, topic=name, client=client.id)
    errors = [m["error"] for m in sent if m["error"]]
    assert errors == ["scheduler plugin: RuntimeError('boom in update_graph')"]
    assert not rows(sent)


# ---------------------------------------------------------------- order of the notes
class _Tasks(dict):  # type: ignore[type-arg]
    """A scheduler's ``tasks``: key -> a stand-in TaskState."""

    def add(self, key: str, group: str, state: str = "released") -> None:
        self[key] = SimpleNamespace(key=key, group=SimpleNamespace(name=group), state=state)


def _finished_kwargs(nbytes: int, t: float) -> dict[str, Any]:
    return {
        "stimulus_id": "task-finished",
        "worker": "tcp://w:1",
        "thread": 1,
        "nbytes": nbytes,
        "startstops": [{"action": "compute", "start": t, "stop": t + 1}],
    }


def _run(probe: SchedulerProbe, key: str, nbytes: int, t: float) -> None:
    for start, finish in (("released", "waiting"), ("waiting", "processing")):
        probe.transition(key, start, finish, stimulus_id="s")
    probe.transition(key, "processing", "memory", **_finished_kwargs(nbytes, t))


def test_a_task_run_again_after_it_was_released_is_applied_in_order() -> None:
    """Notes are applied by kind, all tasks at once; a release noted before a later run of
    the same task is applied between the two (bytes held: 50, not 100 or 150)."""
    tasks = _Tasks()
    tasks.add("a-1", "a")
    probe = SchedulerProbe("t", ["c"], flush=FLUSH)
    probe.scheduler = SimpleNamespace(tasks=tasks, workers={})
    probe.update_graph(probe.scheduler, client="c", tasks=["a-1"], keys=["a-1"])
    _run(probe, "a-1", 100, 10.0)
    first = probe.batch()
    assert first is not None
    assert first["cache"]["metric"] == [100]
    assert first["pending"] == {1: 0}
    probe.transition("a-1", "memory", "released", stimulus_id="s")  # lost, run again
    _run(probe, "a-1", 50, 20.0)
    again = probe.batch()
    assert again is not None
    assert again["cache"]["metric"] == [50]
    assert again["tasks"]["start"] == [20.0]
    assert again["pending"] == {}  # finished already: not counted twice
    probe.transition("a-1", "memory", "released", stimulus_id="s")
    _run(probe, "a-1", 70, 30.0)  # twice in one batch
    probe.transition("a-1", "memory", "released", stimulus_id="s")
    _run(probe, "a-1", 60, 40.0)
    twice = probe.batch()
    assert twice is not None
    assert twice["tasks"]["start"] == [30.0, 40.0]
    assert twice["cache"]["metric"] == [60]
