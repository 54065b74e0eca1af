"""Scheduler cache occupancy: one series per task group, not one line per task.

When a task's result enters dask's cache its group's occupancy rises by ``metric(result)``
(1 by default: a count); when dask releases a result its group's occupancy falls. dask
releases a result when the last of its dependents has finished, unless the compute returns
it; the collector counts dependents down the same way, so it needs no per-task call from the
scheduler: with the default metric it takes task events in batches (O(dependencies) per
task, where dask's CacheProfiler scans every cached key after every task; a task the hook
saw given no results costs no lookup in dask's state at all). A row ``(time,
group, metric)`` is written per group whose occupancy changed, so a chart draws one line
per group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
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
    """What one compute holds in dask's cache: its occupancy per group, the metric of each
    result held (a ``metric=`` function only), and dependents still to finish of results
    with several.

    No entry per result is needed otherwise: every dependency of a task that finished has
    finished itself, so a dependency's group is found again from its name when its last
    dependent finishes.
    """

    __slots__ = ("held", "remaining", "values")

    def __init__(self, metric: bool) -> None:
        self.held: dict[int, float] = {}  # group id -> what this compute holds in the cache
        self.values: dict[Hashable, float] | None = {} if metric else None  # key -> metric
        self.remaining: dict[Hashable, int] = {}  # key -> dependents not finished yet (> 0)


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
        self._computes[compute.id] = _Cached(self.metric is not None)

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        cached = self._computes.get(compute.id)
        if cached is None:
            return
        find, occ = self._names.get, self.occupancy
        has_deps = (compute.state.get("dependencies") or {}).get
        rows: _Rows = ([], [], [])
        when_col, group_col, level_col = rows
        with self.lock:  # nothing else changes the occupancy meanwhile
            before = occ.copy()
            for key, stop, error, deps in zip(
                batch.key, batch.stop, batch.error, batch.deps, strict=True
            ):
                if error is not None:
                    continue
                gid = find(key[0] if type(key) is tuple and key else key)
                if gid is None:
                    gid = self._new_group(key, compute)
                if deps if deps is not None else has_deps(key):
                    # results it depends on may be released now
                    self._apply(stop, self._released(compute, cached, key, gid, 1.0), rows, None)
                    continue
                level = occ[gid] + 1.0
                occ[gid] = level
                when_col.append(stop)
                group_col.append(gid)
                level_col.append(level)
            held = cached.held  # what the batch changed is now held by this compute
            for gid in set(group_col):
                change = occ[gid] - (before[gid] if gid < len(before) else 0.0)
                held[gid] = held.get(gid, 0.0) + change
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
        key = event.key
        rows: _Rows = ([], [], [])
        with self.lock:  # new groups get their occupancy slot under the lock
            gid = self._names.get(key[0] if type(key) is tuple and key else key)
            if gid is None:
                gid = self._new_group(key, compute)
            if cached.values is not None:
                cached.values[key] = value
            changes = self._released(compute, cached, key, gid, value)
            self._apply(event.stop, changes, rows, cached.held)
            self._append(rows)

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
        released = self._last_dependent_of(state["dependents"], cached.remaining, deps)
        outputs = compute.outputs
        if outputs and not outputs.isdisjoint(released):
            released = [dep for dep in released if dep not in outputs]  # dask keeps those
        values = cached.values
        if values is not None:
            for dep in released:
                dep_gid = self._gid_of(dep)
                changes[dep_gid] = changes.get(dep_gid, 0.0) - values.pop(dep, 0.0)
            return changes
        # one group lookup per name, not per result: a task's dependencies share few names
        for name, n in Counter([d[0] if type(d) is tuple and d else d for d in released]).items():
            dep_gid = self._gid_of(name)
            changes[dep_gid] = changes.get(dep_gid, 0.0) - n
        return changes

    @staticmethod
    def _last_dependent_of(
        dependents: dict[Hashable, Any], remaining: dict[Hashable, int], deps: Any
    ) -> Any:
        """The dependencies in ``deps`` whose last dependent to finish this is (dask
        releases them now): counted down in ``remaining`` for those with several."""
        try:
            counts = list(map(len, map(dependents.__getitem__, deps)))
        except (KeyError, TypeError):  # not in dask's state: no dependent counted
            counts = [len(dependents.get(dep, ())) for dep in deps]
        if counts.count(1) == len(counts):
            return deps  # the usual case: each had this task as its only dependent
        released = []
        for dep, n in zip(deps, counts, strict=True):
            if n > 1:  # not its last dependent, unless the others have finished
                left = remaining.get(dep, n) - 1
                if left:
                    remaining[dep] = left
                    continue
                del remaining[dep]
            released.append(dep)
        return released

    def _gid_of(self, key: Hashable) -> int:
        """Group id of a key (or key name) whose group is known, as every dependency has
        finished: a string key is found again from its name's stem."""
        gid = self._names.get(key[0] if type(key) is tuple and key else key)
        return self.index.index(key) if gid is None else gid

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        cached = self._computes.pop(compute.id, None)
        if cached is None:
            return
        changes = {gid: -level for gid, level in cached.held.items() if level}
        if not changes:
            return
        rows: _Rows = ([], [], [])
        with self.lock:  # what dask drops at the end: the outputs it returned
            self._apply(perf_counter(), changes, rows, None)
            self._append(rows)

    def _apply(
        self, when: float, changes: dict[int, float], rows: _Rows, held: dict[int, float] | None
    ) -> None:
        """Apply one task's changes per group at ``when`` (to the compute's ``held`` too):
        rows for the non-zero ones."""
        occ = self.occupancy
        for gid, delta in changes.items():
            if delta == 0.0:
                continue  # a result replaced another of its group: nothing to draw
            occ[gid] += delta
            if held is not None:
                held[gid] = held.get(gid, 0.0) + delta
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

    def add_rows(
        self, time: Sequence[float], groups: Sequence[str], level: Sequence[float]
    ) -> None:
        """Append occupancy rows measured elsewhere (a cluster's bytes held per group):
        ``perf_counter`` times, group names and each group's level after the change."""
        if not len(time):
            return
        gids = [self.index.group_id(g) for g in groups]
        with self.lock:
            occ = self.occupancy
            for gid, value in zip(gids, level, strict=True):
                while gid >= len(occ):
                    occ.append(0.0)
                occ[gid] = float(value)
            self._append((list(time), gids, [float(v) for v in level]))

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
