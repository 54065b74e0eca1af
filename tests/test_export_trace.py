"""Chrome trace export: real runs, written, parsed back and checked against the run."""

from __future__ import annotations

import itertools
import json
import operator
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.export import to_chrome_trace

TOKEN = "5f3e0c0d9a1b2c3d4e5f60718293a4b5"


def graph(n: int, pause: float) -> dict[Any, Any]:
    """``n`` tasks sleeping ``pause`` then adding, and a sum."""
    dsk: dict[Any, Any] = {(f"nap-{TOKEN}", i): (time.sleep, pause) for i in range(n)}
    dsk.update({(f"add-{TOKEN}", i): (operator.add, i, 1) for i in range(n)})
    dsk["total"] = (sum, [(f"add-{TOKEN}", i) for i in range(n)], 0)
    dsk["naps"] = (len, [(f"nap-{TOKEN}", i) for i in range(n)])
    return dsk


@pytest.fixture(scope="module", params=["sync", "threads", "processes"])
def run(request: pytest.FixtureRequest) -> Any:
    """A finished run of a small graph on each local scheduler."""
    with daskprofile.profile() as recorded:
        named_schedulers[request.param](graph(6, 0.02), ["total", "naps"], num_workers=2)
    return recorded


def load(run: Any, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "trace.json"
    assert to_chrome_trace(run, path) == str(path)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_trace_has_one_complete_event_per_task(run: Any, tmp_path: Path) -> None:
    trace = load(run, tmp_path)
    tasks = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(tasks) == len(run.tasks) == 6 + 6 + 2
    assert sorted(e["args"]["key"] for e in tasks) == sorted(run.tasks["key"])
    assert {e["name"] for e in tasks} == set(run.tasks["group"]) == {"nap", "add", "total", "naps"}
    for event in tasks:
        assert event["dur"] >= 0
        assert event["ts"] >= 0
        assert event["args"]["status"] == "ok"
        assert "error" not in event["args"]
        assert event["args"]["wait"] >= 0
    naps = [e["dur"] for e in tasks if e["name"] == "nap"]
    assert min(naps) >= 0.02 * 1e6 * 0.9  # microseconds, timed where the task ran


def test_trace_names_a_thread_track_per_worker(run: Any, tmp_path: Path) -> None:
    trace = load(run, tmp_path)
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}  # fmt: skip
    assert sorted(names.values()) == sorted(set(run.tasks["worker"]))
    tasks = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["tid"] for e in tasks} <= set(names)
    for e in tasks:  # each event sits on the track of the worker that ran it
        worker = run.tasks.loc[run.tasks["key"] == e["args"]["key"], "worker"].iloc[0]
        assert names[e["tid"]] == worker


def test_trace_tasks_do_not_overlap_within_a_track(run: Any, tmp_path: Path) -> None:
    by_track: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for e in load(run, tmp_path)["traceEvents"]:
        if e["ph"] == "X":
            by_track[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        spans.sort()
        for (_, stop), (start, _) in itertools.pairwise(spans):
            assert start >= stop - 1  # 1 us of rounding


def test_trace_has_cpu_and_memory_counters(run: Any, tmp_path: Path) -> None:
    counters = [e for e in load(run, tmp_path)["traceEvents"] if e["ph"] == "C"]
    assert len(run.resources) > 0
    cpu = [e for e in counters if e["name"] == "CPU %"]
    memory = [e for e in counters if e["name"] == "Memory MB"]
    assert len(cpu) == len(memory) == len(run.resources)
    assert all(e["args"]["rss"] > 1 for e in memory)  # MB of a live Python process


def test_trace_records_failed_tasks_with_their_exception(tmp_path: Path) -> None:
    dsk = {"ok-1": (operator.add, 1, 1), "boom-1": (operator.truediv, 1, 0)}
    with daskprofile.profile() as run, pytest.raises(ZeroDivisionError):
        named_schedulers["threads"](dsk, ["ok-1", "boom-1"])
    tasks = {e["args"]["key"]: e for e in load(run, tmp_path)["traceEvents"] if e["ph"] == "X"}
    assert tasks["boom-1"]["args"]["status"] == "error"
    assert tasks["boom-1"]["args"]["error"] == "ZeroDivisionError"
