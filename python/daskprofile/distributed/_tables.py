"""Client-side tables for cluster data, and merging them with the local collectors' tables.

The raw table formats are the ones :class:`daskprofile.run.Run` reads (``Run.raw``):
tasks and cache hold ids into lookup lists (``groups``, ``workers``, ``error_types``);
times are ``perf_counter`` seconds of the kernel.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..collectors.base import _DTYPES, Columns

TASK_SPEC = {
    "submit": "d",
    "start": "d",
    "stop": "d",
    "group": "I",
    "worker": "H",
    "error": "H",
    "compute": "I",
}
CACHE_SPEC = {"time": "d", "group": "I", "metric": "d"}
RESOURCE_SPEC = {"time": "d", "cpu": "d", "memory": "Q", "processes": "I"}


class Lookup:
    """An append-only list of names with their ids (thread-safe appends)."""

    def __init__(self, first: Sequence[Any] = ()) -> None:
        self.names: list[Any] = list(first)
        self._ids = {name: i for i, name in enumerate(self.names)}
        self._lock = threading.Lock()

    def id(self, name: Any) -> int:
        """Id of ``name``, added if new."""
        i = self._ids.get(name)
        if i is None:
            with self._lock:
                i = self._ids.get(name)
                if i is None:
                    i = self._ids[name] = len(self.names)
                    self.names.append(name)
        return i

    def extend(self, names: Sequence[Any]) -> None:
        """Append ``names`` in order (ids follow the sender's numbering)."""
        for name in names:
            with self._lock:
                self._ids.setdefault(name, len(self.names))
                self.names.append(name)

    def copy(self) -> list[Any]:
        return list(self.names)


class TaskTable:
    """Task rows from the scheduler, decoded like ``TaskCollector.snapshot()``."""

    def __init__(self, max_records: int | None, groups: Lookup) -> None:
        self.columns = Columns(TASK_SPEC, max_records)
        self.columns.on_drop = self._on_drop
        self.keys: list[str] = []
        self.groups = groups
        self.workers = Lookup()
        self.error_types = Lookup([None])

        # distributed adds a noisy clock correction to workers' times; workers on this
        # host send it per task and it is taken off again (rows may come first or last)
        self._corrections: dict[str, float] = {}
        self._awaiting: dict[str, int] = {}  # key -> absolute row index

    def _on_drop(self, k: int) -> None:
        del self.keys[:k]

    def correct(self, delays: Sequence[Sequence[Any]]) -> None:
        """Take distributed's clock correction ``delay`` off the rows of these keys."""
        with self.columns.lock:
            for key, delay in delays:
                row = self._awaiting.pop(key, None)
                if row is None:
                    _remember(self._corrections, key, float(delay))
                else:
                    self._shift(row, -float(delay))

    def _shift(self, row: int, delta: float) -> None:
        i = row - self.columns.first
        if i < 0:
            return
        cols = self.columns.cols
        cols["start"][i] += delta
        cols["stop"][i] += delta

    def extend(self, rows: dict[str, list[Any]], to_perf: float, corrected: bool = False) -> None:
        """Append a batch; ``to_perf`` turns the scheduler's clock into ``perf_counter``;
        ``corrected``: distributed's clock correction was taken off already (rows the
        workers made)."""
        n = len(rows["key"])
        if not n:
            return
        errors = [0 if e is None else self.error_types.id(e) for e in rows["error"]]
        cols = self.columns.cols
        with self.columns.lock:
            for name in ("submit", "start", "stop"):
                cols[name].extend([t + to_perf for t in rows[name]])
            cols["group"].extend(rows["group"])
            cols["worker"].extend(rows["worker"])
            cols["error"].extend(errors)
            cols["compute"].extend(rows["compute"])
            self.keys.extend(rows["key"])
            first = self.columns.n
            for _ in range(n):
                self.columns.commit()
            if not corrected:
                self._apply_known(rows["key"], first)

    def _apply_known(self, keys: list[str], first: int) -> None:
        """Correct the new rows whose correction came first; await the others."""
        corrections, awaiting = self._corrections, self._awaiting
        for offset, key in enumerate(keys):
            delay = corrections.pop(key, None)
            if delay is None:
                _remember(awaiting, key, first + offset)
            else:
                self._shift(first + offset, -delay)

    def snapshot(self) -> dict[str, Any]:
        """All kept rows: the ``tasks`` table of a Run."""
        with self.columns.lock:
            n = len(self.columns)
            rows = {name: _copy(col, n) for name, col in self.columns.cols.items()}
            keys = self.keys[:n]
            dropped = self.columns.dropped
        return {
            "key": keys,
            **rows,
            "dropped": dropped,
            "groups": self.groups.copy(),
            "workers": self.workers.copy(),
            "error_types": self.error_types.copy(),
        }


def _remember(table: dict[str, Any], key: str, value: Any, cap: int = 200_000) -> None:
    """``table[key] = value``, forgetting the oldest entries beyond ``cap``."""
    table[key] = value
    if len(table) > cap:
        for old in list(table)[: cap // 4]:
            del table[old]


class CacheTable:
    """Bytes held in workers' memory per task group, one row per group change."""

    def __init__(self, max_records: int | None, groups: Lookup) -> None:
        self.columns = Columns(CACHE_SPEC, max_records)
        self.groups = groups

    def extend(self, rows: dict[str, list[Any]], to_perf: float) -> None:
        n = len(rows["time"])
        cols = self.columns.cols
        with self.columns.lock:
            cols["time"].extend([t + to_perf for t in rows["time"]])
            cols["group"].extend(rows["group"])
            cols["metric"].extend([float(m) for m in rows["metric"]])
            for _ in range(n):
                self.columns.commit()

    def snapshot(self) -> dict[str, Any]:
        rows = self.columns.snapshot()
        return {**rows, "groups": self.groups.copy(), "dropped": self.columns.dropped}


class ProcessResources:
    """Resource samples of one worker process (CPU % and RSS of it and its children).

    ``hold``: seconds each sample stands for in the cluster's totals (None: the default of
    :func:`cluster_totals`); longer for sparse series, e.g. the scheduler's heartbeats of
    workers without daskprofile, which come every 0.5 s to several seconds.
    """

    def __init__(
        self, pid: int, host: str, max_records: int | None, hold: float | None = None
    ) -> None:
        self.pid = pid
        self.host = host
        self.workers: list[str] = []
        self.columns = Columns(RESOURCE_SPEC, max_records)
        self.hold = hold

    def extend(self, rows: dict[str, list[Any]], to_perf: float) -> None:
        n = len(rows["time"])
        cols = self.columns.cols
        with self.columns.lock:
            cols["time"].extend([t + to_perf for t in rows["time"]])
            cols["cpu"].extend([float(c) for c in rows["cpu"]])
            cols["memory"].extend([max(0, int(m)) for m in rows["memory"]])
            cols["processes"].extend([int(p) for p in rows["processes"]])
            for _ in range(n):
                self.columns.commit()

    def last(self) -> float:
        """The time of the newest sample (-inf: none)."""
        with self.columns.lock:
            times = self.columns.cols["time"]
            return float(times[-1]) if len(times) else -math.inf

    def snapshot(self) -> dict[str, np.ndarray]:
        """The samples; with a ``hold``, a ``hold`` column too (read by cluster_totals)."""
        rows: dict[str, np.ndarray] = self.columns.snapshot()
        if self.hold is not None:
            rows["hold"] = np.full(len(rows["time"]), float(self.hold))
        return rows


#: seconds a process's samples may lag the newest before live totals stop waiting for it
LATE_REPORT = 5.0


def cluster_totals(
    series: Sequence[dict[str, np.ndarray]],
    dt: float,
    origin: float | None = None,
    complete: bool = False,
) -> dict[str, np.ndarray]:
    """Sum of per-process series on a common grid of step ``dt`` (the ``resources`` table).

    At each grid time a process contributes its latest sample, if it is at most
    ``max(5 dt, 1 s)`` old (a busy worker's sampler thread can be late), or its ``hold``
    column's seconds for a series that has one; ``processes`` sums the processes counted by
    each contributing sample. The grid starts at ``origin`` (or the first sample); with
    ``complete`` it ends where every process still reporting has reported (what a live
    reader may send: those rows no longer change). A process still reports if its last
    sample is at most its hold, or :data:`LATE_REPORT` seconds, older than the newest: a
    worker's batches come every half second, later under load.
    """
    series = [s for s in series if len(s["time"])]
    if not series:
        return _empty_resources()
    default = max(5 * dt, 1.0)
    holds = [s["hold"] if "hold" in s else np.full(len(s["time"]), default) for s in series]
    first = min(float(s["time"][0]) for s in series)
    lo = first if origin is None else origin + np.ceil((first - origin) / dt) * dt
    lasts = [float(s["time"][-1]) for s in series]
    hi = max(lasts)
    if complete:
        wait = [max(float(h[-1]), LATE_REPORT) for h in holds]
        hi = min(t for t, w in zip(lasts, wait, strict=True) if t >= hi - w)
    grid = np.arange(lo, hi + dt / 2, dt)
    cpu = np.zeros(len(grid))
    memory = np.zeros(len(grid), np.int64)
    processes = np.zeros(len(grid), np.int32)
    for s, hold in zip(series, holds, strict=True):
        t = s["time"]
        idx = np.searchsorted(t, grid + dt * 1e-6, side="right") - 1
        ok = idx >= 0
        ok[ok] &= grid[ok] - t[idx[ok]] <= hold[idx[ok]]
        cpu[ok] += s["cpu"][idx[ok]]
        memory[ok] += s["memory"][idx[ok]].astype(np.int64)
        processes[ok] += s["processes"][idx[ok]].astype(np.int32)
    return {"time": grid, "cpu": cpu, "memory": memory, "processes": processes}


def _empty_resources() -> dict[str, np.ndarray]:
    return {
        "time": np.empty(0),
        "cpu": np.empty(0),
        "memory": np.empty(0, np.int64),
        "processes": np.empty(0, np.int32),
    }


def _copy(col: array[Any], n: int) -> np.ndarray:
    dtype = _DTYPES[col.typecode]
    if not n:
        return np.empty(0, dtype)
    out: np.ndarray = np.frombuffer(col, dtype=dtype, count=n).copy()
    return out
