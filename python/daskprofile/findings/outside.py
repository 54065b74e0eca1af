"""``outside-tasks``: time from each ``compute()`` call to its first task, and between computes.

The run's ``computes`` table says when each compute was called (``dask.compute``, timed
while recording), when the scheduler got its graph and when it ended. Between the call and
the submission dask builds and optimizes the graph; between the submission and the first
task the scheduler orders it (or a cluster receives it); between one compute's end and the
next call the block runs the user's own code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._facts import Facts
from ._text import finding, pct, secs

__all__ = ["outside_tasks", "split"]

MIN_SHARE = 0.05


def split(f: Facts) -> dict[str, float] | None:
    """Seconds spent building graphs, handing them over, and between computes (None: no
    compute recorded)."""
    c = f.computes
    if not len(c["submit"]) or f.n == 0:
        return None
    submit, call, end = c["submit"], c["call"], c["end"]
    first = _first_tasks(f, np.asarray(c["id"], dtype=np.int64), submit)
    known = np.isfinite(first)
    begin = np.where(np.isfinite(call), call, submit)
    build = float(np.nansum((submit - call)[known & np.isfinite(call)]))
    handover = float(np.sum(np.clip(first[known] - submit[known], 0, None)))
    order = np.argsort(begin)
    b, e = begin[order], end[order]
    gaps = b[1:] - np.maximum.accumulate(np.nan_to_num(e, nan=-np.inf))[:-1]
    between = float(np.sum(np.clip(gaps[np.isfinite(gaps)], 0, None)))
    return {"build": max(build, 0.0), "handover": handover, "between": between, "computes": len(b)}


def _first_tasks(f: Facts, ids: np.ndarray, submit: np.ndarray) -> np.ndarray:
    """The first task start of each compute: by id (local), else the first start after
    its submission (a cluster graph)."""
    first = np.full(len(ids), np.nan)
    order = np.argsort(f.start)
    starts = f.start[order]
    for i, (cid, sub) in enumerate(zip(ids.tolist(), submit.tolist(), strict=True)):
        if cid > 0:
            mine = f.start[f.compute == cid]
            first[i] = mine.min() if len(mine) else np.nan
        else:
            j = np.searchsorted(starts, sub)
            first[i] = starts[j] if j < len(starts) else np.nan
    return first


def outside_tasks(f: Facts) -> list[dict[str, Any]]:
    """The ``outside-tasks`` finding, when that time is a sizeable share of the wall time."""
    parts = split(f)
    if parts is None:
        return []
    build, handover, between = parts["build"], parts["handover"], parts["between"]
    impact = build + handover + between
    if impact < MIN_SHARE * f.wall:
        return []
    n = int(parts["computes"])
    evidence = {
        "build_s": build,
        "handover_s": handover,
        "between_computes_s": between,
        "computes": n,
    }
    message = (
        f"{secs(impact)} ({pct(impact / f.wall)} of the wall time) passed outside tasks: "
        f"{secs(build)} building and optimizing graphs after compute() was called, "
        f"{secs(handover)} from handing them over to the first task, {secs(between)} "
        f"between the block's {n} computes."
    )
    largest = max(("build", build), ("handover", handover), ("between", between), key=_second)
    suggestion = {
        "build": "Build fewer, smaller graphs: larger chunks, persist() intermediate results "
        "reused by several computes, compute several results in one dask.compute(a, b) call.",
        "handover": "The scheduler spends long on each graph before it runs: fewer, larger "
        "tasks; on a cluster, scatter large local data instead of embedding it in the graph.",
        "between": "Your own code between computes takes this time: compute the results "
        "together in one dask.compute call, or move that code into tasks.",
    }[largest[0]]
    return [finding("outside-tasks", "computes", impact, f.wall, evidence, message, suggestion)]


def _second(item: tuple[str, float]) -> float:
    return item[1]
