"""Memory findings: ``memory`` (peak against what is available, who held it), and on a
cluster ``spill-bound`` (time reading and writing spilled data) and ``transfer-bound``
(time fetching dependencies from other workers).

The peak is the process tree's resident memory (on a cluster: each worker process against
its memory limit); the groups holding most at the peak are read from the cache table
(bytes held per group over time). Transfer time comes from distributed's own records of
each task (``run.actions``), spread over the cluster's threads.

Spill time starts from the same records (``disk-read``/``disk-write`` actions), but
distributed notes only what a task thread waited on for more than 5 ms: most writes (the
memory monitor evicting on the event loop, evictions under 5 ms) go unrecorded (measured
here: 0.03-0.13 s of actions for 2.2-4.4 s of disk writes per worker). Each worker's
spill counters (``run.memory``: bytes written and read back) fill the gap: bytes
written beyond what the actions show are priced at that worker's recorded read rate
(recorded ``disk-read`` seconds per byte read back), which writes were measured to
exceed by 1.2-1.4x (an estimate on the low side). The counters also decide whether a
run spilled at all: a >5 ms ``disk-read`` without spilling is a pause (GC, GIL), not disk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cluster_tables import key_groups, key_labels
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
    spill = _spill(f, table, action, took, threads)
    transfer = _by_group(f, "transfer-bound", action == "transfer", groups, took, nbytes, threads)
    return spill + transfer


def _spill(
    f: Facts, table: dict[str, Any], action: np.ndarray, took: np.ndarray, threads: int
) -> list[dict[str, Any]]:
    """One ``spill-bound`` row for the run: disk time per worker (see the module
    docstring) over the cluster's threads, naming the groups read back from disk."""
    counters = _spill_counters(f)
    if counters == {}:
        return []  # the workers' counters say nothing was spilled during the run
    worker = np.asarray([*table["workers"], ""], dtype=object)[
        np.asarray(table["worker"], dtype=np.int64)
    ]
    reads, writes = action == "disk-read", action == "disk-write"
    read_s = write_s = estimated = 0.0
    written = read_back = 0
    for w in sorted(set(worker[reads | writes].tolist()) | set(counters or ())):
        r = float(took[reads & (worker == w)].sum())
        wr = float(took[writes & (worker == w)].sum())
        read_s, write_s = read_s + r, write_s + wr
        spilled, unspilled = (counters or {}).get(w, (0, 0))
        written, read_back = written + spilled, read_back + unspilled
        if r > 0 and unspilled > 0:  # bytes written, priced at this worker's read rate
            estimated += max(0.0, spilled * r / unspilled - wr)
    disk = read_s + write_s + estimated
    impact = disk / threads
    if impact < MIN_SHARE * f.wall:
        return []
    spilled_groups = _read_back_groups(f, table, reads, took)
    paid = _ranked(np.asarray([*table["groups"], ""], dtype=object)[key_groups(table)],
                   reads | writes, took)  # fmt: skip
    names = spilled_groups or paid
    evidence = {
        "disk_s": disk,
        "read_s": read_s,
        "write_s": write_s,
        "unrecorded_write_s": estimated,
        "bytes_written": int(written),
        "bytes_read": int(read_back),
        "actions": int((reads | writes).sum()),
        "threads": threads,
        "spilled_groups": spilled_groups,
        "waiting_groups": paid,
    }
    moved = (
        f" ({size(written)} written, {size(read_back)} read back)" if counters is not None else ""
    )
    message = (
        f"Workers spent {secs(disk)} writing results to disk and reading them back"
        f"{moved}: about {secs(impact)} of the wall time ({pct(impact / f.wall)}) over "
        f"{threads} threads. Spilled: {', '.join(names[:3]) or 'not known'}."
    )
    if estimated > 0:
        message += (
            f" distributed recorded {secs(read_s + write_s)} of it; the rest is estimated "
            "from the bytes spilled."
        )
    suggestion = (
        "Give workers more memory (memory_limit), use fewer larger workers, or hold less "
        "at once (smaller chunks, fewer persisted results, reductions that combine early)."
    )
    group = ", ".join(names[:3])
    return [finding("spill-bound", group, impact, f.wall, evidence, message, suggestion,
                    groups=names)]  # fmt: skip


def _spill_counters(f: Facts) -> dict[str, tuple[int, int]] | None:
    """Bytes each worker wrote to disk and read back during the run (its counters' growth
    from its first sample, taken before the run); ``{}``: no worker spilled; None: not
    known (no samples, or samples without counters: workers without the plugin)."""
    mem = f.run.raw("memory")
    worker = np.asarray(mem["worker"], dtype=np.int64)
    written = np.asarray(mem["spill_bytes"], dtype=np.int64)
    read = np.asarray(mem["unspill_bytes"], dtype=np.int64)
    if not len(worker):
        return None
    if not written.any() and not read.any():
        return None if np.any(np.asarray(mem["spilled"])) else {}
    out = {}
    for w in np.unique(worker).tolist():
        mine = worker == w
        grown = (int(written[mine].max() - written[mine][0]),
                 int(read[mine].max() - read[mine][0]))  # fmt: skip
        if any(grown):
            out[str(mem["workers"][w])] = grown
    return out


def _read_back_groups(
    f: Facts, table: dict[str, Any], reads: np.ndarray, took: np.ndarray
) -> list[str]:
    """Groups of the inputs of tasks that waited on disk reads (what was on disk), most
    waited-for first."""
    if not f.has_edges or not reads.any():
        return []
    rows = np.flatnonzero(reads)
    index = {k: i for i, k in enumerate(f.run.raw("tasks")["key"])}
    weight: dict[str, float] = {}
    for label, t in zip(key_labels(table, rows), took[rows].tolist(), strict=True):
        i = index.get(label)
        if i is None:
            continue
        for d in f.indices[f.indptr[i] : f.indptr[i + 1]].tolist():
            name = f.groups[int(f.group[d])]
            weight[name] = weight.get(name, 0.0) + t
    return [g for g, _ in sorted(weight.items(), key=lambda kv: -kv[1])]


def _ranked(groups: np.ndarray, picked: np.ndarray, took: np.ndarray) -> list[str]:
    """The groups of the picked rows, most time first."""
    weight: dict[str, float] = {}
    for g, t in zip(groups[picked].tolist(), took[picked].tolist(), strict=True):
        weight[str(g)] = weight.get(str(g), 0.0) + t
    return [g for g, _ in sorted(weight.items(), key=lambda kv: -kv[1])]


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
