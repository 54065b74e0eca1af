"""The cluster tables without a cluster: the client-side log, the raw forms, the views,
save/load, and the bytes a finished run keeps per row."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")

import daskprofile
from daskprofile import cluster_tables as ct
from daskprofile.distributed._cluster_log import ClusterLog, why_left
from daskprofile.run import Run

A, B, C = "tcp://10.0.0.1:4001", "tcp://10.0.0.2:4002", "tcp://10.0.0.3:4003"


def _actions(keys: list[str], start: float, action: str = "transfer") -> dict[str, list[Any]]:
    n = len(keys)
    return {
        "key": keys,
        "group": [k.split("-")[0].strip("('") for k in keys],
        "action": [action] * n,
        "start": [start + i for i in range(n)],
        "stop": [start + i + 0.5 for i in range(n)],
        "peer": [B if action == "transfer" else ""] * n,
        "bytes": [1000 * (i + 1) if action == "transfer" else -1 for i in range(n)],
    }


def _transfers(n: int, start: float, direction: str, peer: str) -> dict[str, list[Any]]:
    return {
        "direction": [direction] * n,
        "start": [start + i for i in range(n)],
        "stop": [start + i + 0.25 for i in range(n)],
        "peer": [peer] * n,
        "bytes": [4_000_000] * n,
        "compressed": [4_000_100 if direction == "outgoing" else -1] * n,
        "keys": [2] * n,
        "type": ["numpy.ndarray"] * n,
    }


def _memory(times: list[float], process: list[int], managed: list[int]) -> dict[str, list[Any]]:
    n = len(times)
    return {
        "time": times,
        "process": process,
        "managed": managed,
        "spilled": [0, 5_000_000, 9_000_000][:n] + [9_000_000] * (n - 3),
        "spilled_keys": [0, 1, 2][:n] + [2] * (n - 3),
        "spill_count": [10 + i for i in range(n)],
        "spill_bytes": [100 + 50 * i for i in range(n)],
        "unspill_count": [3] * n,
        "unspill_bytes": [30] * n,
    }


TOKEN = "0123456789abcdef0123456789abcdef"  # a dask token (tokenize: 32 hex digits)
KEYS = [
    "('matmul-1a2b3c4d', 0, 1)",
    "('matmul-1a2b3c4d', 2, 11)",
    f"inc-{uuid.UUID(int=7)}",  # submit(pure=False)
    f"inc-{uuid.UUID(int=8)}-12",  # map(pure=False)
    f"inc-{TOKEN}",  # submit: the token of the function and arguments
    "plain",
]


def test_keys_are_interned_names_and_short_suffixes_and_read_back_the_same() -> None:
    log = ClusterLog()
    log.worker_tables({A: {"actions": _actions(KEYS, 100.0)}}, to_perf=-50.0)
    table = log.table("actions", 0.0, None)
    assert ct.key_labels(table) == KEYS
    assert ct.key_labels(table, np.array([4, 0])) == [KEYS[4], KEYS[0]]
    assert len(table["names"]) == 3  # one per name: matmul, inc, plain
    # uuids and tokens: 16 raw bytes
    assert len(table["text"]) == len("0, 1)") + len("2, 11)") + 16 + 16 + len("-12") + 16
    frame = daskprofile.run.Run({"t0": 40.0}, {"actions": table}).actions
    n = len(KEYS)
    assert list(frame["key"]) == KEYS
    assert list(frame["group"]) == ["matmul", "matmul", "inc", "inc", "inc", "plain"]
    assert list(frame["worker"]) == [A] * n
    assert list(frame["peer"]) == [B] * n
    assert frame["start"].tolist() == pytest.approx([10.0 + i for i in range(n)])
    assert (frame["stop"] - frame["start"]).tolist() == pytest.approx([0.5] * n)
    assert frame["bytes"].tolist() == [1000 * (i + 1) for i in range(n)]


def test_a_run_reads_the_rows_of_its_window_only() -> None:
    log = ClusterLog()
    log.worker_tables(
        {
            A: {
                "actions": _actions(["x-1", "x-2", "x-3"], 10.0, "disk-read"),
                "transfers": _transfers(3, 10.0, "incoming", B),
                "memory": _memory([10.0, 11.0, 12.0], [100] * 3, [50] * 3),
            }
        },
        to_perf=0.0,
    )
    for name, column in (("actions", "start"), ("transfers", "start"), ("memory", "time")):
        table = log.table(name, 10.5, 11.5)
        assert table[column].tolist() == [11.0], name
    actions = log.table("actions", 10.5, None)
    assert ct.key_labels(actions) == ["x-2", "x-3"]
    assert actions["bytes"].tolist() == [-1, -1]


def test_the_cap_drops_the_oldest_rows_and_their_key_text_and_says_so() -> None:
    log = ClusterLog(max_records=80)
    keys = [f"('load-abcdef12', {i})" for i in range(200)]
    for lo in range(0, 200, 20):
        log.worker_tables({A: {"actions": _actions(keys[lo : lo + 20], float(lo))}}, 0.0)
    table = log.table("actions", 0.0, None)
    n = len(table["start"])
    assert 0 < n <= 80
    assert ct.key_labels(table) == keys[-n:]
    assert table["dropped"] == 200 - n  # rows of this window were dropped
    assert log.table("actions", 150.0, None)["dropped"] == 0  # none of that one's


def test_transfers_are_placed_by_the_end_that_logged_them() -> None:
    log = ClusterLog()
    log.worker_tables({A: {"transfers": _transfers(2, 5.0, "incoming", B)}}, 0.0)
    log.worker_tables({B: {"transfers": _transfers(2, 5.1, "outgoing", A)}}, 0.0)
    frame = Run({"t0": 0.0}, {"transfers": log.table("transfers", 0.0, None)}).transfers
    assert set(zip(frame["source"], frame["destination"], strict=True)) == {(B, A)}
    assert list(frame["direction"]) == ["incoming"] * 2 + ["outgoing"] * 2
    assert frame["compressed"].isna().tolist() == [True, True, False, False]
    assert (frame["keys"] == 2).all()
    assert set(frame["type"]) == {"numpy.ndarray"}


def test_bandwidth_per_pair_type_and_time_reads_the_receiving_end() -> None:
    log = ClusterLog()
    log.worker_tables({A: {"transfers": _transfers(4, 0.0, "incoming", B)}}, 0.0)
    log.worker_tables({C: {"transfers": _transfers(2, 0.0, "incoming", B)}}, 0.0)
    log.worker_tables({B: {"transfers": _transfers(6, 0.0, "outgoing", A)}}, 0.0)
    run = Run({"t0": 0.0}, {"transfers": log.table("transfers", 0.0, None)})
    pairs = run.bandwidth()
    assert list(zip(pairs["source"], pairs["destination"], strict=True)) == [(B, A), (B, C)]
    assert pairs["bytes"].tolist() == [16_000_000, 8_000_000]
    assert pairs["transfers"].tolist() == [4, 2]
    assert pairs["bandwidth"].tolist() == pytest.approx([16e6, 16e6])  # 4 MB in 0.25 s
    by_type = run.bandwidth("type")
    assert by_type["type"].tolist() == ["numpy.ndarray"]
    assert by_type["bytes"].tolist() == [24_000_000]
    over_time = run.bandwidth("time", dt=0.5)
    assert (over_time["bandwidth"] * 0.5).sum() == pytest.approx(24_000_000)
    assert over_time["bandwidth"].tolist()[:3] == pytest.approx([2 * 4e6 / 0.5, 0, 2 * 4e6 / 0.5])
    with pytest.raises(ValueError, match="bandwidth by"):
        run.bandwidth("colour")


def test_memory_splits_unmanaged_into_old_and_recent_and_counts_spills_from_the_start() -> None:
    log = ClusterLog()
    rows = _memory([0.0, 10.0, 20.0, 45.0], [300, 200, 500, 400], [100, 100, 100, 100])
    log.worker_tables({A: {"memory": rows, "limit": 1_000}}, 0.0)
    frame = Run({"t0": 0.0}, {"memory": log.table("memory", 0.0, None)}).memory
    assert frame["unmanaged"].tolist() == [200, 100, 400, 300]
    # old: the least unmanaged memory over the last 30 s (distributed's definition)
    assert frame["unmanaged_old"].tolist() == [200, 100, 100, 300]
    assert frame["unmanaged_recent"].tolist() == [0, 0, 300, 0]
    assert frame["spill_count"].tolist() == [0, 1, 2, 3]
    assert frame["spill_bytes"].tolist() == [0, 50, 100, 150]
    assert frame["spilled"].tolist() == [0, 5_000_000, 9_000_000, 9_000_000]
    assert (frame["limit"] == 1_000).all()
    assert (frame["worker"] == A).all()


def test_heartbeats_give_memory_samples_without_spill_counters() -> None:
    log = ClusterLog()
    info = {
        "last_seen": 3.0,
        "memory_limit": 2_000,
        "metrics": {
            "memory": 900,
            "managed_bytes": 700,
            "spilled_bytes": {"memory": 200, "disk": 150},
        },
    }
    log.heartbeat(A, info, to_perf=1.0)
    frame = Run({"t0": 0.0}, {"memory": log.table("memory", 0.0, None)}).memory
    row = frame.iloc[0]
    assert (row["time"], row["process"], row["managed"], row["spilled"]) == (4.0, 900, 500, 150)
    assert pd.isna(row["spilled_keys"])
    assert pd.isna(row["spill_count"])
    assert row["limit"] == 2_000


@pytest.mark.parametrize(
    ("cause", "reason", "expected", "why"),
    [
        ("retire-workers", None, True, "retired"),
        ("worker-close-gracefully", None, None, "retired"),
        ("handle-worker-cleanup", "nanny-close", None, "closed"),
        ("check-worker-ttl", None, None, "timed out"),
        ("handle-worker-cleanup", None, False, "lost"),
        ("nanny-close", None, False, "lost"),
    ],
)
def test_why_a_worker_left(cause: str, reason: str | None, expected: Any, why: str) -> None:
    assert why_left(cause, reason, expected) == why


def test_the_roster_has_one_row_per_stay_and_a_run_sees_the_stays_in_its_window() -> None:
    log = ClusterLog()
    present = {"event": "present", "time": None, "address": A, "name": "a", "nthreads": 2}
    joined = {"event": "joined", "time": 20.0, "address": C, "name": "c", "memory_limit": 9}
    left = {
        "event": "left",
        "time": 30.0,
        "address": A,
        "cause": "handle-worker-cleanup",
        "reason": None,
        "expected": False,
        "processing": ["('x-1', 0)"],
        "lost": ["('y-2', 1)"],
        "killed": [],
    }
    log.scheduler_tables({"members": [present, present, joined, left]}, to_perf=0.0)
    log.scheduler_tables({"members": [left]}, to_perf=0.0)  # a second client's plugin
    frame = Run({"t0": 10.0}, {"workers": log.table("workers", 10.0, None)}).workers
    assert frame["address"].tolist() == [A, C]
    assert frame["threads"].tolist() == [2, 0]
    assert np.isnan(frame["joined"].iloc[0])
    assert frame["joined"].iloc[1] == 10.0
    assert frame["left"].iloc[0] == 20.0
    assert np.isnan(frame["left"].iloc[1])
    assert frame["reason"].iloc[0] == "lost"
    assert pd.isna(frame["reason"].iloc[1])
    assert frame["cause"].iloc[0] == "handle-worker-cleanup"
    assert frame["lost"].iloc[0] == ["('y-2', 1)"]
    assert log.table("workers", 35.0, None)["address"] == [C]  # A had left by then
    assert log.table("workers", 0.0, 15.0)["address"] == [A]  # C came later


def test_reruns_name_keys_lost_or_interrupted_with_a_worker_and_twice_in_one_compute() -> None:
    tasks = pd.DataFrame(
        {
            "key": ["a", "b", "b", "c", "d", "d"],
            "group": ["g"] * 6,
            "compute": [1, 1, 1, 1, 1, 2],
        }
    )
    workers = pd.DataFrame(
        {
            "address": [A],
            "processing": [["c"]],
            "lost": [["b"]],
            "killed": [["k"]],
        }
    )
    from daskprofile import cluster_views

    out = cluster_views.reruns(tasks, workers).set_index("key")
    assert sorted(out.index) == ["b", "c", "k"]  # d ran in two computes: not a re-run
    assert out.loc["b", "why"] == "lost"
    assert out.loc["b", "runs"] == 2
    assert out.loc["c", "why"] == "interrupted"
    assert not out.loc["c", "killed"]
    assert out.loc["k", "killed"]
    assert out.loc["k", "worker"] == A


#: keys as dask makes them: array blocks, map(pure=False), delayed / submit(pure=True)
KEY_STYLES = {
    "array": lambda i: f"('rechunk-merge-4f2a9c1b8d7e6f5a', {i % 97}, {i // 97})",
    "map": lambda i: f"rechunk-merge-{uuid.UUID(int=i // 1000)}-{i}",
    "token": lambda i: f"rechunk-merge-{i:032x}",
}


def _filled_log(n: int, style: str = "array") -> ClusterLog:
    log = ClusterLog()
    chunk = 1000
    for lo in range(0, n, chunk):
        keys = [KEY_STYLES[style](i) for i in range(lo, lo + chunk)]
        rows = _actions(keys, float(lo))
        rows["group"] = ["rechunk-merge"] * chunk
        log.worker_tables(
            {
                A if lo % 2 else B: {
                    "actions": rows,
                    "transfers": _transfers(chunk, lo, "incoming", C),
                }
            },
            0.0,
        )
    return log


@pytest.mark.parametrize("style", sorted(KEY_STYLES))
def test_a_finished_run_keeps_at_most_64_bytes_per_action_and_transfer_row(style: str) -> None:
    n = 100_000
    log = _filled_log(n, style)
    for name in ("actions", "transfers"):
        table = log.table(name, 0.0, None)
        assert len(table["start"]) == n
        per_row = ct.retained(table) / n
        assert per_row <= 64, (name, per_row)
    table = log.table("actions", 0.0, None)
    assert ct.key_labels(table, np.array([0, n - 1])) == [
        KEY_STYLES[style](0),
        KEY_STYLES[style](n - 1),
    ]


def test_cluster_tables_save_load_and_dict_round_trips(tmp_path: Path) -> None:
    log = _filled_log(2000)
    log.worker_tables({A: {"memory": _memory([1.0, 2.0, 3.0], [9] * 3, [4] * 3), "limit": 7}}, 0)
    log.scheduler_tables(
        {"members": [{"event": "joined", "time": 1.5, "address": A, "name": "a", "pid": 3}]}, 0
    )
    data = {name: log.table(name, 0.0, None) for name in ct.NAMES}
    run = Run({"t0": 0.5, "t1": 9.0, "finished": True}, data)
    loaded = daskprofile.load(run.save(tmp_path / "run.npz"))
    again = Run.from_dict(json.loads(json.dumps(run.to_dict())))
    for other in (loaded, again):
        for name in ct.NAMES:
            pd.testing.assert_frame_equal(getattr(other, name), getattr(run, name), obj=name)
    assert len(run.actions) == 2000
    assert len(run.memory) == 3
    assert len(run.workers) == 1


def test_a_run_without_cluster_tables_has_empty_ones_with_their_columns(tmp_path: Path) -> None:
    run = Run({"t0": 0.0, "finished": True})
    from daskprofile import cluster_views

    expected = {
        "actions": cluster_views.ACTION_FRAME,
        "transfers": cluster_views.TRANSFER_FRAME,
        "memory": cluster_views.MEMORY_FRAME,
        "workers": ct.WORKER_FIELDS,
    }
    loaded = daskprofile.load(run.save(tmp_path / "local.npz"))
    for r in (run, loaded):
        for name, columns in expected.items():
            frame = getattr(r, name)
            assert frame.empty, name
            assert list(frame.columns) == list(columns), name
        assert r.reruns.empty
        assert r.bandwidth().empty


def test_rows_no_run_reads_any_more_are_let_go_without_counting_as_dropped() -> None:
    from daskprofile.distributed._cluster_log import attach_tables

    log = ClusterLog()
    first, second = Run({"t0": 0.0, "finished": False}), Run({"t0": 20.0, "finished": False})
    attach_tables(log, first)
    for lo in (0, 10, 20, 30):
        keys = [f"('x-1a2b3c4d', {i})" for i in range(lo, lo + 10)]
        log.worker_tables(
            {A: {"actions": _actions(keys, float(lo)), "memory": _memory([lo], [1], [1])}}, 0.0
        )
    attach_tables(log, second)
    first.meta.t1 = 25.0
    log.release(first)  # it reads its rows once more as it freezes: they stay till then
    first.finish(25.0)
    assert len(first.actions) == 26  # 0 to 25 s: nothing lost
    assert log.actions.first == 0
    second.meta.t1 = 40.0
    log.release(second)  # no run reads the rows before 20 s any more: they go
    assert log.actions.first == 20
    assert log.memory.first == 2
    second.finish(40.0)
    assert second.actions["start"].tolist() == [float(t) for t in range(20)]  # from t0
    assert second.meta.dropped["actions"] == 0
    assert second.memory["time"].tolist() == [0.0, 10.0]
    assert ct.key_labels(log.table("actions", 0.0, None))[0] == "('x-1a2b3c4d', 20)"
