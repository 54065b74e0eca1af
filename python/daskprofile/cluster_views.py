"""Pandas views of a run's cluster tables (:mod:`.cluster_tables`), times in s since t0.

``actions``, ``transfers``, ``memory`` and ``workers`` decode the raw tables; ``bandwidth``
sums transfers per pair of workers, per type of data or over time (distributed's
performance report: "Bandwidth by worker", "Bandwidth by type"); ``reruns`` names the
tasks that ran again because a worker left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .cluster_tables import DIRECTIONS, Table, key_groups, key_labels

if TYPE_CHECKING:
    import pandas as pd

ACTION_FRAME = ("key", "group", "action", "worker", "start", "stop", "peer", "bytes")
TRANSFER_FRAME = (
    "start",
    "stop",
    "direction",
    "source",
    "destination",
    "bytes",
    "compressed",
    "keys",
    "type",
)
MEMORY_FRAME = (
    "time",
    "worker",
    "process",
    "managed",
    "unmanaged",
    "unmanaged_old",
    "unmanaged_recent",
    "spilled",
    "spilled_keys",
    "spill_count",
    "spill_bytes",
    "unspill_count",
    "unspill_bytes",
    "limit",
)
RERUN_FRAME = ("key", "group", "runs", "why", "worker", "killed")
#: seconds of ``distributed.worker.memory.recent-to-old-time`` (its default)
RECENT_TO_OLD = 30.0


def _frame(data: Any, columns: Any) -> pd.DataFrame:
    import pandas as pd

    df: pd.DataFrame = pd.DataFrame(data, columns=list(columns))
    return df


def _names(labels: list[Any], ids: Any) -> np.ndarray:
    lookup = np.asarray([*labels, ""], dtype=object)
    return lookup[np.asarray(ids, dtype=np.int64)]


def _known(values: Any) -> Any:
    """An int column where -1 means not known, as pandas' nullable ``Int64``."""
    import pandas as pd

    values = np.asarray(values, dtype=np.int64)
    out = pd.array(values, dtype="Int64")
    out[values < 0] = pd.NA
    return out


def actions(t: Table, t0: float) -> pd.DataFrame:
    """One row per non-compute action of a task on a worker."""
    groups = np.asarray([*t["groups"], ""], dtype=object)
    return _frame(
        {
            "key": np.asarray(key_labels(t), dtype=object),
            "group": groups[key_groups(t)],
            "action": _names(t["actions"], t["action"]),
            "worker": _names(t["workers"], t["worker"]),
            "start": np.asarray(t["start"], dtype=np.float64) - t0,
            "stop": np.asarray(t["stop"], dtype=np.float64) - t0,
            "peer": _names(t["workers"], t["peer"]),
            "bytes": _known(t["bytes"]),
        },
        ACTION_FRAME,
    )


def transfers(t: Table, t0: float) -> pd.DataFrame:
    """One row per transfer and end that logged it."""
    return _frame(
        {
            "start": np.asarray(t["start"], dtype=np.float64) - t0,
            "stop": np.asarray(t["stop"], dtype=np.float64) - t0,
            "direction": _names(list(DIRECTIONS), t["direction"]),
            "source": _names(t["workers"], t["source"]),
            "destination": _names(t["workers"], t["destination"]),
            "bytes": np.asarray(t["bytes"], dtype=np.int64),
            "compressed": _known(t["compressed"]),
            "keys": np.asarray(t["keys"], dtype=np.int64),
            "type": _names(t["types"], t["type"]),
        },
        TRANSFER_FRAME,
    )


def memory(t: Table, t0: float, recent_to_old: float = RECENT_TO_OLD) -> pd.DataFrame:
    """Samples per worker; unmanaged split into old (its minimum over the last
    ``recent_to_old`` seconds, as distributed does) and recent; spill and unspill counters
    count from the worker's first sample in the run."""
    time = np.asarray(t["time"], dtype=np.float64)
    worker = np.asarray(t["worker"], dtype=np.int64)
    process = np.asarray(t["process"], dtype=np.int64)
    managed = np.minimum(np.asarray(t["managed"], dtype=np.int64), process)
    unmanaged = process - managed
    old = _rolling_min(time, worker, unmanaged, recent_to_old)
    limits = np.asarray([*(int(x or 0) for x in t["limits"]), 0], dtype=np.int64)
    counters = {
        c: _from_first(worker, np.asarray(t[c], dtype=np.int64))
        for c in ("spill_count", "spill_bytes", "unspill_count", "unspill_bytes")
    }
    return _frame(
        {
            "time": time - t0,
            "worker": _names(t["workers"], worker),
            "process": process,
            "managed": managed,
            "unmanaged": unmanaged,
            "unmanaged_old": old,
            "unmanaged_recent": unmanaged - old,
            "spilled": np.asarray(t["spilled"], dtype=np.int64),
            "spilled_keys": _known(t["spilled_keys"]),
            **{c: _known(v) for c, v in counters.items()},
            "limit": limits[np.minimum(worker, len(limits) - 1)],
        },
        MEMORY_FRAME,
    )


