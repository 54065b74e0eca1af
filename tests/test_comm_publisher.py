"""The publisher's parts in-process: bounded outbox, drop accounting, cache decimation."""

from __future__ import annotations

import numpy as np

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
