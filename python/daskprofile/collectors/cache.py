"""Scheduler cache occupancy: one series per task group, not one line per task.

When a task's result enters dask's cache its group's occupancy rises by ``metric(result)``
(1 by default: a count); when dask releases a result its group's occupancy falls. dask
releases a result when the last of its dependents has finished, unless the compute returns
it; the collector counts dependents down the same way, so it needs no per-task call from the
scheduler: with the default metric it takes task events in batches (O(dependencies) per
task, where dask's CacheProfiler scans every cached key after every task). A row ``(time,
group, metric)`` is written per group whose occupancy changed, so a chart draws one line
per group.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from time import perf_counter
from typing import Any

import numpy as np

from .. import hooks
from ..hooks import Compute, TaskBatch, TaskEvent
from ..keys import GroupIndex
from .base import Collector, Columns

#: ``time`` is float32 seconds since the collector started (~0.1 ms resolution over an hour)
SPEC = {"time": "f", "group": "I", "metric": "d"}

#: rows being written: (perf_counter times, group ids, occupancy levels)
_Rows = tuple[list[float], list[int], list[float]]


class _Cached:
    """What one compute has in dask's cache: the group of each result held, its metric
    where it is not 1 (a ``metric=`` function), and dependents still to run."""

    __slots__ = ("live", "remaining", "values")

    def __init__(self) -> None:
        self.live: dict[Hashable, int] = {}  # key -> group id
        self.values: dict[Hashable, float] = {}  # key -> metric, when not 1
        self.remaining: dict[Hashable, int] = {}  # key -> dependents not finished yet


class CacheCollector(Collector):
    """Occupancy of dask's result cache per group over time (``metric`` per result)."""

    name = "cache"

    def __init__(
        self,
        metric: Callable[[Any], float] | None = None,
        max_records: int | None = None,
        t0: float | None = None,
    ) -> None:
        super().__init__()
        self.t0 = perf_counter() if t0 is None else t0
        self.metric = metric
        self.columns = Columns(SPEC, max_records)
        self.lock = self.columns.lock
        self.index = GroupIndex()
        self._names: dict[Any, int] = self.index.names  # name -> group id (index() fills it)
        self.occupancy: list[float] = []
        self._computes: dict[int, _Cached] = {}
        self._cols = self.columns.cols

    @property
    def groups(self) -> list[str]:
        """Group names; ``group`` ids index this list."""
        return self.index.groups

    def wants(self, hook: str) -> bool:
        """Batches with the default metric; each result when ``metric`` must measure it."""
        if hook == "on_tasks":
            return self.metric is None
        if hook == "on_task":
            return self.metric is not None
        return hook in ("on_compute_start", "on_compute_end")

    def on_compute_start(self, compute: Compute) -> None:
        self.columns.repair()
        self._computes[compute.id] = _Cached()

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        cached = self._computes.get(compute.id)
        if cached is None:
            return
        find, live, occ = self._names.get, cached.live, self.occupancy
        has_deps = (compute.state.get("dependencies") or {}).get
        rows: _Rows = ([], [], [])
        when_col, group_col, level_col = rows
        with self.lock:
            for key, stop, error in zip(batch.key, batch.stop, batch.error, strict=True):
                if error is not None:
                    continue
                gid = find(key[0] if type(key) is tuple else key)
                if gid is None:
                    gid = self._new_group(key, compute)
                live[key] = gid
                if has_deps(key):  # results it depends on may be released now
                    self._apply(stop, self._released(compute, cached, key, gid, 1.0), rows)
                    continue
                level = occ[gid] + 1.0
                occ[gid] = level
                when_col.append(stop)
                group_col.append(gid)
                level_col.append(level)
            self._append(rows)

    def _new_group(self, key: Hashable, compute: Compute) -> int:
        """Group id of a key whose name is not interned yet; room for its occupancy
        (call under ``lock``)."""
        gid = self.index.index(key, compute.dsk.get(key))
        self.occupancy.extend([0.0] * (gid + 1 - len(self.occupancy)))
        return gid

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        cached = self._computes.get(compute.id)
        if event.error is not None or cached is None or self.metric is None:
            return
        value = float(self.metric(result))
        rows: _Rows = ([], [], [])
        with self.lock:  # new groups get their occupancy slot under the lock
            self._apply(event.stop, self._finished(compute, cached, event.key, value), rows)
            self._append(rows)

    def _finished(
        self, compute: Compute, cached: _Cached, key: Hashable, value: float
    ) -> dict[int, float]:
        """``key``'s result entered the cache: the change per group, releases included."""
        gid = self._names.get(key[0] if type(key) is tuple else key)
        if gid is None:
            gid = self._new_group(key, compute)
        cached.live[key] = gid
        if value != 1.0:
            cached.values[key] = value
        return self._released(compute, cached, key, gid, value)

    def _released(
        self, compute: Compute, cached: _Cached, key: Hashable, gid: int, value: float
    ) -> dict[int, float]:
        """The change per group once ``key`` (of group ``gid``) has finished: ``+value``
        for it, minus what dask releases now (results whose last dependent it was)."""
        changes = {gid: value}
        state = compute.state
        deps = state["dependencies"].get(key) if "dependencies" in state else None
        if not deps:
            return changes
        dependents, remaining, outputs = state["dependents"], cached.remaining, compute.outputs
        for dep in deps:
            left = remaining.pop(dep, None)
            if left is None:
                left = len(dependents.get(dep, ()))
            if left > 1:
                remaining[dep] = left - 1
            elif dep not in outputs:  # its last dependent: dask releases it now
                dep_gid = cached.live.pop(dep, None)
                if dep_gid is not None:
                    value = cached.values.pop(dep, 1.0) if cached.values else 1.0
                    changes[dep_gid] = changes.get(dep_gid, 0.0) - value
        return changes

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        cached = self._computes.pop(compute.id, None)
        if cached is None or not cached.live:
            return
        changes: dict[int, float] = {}
        values = cached.values
        for key, gid in cached.live.items():
            changes[gid] = changes.get(gid, 0.0) - (values.get(key, 1.0) if values else 1.0)
        rows: _Rows = ([], [], [])
        with self.lock:  # what dask drops at the end: the outputs it returned
            self._apply(perf_counter(), changes, rows)
            self._append(rows)

    def _apply(self, when: float, changes: dict[int, float], rows: _Rows) -> None:
        """Apply one task's changes per group at ``when``: rows for the non-zero ones."""
        occ = self.occupancy
        for gid, delta in changes.items():
            if delta == 0.0:
                continue  # a result replaced another of its group: nothing to draw
            occ[gid] += delta
            rows[0].append(when)
            rows[1].append(gid)
            rows[2].append(occ[gid])

    def _append(self, rows: _Rows) -> None:
        """Append ``(perf_counter times, groups, levels)`` to the columns (under ``lock``);
        cap them."""
        c, cols = self._cols, self.columns
        if not rows[0]:
            return
        since = np.array(rows[0], dtype=np.float64) - self.t0
        c["time"].frombytes(since.astype(np.float32).tobytes())
        c["group"].extend(rows[1])
        c["metric"].extend(rows[2])
        cols.n += len(rows[0])
        if cols.n - cols.first > cols.cap:
            cols.make_room()

    def since(self, cursor: int = 0) -> tuple[dict[str, Any], int]:
        """Rows after absolute index ``cursor``: ``time`` (perf_counter s), ``group`` ids,
        ``metric`` (the group's occupancy after the change), plus ``groups``, ``dropped``."""
        hooks.flush()  # rows of running computes not handed over yet
        with self.lock:
            rows, new_cursor = self.columns.since_locked(cursor)
            rows_out: dict[str, Any] = dict(rows)
            rows_out["time"] = rows["time"].astype("float64") + self.t0
            rows_out["groups"] = list(self.index.groups)
            rows_out["dropped"] = max(0, self.columns.first - cursor)
        return rows_out, new_cursor

    def snapshot(self) -> dict[str, Any]:
        """All kept rows (see :meth:`since`)."""
        return self.since(0)[0]