def _rolling_min(time: np.ndarray, group: np.ndarray, values: np.ndarray, window: float) -> Any:
    """Per group, the minimum of ``values`` over the samples of the last ``window`` s
    (vectorised: range minima from a sparse table built one power of two at a time)."""
    out = values.copy()
    if not len(values):
        return out
    order = np.argsort(time, kind="stable")  # samples come about in time order: cheap
    small = group.min() >= 0 and group.max() <= 0xFFFF  # worker ids: a radix sort
    by = group[order].astype(np.uint16) if small else group[order]
    order = order[np.argsort(by, kind="stable")]
    t, g, v = time[order], group[order], values[order]
    cuts = np.flatnonzero(g[1:] != g[:-1]) + 1
    lo = np.empty(len(t), dtype=np.int64)
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(t)], strict=True):
        lo[a:b] = a + np.searchsorted(t[a:b], t[a:b] - window, side="left")
    hi = np.arange(len(t))
    length = hi - lo + 1
    level = np.frexp(length)[1] - 1  # floor(log2(length)), exact
    mins, best = v.copy(), v.copy()
    for k in range(int(level.max()) + 1):
        if k:
            span = 1 << (k - 1)
            mins[: len(mins) - span] = np.minimum(mins[: len(mins) - span], mins[span:])
        rows = np.flatnonzero(level == k)
        best[rows] = np.minimum(mins[lo[rows]], mins[hi[rows] - (1 << k) + 1])
    out[order] = best
    return out


