"""The publisher in-process: bounded outbox, drop accounting, cache decimation, live rows."""

from __future__ import annotations

import threading
import time
import uuid
from operator import add
from typing import Any

import dask
import numpy as np

from daskprofile.jupyter import comm as dpcomm
from daskprofile.jupyter import encode
from daskprofile.jupyter.feed import decimate
from daskprofile.jupyter.publisher import Connection


def _tasks(n: int) -> encode.Message:
    cols = {c: np.zeros(n) for c, _ in encode.COLUMNS["tasks"]}
    return encode.table("tasks", "r", cols, first=0)


def test_full_outbox_drops_the_oldest_data_batches_and_counts_them() -> None:
    conn = Connection(comm=None, max_queue=3, rate=20)
    start = encode.run_start("r", 0.0, 0.0, {}, None)
    conn.push([start, _tasks(10), _tasks(20), _tasks(30), _tasks(40)], "r")
    kinds = [d["type"] for d, _ in conn.outbox]
    assert kinds == ["run_start", "tasks", "tasks"]  # structure is never dropped
    assert [d.get("n") for d, _ in conn.outbox] == [None, 30, 40]
    assert (conn.dropped_messages, conn.dropped_rows) == (2, 30)
    assert conn.dropped_dirty
    assert conn.dropped_run == "r"


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
