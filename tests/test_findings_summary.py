"""What the summary's findings (and so ``run_end``) carry for the views to highlight: the
``groups`` each finding concerns and, for the critical path, the chain's task ``rows``
(protocol row indices, in order, capped); the inline view's reduced payload renumbers
those rows as its bars."""

from __future__ import annotations

import time

import dask
import numpy as np
from dask import delayed

import daskprofile
from daskprofile import profile
from daskprofile.jupyter import encode, light
from daskprofile.jupyter.light import Budget, light_messages
from daskprofile.run import SUMMARY_ROWS, _summary_finding

CHAIN = 10


def step(x: int) -> int:
    time.sleep(0.03)
    return x + 1


def side(i: int) -> int:
    time.sleep(0.002)
    return i


def _chain_run() -> daskprofile.Run:
    x = delayed(step)(0, dask_key_name=("step", 0))
    for i in range(1, CHAIN):
        x = delayed(step)(x, dask_key_name=("step", i))
    others = [delayed(side)(i, dask_key_name=("side", i)) for i in range(6)]
    with profile() as run:
        dask.compute(x, others, scheduler="threads", num_workers=2)
    return run


def test_the_critical_path_names_its_groups_and_its_rows_in_order() -> None:
    run = _chain_run()
    found = run.summary()["findings"]
    (chain,) = [f for f in found if f["kind"] == "critical-path"]
    assert chain["groups"] == ["step"]
    rows = chain["rows"]
    assert len(rows) == CHAIN
    tasks = run.raw("tasks", keys=False)
    names = [str(tasks["groups"][tasks["group"][r]]) for r in rows]
    assert names == ["step"] * CHAIN
    starts = np.asarray(tasks["start"])[rows]
    assert (np.diff(starts) > 0).all()  # in chain order
    for f in found:
        assert set(f) - {"rows"} == {
            "kind", "group", "impact_s", "share", "message", "suggestion", "groups"
        }  # fmt: skip
        assert ("rows" in f) == (f["kind"] == "critical-path")
        assert all(isinstance(g, str) for g in f["groups"])


def test_summary_rows_are_protocol_indices_and_capped() -> None:
    row = {
        "kind": "critical-path",
        "group": "a -> b",
        "impact_s": 1.0,
        "share": 0.5,
        "message": "m",
        "suggestion": "s",
        "groups": ["a", "b"],
        "rows": list(range(SUMMARY_ROWS + 50)),
    }
    out = _summary_finding(row, first=7)  # 7 rows lost to the memory cap before these
    assert out["rows"][:3] == [7, 8, 9]
    assert len(out["rows"]) == SUMMARY_ROWS
    assert "evidence" not in out
    plain = _summary_finding({**row, "rows": None, "groups": []}, first=0)
    assert "rows" not in plain
    assert plain["groups"] == []


def test_the_inline_payload_points_the_chain_at_its_bars() -> None:
    run = _chain_run()
    for budget in (Budget(), Budget(tasks=4)):  # as they are, and merged into bars
        reduced = light_messages(run, budget=budget)
        (data,) = [d for d, _ in reduced.messages if d["type"] == "run_end"]
        (chain,) = [f for f in data["summary"]["findings"] if f["kind"] == "critical-path"]
        (tasks,) = [encode.decode(d, b) for d, b in reduced.messages if d["type"] == "tasks"]
        (groups,) = [d for d, _ in reduced.messages if d["type"] == "groups"]
        name = dict(zip(groups["ids"], groups["names"], strict=True))
        bars = chain["rows"]
        assert bars
        assert all(0 <= b < tasks["n"] for b in bars)
        assert {name[int(tasks["arrays"]["group"][b])] for b in bars} == {"step"}
        if budget.tasks > 100:
            assert len(bars) == CHAIN


def test_a_run_end_without_findings_rows_passes_through_the_reduction() -> None:
    cols = {
        "group": np.zeros(3),
        "worker": np.zeros(3),
        "status": np.zeros(3),
        "submit": np.arange(3.0),
        "start": np.arange(3.0),
        "stop": np.arange(3.0) + 0.5,
    }
    end = encode.run_end("r", {"findings": [{"kind": "idle", "groups": []}]}, {}, [])
    replay = [encode.run_start("r", 0.0, 0.0, {}, None), encode.table("tasks", "r", cols, 0), end]
    reduced = light._reduce(replay, Budget(), None)
    assert reduced.messages[-1] == end
