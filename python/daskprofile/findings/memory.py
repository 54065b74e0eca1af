"""Memory findings: ``memory`` (peak against what is available, who held it), and on a
cluster ``spill-bound`` (time reading and writing spilled data) and ``transfer-bound``
(time fetching dependencies from other workers).

The peak is the process tree's resident memory (on a cluster: each worker process against
its memory limit); the groups holding most at the peak are read from the cache table
(bytes held per group over time). Spill and transfer time come from distributed's own
records of each task (``run.actions``), spread over the cluster's threads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cluster_tables import key_groups
from ._facts import Facts
from ._text import finding, pct, secs, size

__all__ = ["memory", "spill_and_transfer"]

#: the peak is reported from this share of the memory available
PEAK_SHARE = 0.6
MIN_SHARE = 0.05


def memory(f: Facts, available: float | None = None) -> list[dict[str, Any]]:
    """The ``memory`` finding, when the peak came near what was available."""
    peak, limit, when, where = _peak(f, available)
    if peak is None or not limit or peak < PEAK_SHARE * limit:
        return []
    holders = _holders(f, when)
    share = peak / limit
    evidence = {
        "peak_bytes": int(peak),
        "available_bytes": int(limit),
        "peak_share": share,
        "at_s": when,
        "where": where,
        "holders": [[g, int(b)] for g, b in holders],
    }
    held = ", ".join(f"{g} {size(b)}" for g, b in holders) or "not recorded"
    message = (
        f"Memory peaked at {size(peak)}, {pct(share)} of the {size(limit)} available "
        f"({where}), {secs(when)} into the run; held at the peak: {held}."
    )
    suggestion = (
        "Hold less at once: smaller chunks, fewer results persisted or returned at the same "
        "time, reductions that combine early; on a cluster more memory per worker."
    )
    group = holders[0][0] if holders else ""
    # memory costs time only once it spills (spill-bound) or swaps: no time impact here
    held_groups = [str(g) for g, _ in holders]
    return [
        finding("memory", group, 0.0, f.wall, evidence, message, suggestion, groups=held_groups)
    ]


def _peak(f: Facts, available: float | None) -> tuple[float | None, float, float, str]:
    """(peak bytes, available bytes, time of the peak, where)."""
    if f.is_cluster:
        mem = f.run.raw("memory")
        process = np.asarray(mem["process"], dtype=np.float64)
        if len(process):
            limits = np.asarray(mem.get("limits", []), dtype=np.float64)
            worker = np.asarray(mem["worker"], dtype=np.int64)
            limit = limits[worker] if len(limits) > int(worker.max(initial=0)) else None
            if limit is not None and np.any(limit > 0):
                ratio = np.where(limit > 0, process / np.where(limit > 0, limit, 1), 0)
                i = int(np.argmax(ratio))
                label = str(mem["workers"][worker[i]])
                when = float(mem["time"][i]) - f.run.t0
                return float(process[i]), float(available or limit[i]), when, f"worker {label}"
    if not len(f.res_memory):
        return None, 0.0, 0.0, ""
    i = int(np.argmax(f.res_memory))
    total = float(available or f.memory_total or 0)
    return float(f.res_memory[i]), total, float(f.res_time[i]), "this machine"


def _holders(f: Facts, when: float, most: int = 3) -> list[tuple[str, float]]:
    """The groups holding most bytes at ``when``: the cache table's state at or before it
    when it held most (results handed back at a compute's end leave the cache, not RSS)."""
    cache = f.run.raw("cache")
    t = np.asarray(cache["time"], dtype=np.float64) - f.run.t0
    keep = t <= when + 1e-9
    if not keep.any():
        return []
    names = [str(g) for g in cache["groups"]]
    gid = np.asarray(cache["group"], dtype=np.int64)[keep]
    metric = np.asarray(cache["metric"], dtype=np.float64)[keep]
    held: dict[str, float] = {}
    best: dict[str, float] = {}
    total = top = 0.0
    for g, value in zip(gid.tolist(), metric.tolist(), strict=True):
        name = names[g]
        total += value - held.get(name, 0.0)
        held[name] = value
        if total >= top:
            top, best = total, dict(held)
    ranked = sorted(best.items(), key=lambda item: -item[1])
    return [(g, b) for g, b in ranked[:most] if b > 0]


def spill_and_transfer(f: Facts) -> list[dict[str, Any]]:
    """``spill-bound`` and ``transfer-bound`` groups of a cluster run."""
    if not f.is_cluster:
        return []
    table = f.run.raw("actions")
    start = np.asarray(table["start"], dtype=np.float64)
    if not len(start):
        return []
    took = np.asarray(table["stop"], dtype=np.float64) - start
    names = [str(a) for a in table["actions"]]
    action = np.asarray([*names, ""], dtype=object)[np.asarray(table["action"], dtype=np.int64)]
    groups = np.asarray([*table["groups"], ""], dtype=object)[key_groups(table)]
    nbytes = np.asarray(table["bytes"], dtype=np.float64)
    threads = f.slots()
    out = []
    for kind, picked in (
        ("spill-bound", np.isin(action, ["disk-read", "disk-write"])),
        ("transfer-bound", action == "transfer"),
    ):
        out += _by_group(f, kind, picked, groups, took, nbytes, threads)
    return out


def _by_group(  # noqa: PLR0917 - one call site, columns side by side
    f: Facts,
    kind: str,
    picked: np.ndarray,
    groups: np.ndarray,
    took: np.ndarray,
    nbytes: np.ndarray,
    threads: int,
) -> list[dict[str, Any]]:
    total = float(took[picked].sum())
    if total / threads < MIN_SHARE * f.wall:
        return []
    out = []
    for name in sorted(set(groups[picked].tolist())):
        mine = picked & (groups == name)
        spent = float(took[mine].sum())
        impact = spent / threads
        if impact < MIN_SHARE * f.wall:
            continue
        moved = float(nbytes[mine][nbytes[mine] >= 0].sum())
        evidence = {"time_s": spent, "bytes": int(moved), "actions": int(mine.sum()),
                    "threads": threads}  # fmt: skip
        rate = f"{size(moved / spent)}/s" if spent > 0 and moved > 0 else "unknown rate"
        what = "reading and writing spilled data" if kind == "spill-bound" else "fetching inputs"
        message = (
            f"Tasks of {name!r} spent {secs(spent)} {what} ({size(moved)}, {rate}): about "
            f"{secs(impact)} of the wall time ({pct(impact / f.wall)}) over {threads} threads."
        )
        suggestion = (
            "Give workers more memory (memory_limit), use fewer larger workers, or hold less "
            "at once (smaller chunks, fewer persisted results)."
            if kind == "spill-bound"
            else "Move less data between workers: fewer, larger workers; chunks aligned with "
            "the operation; avoid all-to-all steps (rechunk/shuffle) where you can."
        )
        out.append(
            finding(kind, name, impact, f.wall, evidence, message, suggestion, groups=[name])
        )
    return out
