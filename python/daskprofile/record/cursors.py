"""Cursors: readers of a run's tables that return only the rows after a cursor.

Every sink that follows a run while it is recorded (the comm publisher, live views) reads
it through one :class:`Cursors`; the recording that makes the run makes its cursors, so no
sink needs to know which collectors stand behind a run. Live readers copy only the new
rows (numpy copies under the collector's lock, no key decoding); frozen readers slice a
finished :class:`~daskprofile.run.Run`.

A cluster's tables (actions, transfers, memory) live in one log per cluster source, shared
by the runs that overlap in time; a run's table is the log's rows of its time window.
:func:`live_window` reads it incrementally: it remembers where in the log the run's rows
had got to (marks), so a poll copies only the log's new rows. The rows come as
:func:`action_rows`, :func:`transfer_rows` and :func:`memory_rows` make them, live or
frozen alike.
"""

from __future__ import annotations

import logging
import math
import threading
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import cluster_tables, hooks
from ..collectors.tasks import UUID_FLAG
from ..run import Run

log = logging.getLogger("daskprofile")

__all__ = [
    "Cursors",
    "Read",
    "Reader",
    "StackReader",
    "action_rows",
    "frozen_cursors",
    "frozen_table",
    "live_exceptions",
    "live_grid",
    "live_members",
    "live_table",
    "live_tasks",
    "live_window",
    "memory_rows",
    "transfer_rows",
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
#: ``members() -> (version, raw workers table)``: the version changes with the table
MembersReader = Callable[[], tuple[Any, Mapping[str, Any]]]
#: ``rows(raw, index) -> columns``: rows ``index`` of a raw cluster table as a Read's
RowPicker = Callable[[dict[str, Any], np.ndarray], dict[str, Any]]

#: columns of the exceptions table a reader gives (those the protocol sends)
EXCEPTION_COLUMNS = ("key", "group", "worker", "time", "type", "message", "traceback")
#: seconds around a run's window within which a cluster log's rows still belong to it
WINDOW_SLACK = 1e-3
#: rows between two kept marks of a :func:`live_window` (the newest one is always kept)
MARK_ROWS = 4096


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
    #: a cluster's actions, transfers and memory samples in the run's window (all workers;
    #: see :func:`action_rows`, :func:`transfer_rows`, :func:`memory_rows`)
    actions: Reader | None = None
    transfers: Reader | None = None
    memory: Reader | None = None
    #: the cluster's workers in the run's window (the raw ``workers`` table)
    members: MembersReader | None = None
    #: tasks that raised (every run that records tasks)
    exceptions: Reader | None = None
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
            spans = list(collector.spans) if len(collector.spans) > 1 else None
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
        if spans is not None:  # ids into ``spans`` (name tuples; 0: no span)
            cols["span"], cols["spans"] = rows["span"], spans
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


def live_grid(totals: Callable[[], Mapping[str, Any]], t0: float, dt: float) -> Reader:
    """Rows of a table on a time grid of step ``dt`` from ``t0`` (a cluster's summed
    resources), ``totals()`` giving the rows known now.

    The cursor counts grid steps from ``t0``, not rows: where the rows begin can move (a
    process whose first samples arrive late began earlier) and where they end can move
    back (rows wait again for a late process), and a row once read is never read again.
    """

    def read(cursor: int) -> Read:
        cols = {k: np.asarray(v) for k, v in totals().items()}
        times = cols["time"]
        first = round((float(times[0]) - t0) / dt) if len(times) else cursor
        skip = max(0, cursor - first)
        if skip >= len(times):
            return Read({k: v[:0] for k, v in cols.items()}, cursor, cursor)
        return Read({k: v[skip:] for k, v in cols.items()}, first + skip, first + len(times))

    return read


def live_window(
    since: Callable[[int], tuple[dict[str, Any], int]],
    time_column: str,
    rows: RowPicker,
    *,
    t0: float,
    t1: Callable[[], float | None],
    start: int = 0,
) -> Reader:
    """A run's rows of a shared log (a cluster's table): those whose ``time_column`` lies
    in the run's window (``t0`` to ``t1()``; None: still open), numbered from 0 in log
    order, as the run's table will be once frozen.

    ``since(log_cursor) -> (raw rows, next log cursor)`` reads the log from ``start`` on;
    ``rows`` picks a Read's columns. Marks of ``(run rows, log cursor)`` say where the run's
    rows had got to, so reading from the newest cursor copies only the log's new rows.
    """
    marks: list[tuple[int, int]] = [(0, start)]
    lock = threading.Lock()

    def read(cursor: int) -> Read:
        with lock:
            row, at = marks[bisect_right(marks, (cursor, math.inf)) - 1]
        raw, end = since(at)
        time = np.asarray(raw[time_column])
        keep = time >= t0 - WINDOW_SLACK
        stop = t1()
        if stop is not None:
            keep &= time <= stop + WINDOW_SLACK
        index = np.flatnonzero(keep)
        total = row + len(index)
        with lock:
            _mark(marks, total, end)
        skip = min(max(cursor - row, 0), len(index))
        new_cursor = max(total, cursor)
        return Read(rows(raw, index[skip:]), new_cursor - (len(index) - skip), new_cursor)

    return read


def _mark(marks: list[tuple[int, int]], rows: int, at: int) -> None:
    """Remember that the run's first ``rows`` rows end before log row ``at``; keep a mark
    every :data:`MARK_ROWS` rows and the newest one."""
    if at <= marks[-1][1]:
        return
    if len(marks) > 1 and rows - marks[-2][0] < MARK_ROWS:
        marks[-1] = (rows, at)
    else:
        marks.append((rows, at))


def action_rows(raw: dict[str, Any], index: np.ndarray) -> dict[str, Any]:
    """Rows ``index`` of a raw ``actions`` table: ``start``/``stop`` (perf_counter s),
    ``action`` (ids of ``actions``), ``worker`` (ids of ``workers``: addresses), ``bytes``
    (-1: not known), ``group`` (ids of ``groups``) and ``key`` (labels)."""
    cols: dict[str, Any] = {
        name: np.asarray(raw[name])[index] for name in ("start", "stop", "action", "worker")
    }
    cols["bytes"] = np.asarray(raw["bytes"])[index]
    cols["group"] = cluster_tables.key_groups(raw)[index] if len(index) else index
    cols["key"] = _objects(cluster_tables.key_labels(raw, index) if len(index) else [])
    cols.update({k: raw[k] for k in ("groups", "workers", "actions")})
    return cols


def _objects(values: list[Any]) -> np.ndarray:
    """``values`` as a 1-d object array (sliced with the other columns of a Read)."""
    out = np.empty(len(values), object)
    out[:] = values
    return out


def transfer_rows(raw: dict[str, Any], index: np.ndarray) -> dict[str, Any]:
    """Rows ``index`` of a raw ``transfers`` table: ``start``/``stop``, ``source`` and
    ``destination`` (ids of ``workers``), ``bytes``, ``direction`` (0: incoming) and
    ``type`` (ids of ``types``: the type of the data moved)."""
    names = ("start", "stop", "source", "destination", "bytes", "direction", "type")
    cols: dict[str, Any] = {name: np.asarray(raw[name])[index] for name in names}
    cols["workers"], cols["types"] = raw["workers"], raw.get("types") or []
    return cols


def memory_rows(raw: dict[str, Any], index: np.ndarray) -> dict[str, Any]:
    """Rows ``index`` of a raw ``memory`` table: ``time``, ``worker`` (ids of ``workers``),
    ``process``, ``managed``, ``spilled`` (bytes); ``limits`` per worker id."""
    names = ("time", "worker", "process", "managed", "spilled")
    cols: dict[str, Any] = {name: np.asarray(raw[name])[index] for name in names}
    cols["workers"], cols["limits"] = raw["workers"], raw["limits"]
    return cols


def live_exceptions(table: Any) -> Reader:
    """New rows of an :class:`~daskprofile.collectors.exceptions.ExceptionTable` (its
    first rows are kept, later ones only counted: a row's index never changes)."""

    def read(cursor: int) -> Read:
        with table.lock:
            rows = table.table
            lo = min(cursor, len(rows["key"]))
            part = {name: rows[name][lo:] for name in EXCEPTION_COLUMNS}
            dropped = rows["dropped"]
        return _exception_read(part, lo, dropped)

    return read


def _exception_read(part: Mapping[str, list[Any]], lo: int, dropped: int) -> Read:
    """Rows of an exceptions table from ``lo`` on, as arrays (texts as objects)."""
    cols: dict[str, Any] = {}
    for name in EXCEPTION_COLUMNS:
        values = part[name]
        if name == "time":
            cols[name] = np.asarray(values, np.float64)
        else:
            cols[name] = _objects(values)
    cols["dropped"] = int(dropped or 0)
    return Read(cols, lo, lo + len(part["key"]))


def live_members(version: Callable[[], Any], table: Callable[[], Mapping[str, Any]]) -> Any:
    """``members()`` from a changing table: rebuilt only when ``version()`` changes."""
    last: list[Any] = [object(), None]

    def members() -> tuple[Any, Mapping[str, Any]]:
        now = version()
        if now != last[0]:
            last[:] = [now, table()]
        return last[0], last[1]

    return members


# ---------------------------------------------------------------- frozen readers


def frozen_table(table: Mapping[str, Any], names: tuple[str, ...]) -> Reader:
    """Rows of a finished run's raw table (``dropped`` oldest rows are not there)."""
    dropped = int(table.get("dropped", 0) or 0)
    arrays = {name: np.asarray(table[name]) for name in names}
    lookups = {k: list(table[k]) for k in ("groups", "workers", "spans") if k in table}
    total = dropped + len(arrays[names[0]])

    def read(cursor: int) -> Read:
        lo = max(cursor, dropped) - dropped
        cols: dict[str, Any] = {k: v[lo:] for k, v in arrays.items()}
        cols.update(lookups)
        return Read(cols, min(lo + dropped, total), total)

    return read


def frozen_rows(table: dict[str, Any], time_column: str, rows: RowPicker) -> Reader:
    """Rows of a finished run's raw cluster table, picked by ``rows``."""
    dropped = int(table.get("dropped", 0) or 0)
    total = dropped + len(table[time_column])

    def read(cursor: int) -> Read:
        lo = max(cursor, dropped) - dropped
        index = np.arange(lo, total - dropped)
        return Read(rows(table, index), min(lo + dropped, total), total)

    return read


def frozen_exceptions(table: Mapping[str, Any]) -> Reader:
    """Rows of a finished run's exceptions table."""

    def read(cursor: int) -> Read:
        lo = min(cursor, len(table["key"]))
        part = {name: list(table[name][lo:]) for name in EXCEPTION_COLUMNS}
        return _exception_read(part, lo, table.get("dropped", 0))

    return read


def frozen_cursors(run: Run) -> Cursors:
    """Readers over a finished run."""
    tasks = dict(run.raw("tasks", keys=False))
    tasks["status"] = (np.asarray(tasks["error"]) != 0).astype(np.uint8)
    if len(tasks.get("span", ())) != len(tasks["start"]):  # a run saved before spans
        tasks["span"] = np.zeros(len(tasks["start"]), np.uint16)
    t0 = run.t0
    history = [(a + t0, b + t0, trees) for a, b, trees in run.stack_history]
    members = run.raw("workers")
    first = run.dropped("tasks")
    return Cursors(
        tasks=frozen_table(tasks, ("group", "worker", "status", "submit", "start", "stop", "span")),
        cache=frozen_table(run.raw("cache"), ("time", "group", "metric")),
        resources=frozen_table(run.raw("resources"), ("time", "cpu", "memory", "processes")),
        stacks=lambda t_from: [h for h in history if t_from is None or h[0] >= t_from],
        keys=lambda rows: run.task_keys([i - first for i in rows]),
        processes=_frozen_processes(run),
        actions=frozen_rows(run.raw("actions"), "start", action_rows),
        transfers=frozen_rows(run.raw("transfers"), "start", transfer_rows),
        memory=frozen_rows(run.raw("memory"), "time", memory_rows),
        members=lambda: (0, members),
        exceptions=frozen_exceptions(run.raw("exceptions")),
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
            # numbered as the live readers numbered them (the run's first sample is not
            # the cluster's first): a feed that read them live goes on where it was
            "dropped": int(proc.get("first", 0) or 0),
        }
        label = ", ".join(proc.get("workers") or ()) or f"pid {proc.get('pid')}"
        readers[label] = frozen_table(table, ("time", "cpu", "memory", "processes"))
    return lambda: readers
