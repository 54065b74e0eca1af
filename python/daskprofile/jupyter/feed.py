"""One run's protocol messages, read incrementally from the collectors (or a finished Run).

A :class:`Feed` keeps cursors into a run's tables and, on each :meth:`Feed.poll`, turns the
rows recorded since the previous poll into ``groups``/``workers`` (only the new ones),
``tasks``, ``cache``, ``resources``, ``stacks`` and ``progress`` messages. Readers are
small functions ``read(cursor) -> Read``; live readers copy only the new rows from the
collectors (numpy copies under the collector's lock, no key decoding), frozen readers
slice a finished :class:`~daskprofile.run.Run`. Feeds run on the publisher's thread only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import numpy as np

from .. import hooks
from ..collectors.tasks import UUID_FLAG
from ..keys import group_color
from ..run import Run
from . import encode

#: rows per columnar message when replaying or catching up
BATCH_ROWS = 65_536
#: cache occupancy is sent at most once per group per this many seconds (the last value)
CACHE_RESOLUTION = 1e-3


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
class Sources:
    """Where a run's records are read from."""

    tasks: Reader | None = None
    cache: Reader | None = None
    resources: Reader | None = None
    stacks: StackReader | None = None
    totals: Callable[[], Mapping[str, int]] | None = None
    #: ``keys(rows) -> key labels`` of absolute rows of a live task table ("" if not kept)
    keys: Callable[[list[int]], list[str]] | None = None


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


def frozen_sources(run: Run) -> Sources:
    """Readers over a finished run."""
    tasks = dict(run.raw("tasks", keys=False))
    tasks["status"] = (np.asarray(tasks["error"]) != 0).astype(np.uint8)
    t0 = run.t0
    history = [(a + t0, b + t0, trees) for a, b, trees in run.stack_history]
    return Sources(
        tasks=frozen_table(tasks, ("group", "worker", "status", "submit", "start", "stop")),
        cache=frozen_table(run.raw("cache"), ("time", "group", "metric")),
        resources=frozen_table(run.raw("resources"), ("time", "cpu", "memory", "processes")),
        stacks=lambda t_from: [h for h in history if t_from is None or h[0] >= t_from],
    )


# ---------------------------------------------------------------- the feed


@dataclass
class _Cursors:
    tasks: int = 0
    cache: int = 0
    resources: int = 0
    stacks: float | None = None  # start of the last cycle sent