def _from_first(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` minus each group's first known (>= 0) value; unknown stays -1."""
    out: np.ndarray = values.copy()
    rows = np.flatnonzero(values >= 0)
    if len(rows):
        g = group[rows]
        small = g.min() >= 0 and g.max() <= 0xFFFF  # worker ids: a radix sort
        order = np.argsort(g.astype(np.uint16) if small else g, kind="stable")
        ordered = g[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        groups, first = ordered[starts], order[starts]  # stable: each group's first row
        out[rows] = values[rows] - values[rows[first]][np.searchsorted(groups, g)]
    return out


def workers(t: Table, t0: float) -> pd.DataFrame:
    """One row per worker seen: joined/left in s since t0 (NaN: before the run / still
    there), why it left (``reason``), the cause distributed gave, and the keys it took:
    ``processing`` (running there, run again elsewhere), ``lost`` (results held there,
    computed again), ``killed`` (failed with ``KilledWorker``)."""
    n = len(t["address"])

    def times(values: list[Any]) -> list[float]:
        return [np.nan if v is None else float(v) - t0 for v in values]

    data: dict[str, list[Any]] = {
        f: list(t[f]) for f in ("address", "name", "host", "reason", "cause")
    }
    data["pid"] = [int(p or 0) for p in t["pid"]]
    data["threads"] = [int(x or 0) for x in t["threads"]]
    data["memory_limit"] = [int(x or 0) for x in t["memory_limit"]]
    data["joined"], data["left"] = times(t["joined"]), times(t["left"])
    for f in ("processing", "lost", "killed"):
        data[f] = [list(v or ()) for v in t[f]] if n else []
    from . import cluster_tables

    return _frame(data, cluster_tables.WORKER_FIELDS)


def reruns(tasks: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """Tasks that ran again: keys a leaving worker was running or held, and keys with
    more than one task row in one compute. ``why``: ``"lost"`` (its result was on a worker
    that left), ``"interrupted"`` (it was running on a worker that left), ``"again"`` (ran
    twice in one compute for another reason); ``runs``: its task rows; ``worker``: the
    worker that left; ``killed``: it failed with ``KilledWorker`` instead."""
    counts = tasks.groupby("key", sort=False).size() if len(tasks) else None
    group_of = dict(zip(tasks["key"], tasks["group"], strict=True)) if len(tasks) else {}
    rows: dict[str, dict[str, Any]] = {}
    for _, m in members.iterrows():
        for why, keys in (("lost", m["lost"]), ("interrupted", m["processing"])):
            for key in keys:
                rows.setdefault(key, {"why": why, "worker": m["address"], "killed": False})
        for key in m["killed"]:
            rows.setdefault(key, {"why": "interrupted", "worker": m["address"]})["killed"] = True
    if counts is not None:  # twice in one compute (not a later graph taking it up again)
        twice = tasks[tasks.duplicated(["key", "compute"], keep=False)]
        for key in dict.fromkeys(twice["key"]):
            rows.setdefault(key, {"why": "again", "worker": None, "killed": False})
    out = [
        {
            "key": key,
            "group": group_of.get(key, ""),
            "runs": int(counts.get(key, 0)) if counts is not None else 0,
            **info,
        }
        for key, info in rows.items()
    ]
    return _frame(out, RERUN_FRAME)


def bandwidth(frame: pd.DataFrame, by: str = "workers", dt: float = 1.0) -> pd.DataFrame:
    """Bytes per second of the transfers in ``frame`` (a ``transfers`` view), read from
    the receiving end (the sending end where no receiving end logged them).

    ``by="workers"``: per (source, destination): bytes, seconds, transfers, bandwidth
    (bytes / seconds transferring); ``by="type"``: the same per type of data moved;
    ``by="time"``: bytes/s over time in bins of ``dt`` seconds, each transfer spread
    evenly over its duration (``time`` is a bin's start)."""
    rows = frame[frame["direction"] == "incoming"]
    if not len(rows):
        rows = frame[frame["direction"] == "outgoing"]
    if by == "time":
        return _over_time(rows, dt)
    keys = {"workers": ["source", "destination"], "type": ["type"]}.get(by)
    if keys is None:
        raise ValueError(f"bandwidth by {by!r}: use 'workers', 'type' or 'time'")
    seconds = (rows["stop"] - rows["start"]).clip(lower=1e-3)
    table = rows.assign(seconds=seconds, transfers=1).groupby(keys, as_index=False)
    out = table[["bytes", "seconds", "transfers"]].sum()
    out["bandwidth"] = out["bytes"] / out["seconds"]
    ordered: pd.DataFrame = out.sort_values("bytes", ascending=False, ignore_index=True)
    return ordered


def _over_time(rows: pd.DataFrame, dt: float) -> pd.DataFrame:
    if dt <= 0:
        raise ValueError(f"dt must be positive, got {dt!r}")
    if not len(rows):
        return _frame({"time": [], "bandwidth": []}, ("time", "bandwidth"))
    start = rows["start"].to_numpy(dtype=float)
    stop = np.maximum(rows["stop"].to_numpy(dtype=float), start + 1e-6)
    rate = rows["bytes"].to_numpy(dtype=float) / (stop - start)
    lo = np.floor(start.min() / dt) * dt
    edges = np.arange(lo, stop.max() + dt, dt)
    return _frame(
        {"time": edges[:-1], "bandwidth": spread(edges, start, stop, rate) / dt},
        ("time", "bandwidth"),
    )


def spread(edges: np.ndarray, start: np.ndarray, stop: np.ndarray, rate: np.ndarray) -> Any:
    """Per bin of ``edges``: the sum over intervals of ``rate`` x the time the interval
    [start, stop] overlaps the bin (the partial first and last bins added with
    ``np.bincount``, the bins covered whole from cumulative sums of rates)."""
    n = len(edges) - 1
    moved = np.zeros(max(n, 0))
    if n <= 0 or not len(start):
        return moved
    a = np.clip(start, edges[0], edges[-1])
    b = np.clip(stop, edges[0], edges[-1])
    keep = b > a
    a, b, r = a[keep], b[keep], rate[keep]
    i = np.clip(np.searchsorted(edges, a, side="right") - 1, 0, n - 1)
    j = np.clip(np.searchsorted(edges, b, side="left") - 1, 0, n - 1)  # last bin touched
    same = i == j
    moved += np.bincount(i[same], (b[same] - a[same]) * r[same], minlength=n)
    i, j, a, b, r = i[~same], j[~same], a[~same], b[~same], r[~same]
    moved += np.bincount(i, (edges[i + 1] - a) * r, minlength=n)
    moved += np.bincount(j, (b - edges[j]) * r, minlength=n)
    covered = np.cumsum(np.bincount(i + 1, minlength=n + 1) - np.bincount(j, minlength=n + 1))
    rates = np.cumsum(np.bincount(i + 1, r, minlength=n + 1) - np.bincount(j, r, minlength=n + 1))
    moved += np.where(covered[:n] > 0, rates[:n], 0.0) * np.diff(edges)
    return moved
