"""The publisher in-process: bounded outbox, drop accounting, cache decimation, live rows."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from operator import add
from typing import Any

import dask
import numpy as np
import pytest

import daskprofile
from daskprofile.jupyter import comm as dpcomm
from daskprofile.jupyter import encode
from daskprofile.jupyter.feed import Feed, decimate
from daskprofile.jupyter.publisher import NUDGE_GAP, Connection, Publisher
from daskprofile.record import history as recorder
from daskprofile.record.cursors import frozen_cursors


def _tasks(n: int, run: str = "r") -> encode.Message:
    cols = {c: np.zeros(n) for c, _ in encode.COLUMNS["tasks"]}
    return encode.table("tasks", run, cols, first=0)


def test_full_outbox_drops_the_oldest_data_batches_and_counts_them() -> None:
    conn = Connection(comm=None, max_queue=3, rate=20)
    start = encode.run_start("r", 0.0, 0.0, {}, None)
    conn.push([start, _tasks(10), _tasks(20), _tasks(30), _tasks(40)], "r")
    kinds = [d["type"] for d, _ in conn.outbox]
    assert kinds == ["run_start", "tasks", "tasks"]  # structure is never dropped
    assert [d.get("n") for d, _ in conn.outbox] == [None, 30, 40]
    assert conn.dropped == {"r": [2, 30]}
    assert conn.dropped_dirty == {"r"}


def test_drops_are_counted_for_the_run_they_belong_to() -> None:
    conn = Connection(comm=None, max_queue=2, rate=20)
    conn.push([_tasks(1, "a"), _tasks(2, "a"), _tasks(4, "b"), _tasks(8, "b")])
    assert conn.dropped == {"a": [2, 3]}
    conn.push([_tasks(16, "b")])
    assert conn.dropped == {"a": [2, 3], "b": [1, 4]}
    assert conn.dropped_dirty == {"a", "b"}


def test_a_runs_drop_counts_go_with_its_end_and_are_forgotten() -> None:
    """(Kept for every run, the counts grew the kernel ~190 B a run for its whole life.)"""
    conn = Connection(comm=None, max_queue=2, rate=20)
    conn.push([_tasks(1, "r"), _tasks(2, "r"), _tasks(4, "other"), _tasks(8, "other")])
    conn.push([_tasks(16, "other")])
    assert conn.dropped == {"r": [2, 3], "other": [1, 4]}
    notice = conn.settle("r")
    assert notice == encode.dropped("r", 2, 3)
    assert "r" not in conn.dropped
    assert "r" not in conn.dropped_dirty
    assert conn.settle("r") is None  # said once
    assert conn.dropped == {"other": [1, 4]}  # another run's counts stay until its end


def test_rate_tokens_refill_up_to_a_small_burst() -> None:
    conn = Connection(comm=None, max_queue=3, rate=20)
    conn.tokens = 0.0
    conn.refill(conn.refilled + 0.1)
    assert abs(conn.tokens - 2.0) < 1e-9
    conn.refill(conn.refilled + 10)
    assert conn.tokens == conn.burst


def test_cache_decimation_keeps_the_last_value_per_group_and_millisecond() -> None:
    cols = {
        "time": np.array([0.0001, 0.0002, 0.0003, 0.0015, 0.0016]),
        "group": np.array([0, 1, 0, 0, 1]),
        "metric": np.array([1.0, 1.0, 2.0, 3.0, 0.0]),
    }
    out = decimate(cols, 1e-3)
    assert out["time"].tolist() == [0.0002, 0.0003, 0.0015, 0.0016]
    assert out["metric"].tolist() == [1.0, 2.0, 3.0, 0.0]


class _RecordingComm:
    """Stands for a panel's comm in-process: keeps what it is sent."""

    def __init__(self) -> None:
        self.comm_id = uuid.uuid4().hex
        self.sent: list[dict[str, Any]] = []
        self.close_cb: Any = None

    def send(self, data: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        self.sent.append(encode.decode(data, list(buffers or [])))

    def on_msg(self, cb: Any) -> None:
        pass

    def on_close(self, cb: Any) -> None:
        self.close_cb = cb

    def close(self) -> None:
        pass


def _finish_after(gate: threading.Event, parts: list[int]) -> int:
    gate.wait(10)
    return sum(parts)


def test_rows_of_a_running_compute_reach_the_panel_before_it_ends() -> None:
    """Fewer rows than a hook batch are still pending in the compute: the publisher's poll
    must hand them over, or the panel would see nothing until the compute ends."""
    comm = _RecordingComm()
    meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
    dpcomm._on_open(comm, {"metadata": meta, "content": {"data": {"type": "hello"}}})
    gate = threading.Event()
    dsk: dict[Any, Any] = {("inc-abc12345", i): (add, i, 1) for i in range(20)}
    dsk["total-abc12345"] = (_finish_after, gate, [("inc-abc12345", i) for i in range(20)])
    worker = threading.Thread(target=dask.get, args=(dsk, "total-abc12345"))
    try:
        worker.start()
        deadline = time.monotonic() + 10
        rows = 0
        while rows < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
            sent = list(comm.sent)  # runs of earlier tests are replayed first: skip them
            ended = {m["run"] for m in sent if m["type"] == "run_end"}
            rows = sum(m["n"] for m in sent if m["type"] == "tasks" and m["run"] not in ended)
        assert rows == 20, "the finished tasks were not streamed while the compute ran"
    finally:
        gate.set()
        worker.join()
        comm.close_cb({})
        dpcomm.shutdown()


def _profiled_compute(n: int) -> str:
    import daskprofile

    dsk: dict[Any, Any] = {("inc-abc12345", i): (add, i, 1) for i in range(n)}
    dsk["total-abc12345"] = (sum, [("inc-abc12345", i) for i in range(n)])
    with daskprofile.profile(resources=False, cache=False, stacks=False) as run:
        dask.get(dsk, "total-abc12345")
    return str(run.meta["id"])


def _wait_for(cond: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cond(), "timed out"


def test_a_panel_that_cannot_keep_up_loses_counted_rows_of_the_right_runs() -> None:
    """Runs finish faster than 20 messages/s can carry: the oldest data batches are
    dropped, each run's ``dropped`` count plus the rows it received is its whole table,
    and no run's structure (start, end) is lost."""
    from daskprofile.jupyter.publisher import Publisher

    publisher = Publisher(rate=20, tick=0.05, max_queue=6)
    comm = _RecordingComm()
    publisher.start()
    try:
        publisher.attach(comm)
        ids = [_profiled_compute(30 + i) for i in range(30)]
        ended = lambda: {m["run"] for m in list(comm.sent) if m["type"] == "run_end"}  # noqa: E731
        _wait_for(lambda: set(ids) <= ended())
        _wait_for(lambda: not any(c.dropped_dirty for c in publisher.connections.values()))
    finally:
        publisher.stop()
    sent = [m for m in comm.sent if m.get("run") in ids]
    dropped = {m["run"]: m["rows"] for m in sent if m["type"] == "dropped"}  # last wins
    assert dropped, "nothing was dropped: the test did not overflow the outbox"
    for i, rid in enumerate(ids):
        kinds = [m["type"] for m in sent if m["run"] == rid]
        assert kinds[0] == "run_start", kinds
        assert set(kinds[kinds.index("run_end") + 1 :]) <= {"dropped"}, kinds
        received = sum(m["n"] for m in sent if m["run"] == rid and m["type"] == "tasks")
        assert received + dropped.get(rid, 0) == 31 + i, (rid, received, dropped.get(rid))


class _WatchedPublisher(Publisher):
    """A publisher that notes which thread ran each poll, and whether two overlapped."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.polls: list[tuple[int, float]] = []
        self.active = 0
        self.overlapped = False

    def _poll(self) -> None:
        self.active += 1
        self.overlapped |= self.active > 1
        self.polls.append((threading.get_ident(), time.perf_counter()))
        try:
            super()._poll()
        finally:
            self.active -= 1


def test_a_compute_polls_for_the_panel_in_its_own_thread() -> None:
    """While a compute hands over batches of task rows, the polls run in its thread (each
    poll gives the GIL up many times: in the sender thread, every one of those would be a
    hand-over the compute waits for); the sender thread leaves them to it, sends what they
    queued, and polls never overlap. Every row still reaches the panel."""
    publisher = _WatchedPublisher(rate=20, tick=0.1, max_queue=256)
    comm = _RecordingComm()
    publisher.start()
    try:
        publisher.attach(comm)
        _wait_for(lambda: any(m["type"] == "hello" for m in comm.sent))
        n = 30_000
        dsk: dict[Any, Any] = {("inc-abc12345", i): (add, i, 1) for i in range(n)}
        dsk["total-abc12345"] = (sum, [("inc-abc12345", i) for i in range(n)])
        with daskprofile.profile(resources=False, stacks=False) as run:
            t0 = time.perf_counter()
            dask.get(dsk, "total-abc12345")
            t1 = time.perf_counter()
        rid = str(run.meta["id"])
        _wait_for(lambda: any(m["type"] == "run_end" and m["run"] == rid for m in comm.sent))
    finally:
        publisher.stop()
    here = threading.get_ident()
    # before the first batch (dask orders the graph) and after the last, the sender polls
    during = [
        (who == here, round(when - t0, 3)) for who, when in publisher.polls if t0 <= when <= t1
    ]
    mine = [i for i, (ours, _) in enumerate(during) if ours]
    assert len(mine) >= 3, during
    between = during[mine[0] : mine[-1] + 1]
    assert sum(not ours for ours, _ in between) <= 1, during  # one late batch at most
    assert not publisher.overlapped
    rows = sum(m["n"] for m in comm.sent if m["type"] == "tasks" and m["run"] == rid)
    assert rows == n + 1


class _StuckComm(_RecordingComm):
    """A frontend that stopped reading: ``send`` blocks until released."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, data: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        self.entered.set()
        self.release.wait(30)
        super().send(data, buffers)


def test_a_stuck_frontend_never_holds_up_a_compute() -> None:
    from daskprofile.jupyter.publisher import Publisher

    publisher = Publisher(rate=20, tick=0.05, max_queue=6)
    comm = _StuckComm()
    publisher.start()
    try:
        publisher.attach(comm)
        assert comm.entered.wait(10)  # the sender thread is now stuck in send (the hello)
        rid = _profiled_compute(2000)  # would hang here if the compute waited on the panel
        assert not comm.release.is_set()
        comm.release.set()
        _wait_for(lambda: any(m["type"] == "run_end" and m["run"] == rid for m in comm.sent))
    finally:
        comm.release.set()
        publisher.stop()
    rows = sum(m["n"] for m in comm.sent if m["type"] == "tasks" and m["run"] == rid)
    assert rows == 2001


class _CountingComm(_RecordingComm):
    """A panel's comm that keeps only each message's type and run (holds no data)."""

    def send(self, data: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        self.sent.append({"type": data.get("type"), "run": data.get("run")})


def test_runs_recorded_for_the_panel_keep_compact_task_tables() -> None:
    """The kernel keeps the panel's last runs for replays: each must hold its tasks in the
    compact form (issue budget: <= 100 B/task retained), not every key as a str."""
    n = 20_000
    dsk: dict[Any, Any] = {("inc-abc12345", i): (add, i, 1) for i in range(n)}
    dsk["total-abc12345"] = (sum, [("inc-abc12345", i) for i in range(n)])
    comm = _CountingComm()
    meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
    dpcomm._on_open(comm, {"metadata": meta, "content": {"data": {"type": "hello"}}})

    def compute_and_wait() -> None:
        before = len(recorder.history())
        dask.get(dsk, "total-abc12345")
        _wait_for(lambda: len(recorder.history()) > before)
        rid = recorder.history()[-1].meta["id"]
        _wait_for(lambda: any(m["type"] == "run_end" and m["run"] == rid for m in comm.sent))

    try:
        recorder.clear_history()
        compute_and_wait()  # warm up: imports, interning tables, samplers
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        compute_and_wait()
        gc.collect()
        per_task = (tracemalloc.get_traced_memory()[0] - base) / n
        tracemalloc.stop()
        run = recorder.history()[-1]
        assert run.summary()["tasks"] == n + 1
    finally:
        comm.close_cb({})
        dpcomm.shutdown()
        recorder.clear_history()
    assert per_task <= 100, f"a finished panel run retains {per_task:.0f} B/task"


_STREAM_ONE_RUN = """
import sys, time, uuid
from operator import add
import dask
from daskprofile.record import history as recorder
from daskprofile.jupyter import comm as dpcomm

class Comm:
    comm_id = uuid.uuid4().hex
    sent = []
    def send(self, data, buffers=None): self.sent.append(data.get("type"))
    def on_msg(self, cb): pass
    def on_close(self, cb): self.close_cb = cb
    def close(self): pass

comm = Comm()
meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
dpcomm._on_open(comm, {"metadata": meta, "content": {"data": {"type": "hello"}}})
dsk = {("inc-abc12345", i): (add, i, 1) for i in range(3000)}
dsk["total"] = (sum, [("inc-abc12345", i) for i in range(3000)])
dask.threaded.get(dsk, "total")
deadline = time.monotonic() + 30
while "run_end" not in comm.sent and time.monotonic() < deadline:
    time.sleep(0.02)
comm.close_cb({})
dpcomm.shutdown()
print("run_end" in comm.sent, "tasks" in comm.sent, "pandas" in sys.modules)
"""


def test_streaming_a_run_to_the_panel_never_imports_pandas() -> None:
    """The publisher shares the GIL with the user's next compute: importing pandas there
    (to summarise a run) held it for ~0.6 s at the first run's end."""
    out = subprocess.run(
        [sys.executable, "-c", _STREAM_ONE_RUN],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False"], out.stdout + out.stderr


def _fail(*args: Any) -> None:
    raise ZeroDivisionError("on purpose")


def test_progress_counts_erred_tasks_among_the_finished_ones() -> None:
    """``done`` is every finished task, erred ones included (the panel draws ``done -
    erred`` as succeeded): a group whose only task raised is 1 / 1 with 1 erred."""
    dsk = {
        ("ok-aa11", 0): (add, 1, 1),
        ("ok-aa11", 1): (add, 1, 2),
        ("bad-bb22", 0): (_fail, ("ok-aa11", 0), ("ok-aa11", 1)),
    }
    with (
        pytest.raises(ZeroDivisionError),
        daskprofile.profile(resources=False, stacks=False) as run,
    ):
        dask.get(dsk, ("bad-bb22", 0))
    messages = Feed(run, frozen_cursors(run)).replay()
    (progress,) = [data for data, _ in messages if data["type"] == "progress"]
    names = {data["type"]: data for data, _ in messages}["groups"]["names"]
    by_group = {
        names[g]: (total, done, erred)
        for g, total, done, erred in zip(
            progress["groups"], progress["total"], progress["done"], progress["erred"], strict=True
        )
    }
    assert by_group == {"ok": (2, 2, 0), "bad": (1, 1, 1)}


def test_rows_from_a_source_that_is_not_polled_reach_the_panel_before_the_next_tick() -> None:
    """A cluster's rows arrive on the client's event loop thread, not through a compute's
    hook: their arrival nudges the publisher, which polls then rather than a tick later."""
    from daskprofile.collectors.tasks import RemoteRows
    from daskprofile.options import ProfileOptions
    from daskprofile.record.recording import Recording

    publisher = Publisher(tick=60.0)  # no poll of its own for a minute after the first
    comm = _RecordingComm()
    options = ProfileOptions(
        tasks=True,
        resources=False,
        cache=False,
        stacks=False,
        dt=0.1,
        interval=0.01,
        max_records=1000,
    )
    recording = Recording(options, title="nudged", auto=True)
    publisher.start()
    try:
        publisher.attach(comm, dpcomm.PROTOCOL_VERSION)
        run = recording.start()
        rid = str(run.meta.id)
        _wait_for(lambda: any(m.get("run") == rid for m in comm.sent if m["type"] == "run_start"))
        time.sleep(0.2)  # the publisher's first poll is behind us: the next is a minute away
        assert recording.tasks is not None
        now = time.perf_counter()
        recording.tasks.add_rows(
            RemoteRows(
                key=["x-1", "x-2"],
                group=["x", "x"],
                worker=["tcp://w:1 thread 0"] * 2,
                submit=[now, now],
                start=[now, now],
                stop=[now, now],
                error=[None, None],
                compute=[1, 1],
            )
        )
        recording.cursors.arrived()
        _wait_for(
            lambda: sum(m["n"] for m in comm.sent if m["type"] == "tasks" and m["run"] == rid) == 2,
            timeout=10,
        )
        assert publisher.nudge in recording.cursors.listeners
        # rows that keep coming: polls NUDGE_GAP apart, and no nudge wakes the thread
        wakes = 0
        wake = publisher._wake.set

        def counted() -> None:
            nonlocal wakes
            wakes += 1
            wake()

        publisher._wake.set = counted  # type: ignore[method-assign]
        for _ in range(20):
            recording.cursors.arrived()
            time.sleep(0.02)
        assert wakes == 0
        assert publisher._next_poll - time.perf_counter() <= NUDGE_GAP
    finally:
        recording.finish()
        publisher.stop()
        recorder.clear_history()
    assert publisher.nudge not in recording.cursors.listeners  # nothing left behind
