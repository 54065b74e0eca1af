"""Cursors: readers of a run's tables that return only the rows after a cursor.

Every sink that follows a run while it is recorded (the comm publisher, live views) reads
it through one :class:`Cursors`; the recording that makes the run makes its cursors, so no
sink needs to know which collectors stand behind a run. Live readers copy only the new
rows (numpy copies under the collector's lock, no key decoding); frozen readers slice a
finished :class:`~daskprofile.run.Run`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import hooks
from ..collectors.tasks import UUID_FLAG
from ..run import Run

log = logging.getLogger("daskprofile")

__all__ = [
    "Cursors",
    "Read",
    "Reader",
    "StackReader",
    "frozen_cursors",
    "frozen_table",
    "live_table",
    "live_tasks",
]


@dataclass
class Read:
    """Rows ``first .. cursor-1`` of one table: arrays plus lookups (``groups``, ``workers``)."""

    cols: dict[str, Any]
    first: int
    cursor: int

    @property
    def n(self) -> int:
        return self.cursor - self.first


Reader = Callable[[int], Read]
#: ``stacks(t_from) -> [(t_start, t_end, {group: tree})]`` in perf_counter seconds
StackReader = Callable[[float | None], list[tuple[float, float, dict[str, Any]]]]


@dataclass
class Cursors:
    """Where a run's records are read from, incrementally: what every sink reads.

    A :class:`~daskprofile.record.recording.Recording` makes them with its run; a finished
    run gets frozen ones (:func:`frozen_cursors`).
    """

    tasks: Reader | None = None
    cache: Reader | None = None
    resources: Reader | None = None
    stacks: StackReader | None = None
    totals: Callable[[], Mapping[str, int]] | None = None
    #: ``keys(rows) -> key labels`` of absolute rows of a live task table ("" if not kept)
    keys: Callable[[list[int]], list[str]] | None = None
    #: ``processes() -> {label: reader}``: resources of each worker process of a cluster
    processes: Callable[[], Mapping[str, Reader]] | None = None
    #: called (from any thread, cheaply) when a source that is not polled - a cluster - has
    #: new task rows: a sink may read sooner than its next poll (see :meth:`arrived`)
    listeners: list[Callable[[], None]] = field(default_factory=list)

    def arrived(self) -> None:
        """New rows came in: tell the listeners (a failing one is skipped)."""
        for listener in list(self.listeners):
            try:
                listener()
            except Exception:  # a sink's hint never fails the source
                log.exception("daskprofile: a cursor listener failed")


# ---------------------------------------------------------------- live readers


def live_tasks(collector: Any) -> Reader:
    """New task rows of a :class:`~daskprofile.collectors.tasks.TaskCollector` (no keys)."""
    name_groups = np.zeros(0, np.int64)

    def read(cursor: int) -> Read:
        nonlocal name_groups
        hooks.flush()  # rows of running computes not handed to the collector yet
        columns = collector.columns
        with collector.lock:
            rows, new_cursor = columns.since_locked(cursor)
            first = max(cursor, columns.first)
            if len(name_groups) < len(collector.names):
                name_groups = np.array([g for _, g in collector.names], np.int64)
            groups = list(collector.groups)
            workers = [label for _, _, label in collector.workers]
        start = rows["start"]
        cols = {
            "group": name_groups[(rows["name"] & ~np.uint32(UUID_FLAG)).astype(np.int64)],
            "worker": rows["worker"],
            "status": (rows["error"] != 0).astype(np.uint8),
            "submit": start - rows["wait"],
            "start": start,
            "stop": start + rows["duration"],
            "groups": groups,
            "workers": workers,
        }
        return Read(cols, min(first, new_cursor), new_cursor)

    return read


def live_table(since: Callable[[int], tuple[dict[str, Any], int]], start: int = 0) -> Reader:
    """Rows of a collector with ``since(cursor) -> (columns, new_cursor)`` (cache, resources).

    ``start`` is the cursor where this run's rows begin (a shared, longer-lived sampler).
    """

    def read(cursor: int) -> Read:
        cols, new_cursor = since(max(cursor, start))
        n = len(next((v for v in cols.values() if isinstance(v, np.ndarray)), ()))
        return Read(dict(cols), new_cursor - n, new_cursor)

    return read


# ---------------------------------------------------------------- frozen readers


def frozen_table(table: Mapping[str, Any], names: tuple[str, ...]) -> Reader:
    """Rows of a finished run's raw table (``dropped`` oldest rows are not there)."""
    dropped = int(table.get("dropped", 0) or 0)
    arrays = {name: np.asarray(table[name]) for name in names}
    lookups = {k: list(table[k]) for k in ("groups", "workers") if k in table}
    total = dropped + len(arrays[names[0]])

    def read(cursor: int) -> Read:
        lo = max(cursor, dropped) - dropped
        cols: dict[str, Any] = {k: v[lo:] for k, v in arrays.items()}
        cols.update(lookups)
        return Read(cols, min(lo + dropped, total), total)

    return read


def frozen_cursors(run: Run) -> Cursors:
    """Readers over a finished run."""
    tasks = dict(run.raw("tasks", keys=False))
    tasks["status"] = (np.asarray(tasks["error"]) != 0).astype(np.uint8)
    t0 = run.t0
    history = [(a + t0, b + t0, trees) for a, b, trees in run.stack_history]
    return Cursors(
        tasks=frozen_table(tasks, ("group", "worker", "status", "submit", "start", "stop")),
        cache=frozen_table(run.raw("cache"), ("time", "group", "metric")),
        resources=frozen_table(run.raw("resources"), ("time", "cpu", "memory", "processes")),
        stacks=lambda t_from: [h for h in history if t_from is None or h[0] >= t_from],
        processes=_frozen_processes(run),
    )


def _frozen_processes(run: Run) -> Callable[[], Mapping[str, Reader]] | None:
    """Readers of a finished cluster run's worker processes (``run.meta.distributed``)."""
    described = run.meta.distributed
    processes = described.get("processes") if isinstance(described, Mapping) else None
    if not processes:
        return None
    readers: dict[str, Reader] = {}
    for proc in processes:
        table = {
            "time": np.asarray(proc["time"], np.float64) + run.t0,
            "cpu": np.asarray(proc["cpu"], np.float64),
            "memory": np.asarray(proc["memory"], np.float64),
            "processes": np.ones(len(proc["time"]), np.uint16),
        }
        label = ", ".join(proc.get("workers") or ()) or f"pid {proc.get('pid')}"
        readers[label] = frozen_table(table, ("time", "cpu", "memory", "processes"))
    return lambda: readers
