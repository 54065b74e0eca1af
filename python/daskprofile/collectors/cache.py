"""Scheduler cache occupancy: one series per task group, not one line per task.

When a task's result enters dask's cache its group's occupancy rises by ``metric(result)``
(1 by default: a count); when dask releases a result its group's occupancy falls. Releases
are found among the finished task's dependencies only (O(dependencies) per task, where
dask's CacheProfiler scans every cached key after every task). A row ``(time, group,
metric)`` is written per group whose occupancy changed, so a chart draws one line per group.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from time import perf_counter
from typing import Any

from ..hooks import Compute, TaskEvent
from ..keys import GroupIndex
from .base import Collector, Columns

#: ``time`` is float32 seconds since the collector started (~0.1 ms resolution over an hour)
SPEC = {"time": "f", "group": "I", "metric": "d"}


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
        self._live: dict[int, dict[Hashable, tuple[int, float]]] = {}
        self._cols = self.columns.cols

    @property
    def groups(self) -> list[str]:
        """Group names; ``group`` ids index this list."""
        return self.index.groups

    def on_compute_start(self, compute: Compute) -> None:
        self.columns.repair()
        self._live[compute.id] = {}

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        if event.error is not None:
            return
        key = event.key
        live = self._live.get(compute.id)
        if live is None:
            return
        gid = self._names.get(key[0] if type(key) is tuple else key)
        if gid is None:
            gid = self.index.index(key, compute.dsk.get(key))
        value = 1.0 if self.metric is None else float(self.metric(result))
        live[key] = (gid, value)
        changes: dict[int, float] | None = None
        released = state["released"]
        for dep in state["dependencies"][key]:
            if dep in released:
                entry = live.pop(dep, None)
                if entry is not None:
                    if changes is None:
                        changes = {gid: value}
                    changes[entry[0]] = changes.get(entry[0], 0.0) - entry[1]
        self._write(changes if changes is not None else {gid: value})

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        live = self._live.pop(compute.id, None)
        if not live:
            return
        changes: dict[int, float] = {}
        for gid, value in live.values():
            changes[gid] = changes.get(gid, 0.0) - value
        self._write(changes)

    def _write(self, changes: dict[int, float]) -> None:
        now = perf_counter() - self.t0
        c = self._cols
        with self.lock:
            occ = self.occupancy
            for gid, delta in changes.items():
                if delta == 0.0:
                    continue  # a result replaced another of its group: no change to draw
                while gid >= len(occ):
                    occ.append(0.0)
                occ[gid] += delta
                c["time"].append(now)
                c["group"].append(gid)
                c["metric"].append(occ[gid])
                self.columns.commit()

    def since(self, cursor: int = 0) -> tuple[dict[str, Any], int]:
        """Rows after absolute index ``cursor``: ``time`` (perf_counter s), ``group`` ids,
        ``metric`` (the group's occupancy after the change), plus ``groups``, ``dropped``."""
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