@dataclass
class Feed:
    """Turns one run's records into protocol messages, incrementally."""

    run: Run
    sources: Sources
    title: str | None = None
    batch_rows: int = BATCH_ROWS
    cursors: _Cursors = field(default_factory=_Cursors)
    group_names: list[str] = field(default_factory=list)
    group_ids: dict[str, int] = field(default_factory=dict)
    worker_labels: list[str] = field(default_factory=list)
    done: dict[int, int] = field(default_factory=dict)  # group id -> tasks that succeeded
    erred: dict[int, int] = field(default_factory=dict)  # group id -> tasks that raised
    rows: int = 0  # task rows read so far
    progress_at: float = 0.0  # when the last live progress message was made

    @property
    def id(self) -> str:
        return str(self.run.meta.get("id"))

    # ------------------------------------------------------------ messages
    def start(self) -> list[encode.Message]:
        """``run_start``."""
        meta = self.run.meta
        options = meta.get("options") or {}
        return [encode.run_start(self.id, self.run.t0, meta.get("wall0", 0.0), options, self.title)]

    def end(self) -> list[encode.Message]:
        """``run_end`` of a finished run."""
        meta = self.run.meta
        summary = self.run.summary()
        return [encode.run_end(self.id, summary, meta.get("dropped", {}), meta.get("errors", []))]

    def poll(self, final: bool = False, upto: _Cursors | None = None) -> list[encode.Message]:
        """Messages for what was recorded since the last poll (``upto``: stop there)."""
        out: list[encode.Message] = []
        out += self._tasks(upto.tasks if upto else None)
        out += self._cache(upto.cache if upto else None)
        out += self._resources(upto.resources if upto else None)
        out += self._stacks(final, upto.stacks if upto else None)
        return out

    def catch_up(self) -> list[encode.Message]:
        """Everything this feed has sent so far, for a panel joining mid-run."""
        other = Feed(self.run, self.sources, self.title, self.batch_rows)
        other.group_names = list(self.group_names)
        other.group_ids = dict(self.group_ids)
        other.worker_labels = list(self.worker_labels)
        out = other.start()
        if other.group_names:
            out.append(_groups(self.id, 0, other.group_names))
        if other.worker_labels:
            out.append(
                encode.workers(self.id, range(len(other.worker_labels)), other.worker_labels)
            )
        # no stacks cycle sent yet: send none (the live feed will)
        upto = replace(self.cursors, stacks=_first_or(self.cursors.stacks, -math.inf))
        out += other.poll(upto=upto)
        out += other.progress()
        return out

    def replay(self) -> list[encode.Message]:
        """All messages of a finished run."""
        return self.start() + self.poll(final=True) + self.progress() + self.end()

    def progress(self) -> list[encode.Message]:
        """``progress`` per group (totals from the graphs when known): ``done`` counts every
        finished task, ``erred`` those of them that raised."""
        if not self.group_names:
            return []
        totals = dict(self.sources.totals()) if self.sources.totals else {}
        ids = list(range(len(self.group_names)))
        erred = [self.erred.get(i, 0) for i in ids]
        done = [self.done.get(i, 0) + e for i, e in zip(ids, erred, strict=True)]
        total = [
            max(totals.get(name, 0), d) for name, d in zip(self.group_names, done, strict=True)
        ]
        return [encode.progress(self.id, ids, total, done, erred)]

    # ------------------------------------------------------------ groups + workers
    def _group_map(self, names: list[str]) -> tuple[np.ndarray, list[encode.Message]]:
        """Protocol ids of a source's group lookup, and a ``groups`` message for new ones."""
        known = len(self.group_names)
        ids = np.empty(len(names), np.int64)
        for i, name in enumerate(names):
            gid = self.group_ids.get(name)
            if gid is None:
                gid = self.group_ids[name] = len(self.group_names)
                self.group_names.append(name)
            ids[i] = gid
        new = self.group_names[known:]
        return ids, [_groups(self.id, known, new)] if new else []

    def _new_workers(self, labels: list[str]) -> list[encode.Message]:
        known = len(self.worker_labels)
        if len(labels) <= known:
            return []
        self.worker_labels = list(labels)
        return [encode.workers(self.id, range(known, len(labels)), labels[known:])]

    # ------------------------------------------------------------ tables
    def _read(self, reader: Reader | None, cursor: int, upto: int | None) -> Read | None:
        if reader is None:
            return None
        read = reader(cursor)
        if upto is not None and read.cursor > upto:
            keep = max(0, upto - read.first)
            cols = {k: v[:keep] if isinstance(v, np.ndarray) else v for k, v in read.cols.items()}
            read = Read(cols, min(read.first, upto), max(upto, read.first))
        return read

    def _tasks(self, upto: int | None) -> list[encode.Message]:
        read = self._read(self.sources.tasks, self.cursors.tasks, upto)
        if read is None:
            return []
        self.cursors.tasks = read.cursor
        if read.n <= 0:
            return []
        ids, out = self._group_map(read.cols["groups"])
        out += self._new_workers(read.cols["workers"])
        group = ids[np.asarray(read.cols["group"], np.int64)] if len(ids) else np.zeros(read.n)
        self._count(group, np.asarray(read.cols["status"]))
        cols = {"group": group, "worker": read.cols["worker"], "status": read.cols["status"]}
        for name in ("submit", "start", "stop"):
            cols[name] = np.asarray(read.cols[name], np.float64) - self.run.t0
        self.rows += read.n
        return out + self._batches("tasks", cols, read.first)

    def _count(self, group: np.ndarray, status: np.ndarray) -> None:
        for counts, mask in ((self.done, status == 0), (self.erred, status != 0)):
            ids, n = np.unique(group[mask], return_counts=True)
            for gid, k in zip(ids.tolist(), n.tolist(), strict=True):
                counts[gid] = counts.get(gid, 0) + k

    def _cache(self, upto: int | None) -> list[encode.Message]:
        read = self._read(self.sources.cache, self.cursors.cache, upto)
        if read is None:
            return []
        self.cursors.cache = read.cursor
        if read.n <= 0:
            return []
        ids, out = self._group_map(read.cols["groups"])
        cols = {
            "time": np.asarray(read.cols["time"], np.float64) - self.run.t0,
            "group": ids[np.asarray(read.cols["group"], np.int64)],
            "metric": np.asarray(read.cols["metric"]),
        }
        return out + self._batches("cache", decimate(cols, CACHE_RESOLUTION), read.first)

    def _resources(self, upto: int | None) -> list[encode.Message]:
        read = self._read(self.sources.resources, self.cursors.resources, upto)
        if read is None:
            return []
        self.cursors.resources = read.cursor
        if read.n <= 0:
            return []
        cols = {k: read.cols[k] for k in ("cpu", "memory", "processes")}
        cols["time"] = np.asarray(read.cols["time"], np.float64) - self.run.t0
        return self._batches("resources", cols, read.first)

    def _batches(self, kind: str, cols: dict[str, Any], first: int) -> list[encode.Message]:
        n = len(cols["time" if kind != "tasks" else "start"])
        step = self.batch_rows
        out = []
        for lo in range(0, n, step):
            part = {k: np.asarray(v)[lo : lo + step] for k, v in cols.items()}
            out.append(encode.table(kind, self.id, part, first + lo if kind == "tasks" else None))
        return out

    def _stacks(self, final: bool, upto: float | None) -> list[encode.Message]:
        reader = self.sources.stacks
        if reader is None:
            return []
        last = self.cursors.stacks
        now = perf_counter()
        out = []
        for t_start, t_end, trees in reader(last):
            if last is not None and t_start <= last:
                continue
            if upto is not None and t_start > upto:
                break
            if not final and upto is None and t_end > now:
                break  # the cycle is still filling
            self.cursors.stacks = t_start
            if trees:
                t0 = self.run.t0
                out.append(encode.stacks(self.id, t_start - t0, t_end - t0, trees))
        return out


def _groups(run: str, first: int, names: list[str]) -> encode.Message:
    ids = range(first, first + len(names))
    return encode.groups(run, ids, names, [group_color(n) for n in names])


def _first_or(value: float | None, default: float) -> float:
    return default if value is None else value


def decimate(cols: dict[str, np.ndarray], resolution: float) -> dict[str, np.ndarray]:
    """Keep the last row of each (group, ``resolution``-wide time bucket), in time order."""
    n = len(cols["time"])
    if n < 2:
        return cols
    bucket = np.floor(cols["time"] / resolution).astype(np.int64)
    key = bucket * 65_536 + cols["group"].astype(np.int64)
    _, last_rev = np.unique(key[::-1], return_index=True)
    keep = np.sort(n - 1 - last_rev)
    return {k: v[keep] for k, v in cols.items()}
