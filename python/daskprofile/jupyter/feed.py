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
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import numpy as np

from ..keys import group_color
from ..record.cursors import Cursors, Read, Reader
from ..run import Run
from . import encode

#: rows per columnar message when replaying or catching up
BATCH_ROWS = 65_536
#: cache occupancy is sent at most once per group per this many seconds (the last value)
CACHE_RESOLUTION = 1e-3


# ---------------------------------------------------------------- the feed


@dataclass
class _Positions:
    tasks: int = 0
    cache: int = 0
    resources: int = 0
    stacks: float | None = None  # start of the last cycle sent
    #: per worker process of a cluster (its label): resource rows read
    processes: dict[str, int] = field(default_factory=dict)


@dataclass
class Feed:
    """Turns one run's records into protocol messages, incrementally."""

    run: Run
    cursors: Cursors
    title: str | None = None
    batch_rows: int = BATCH_ROWS
    at: _Positions = field(default_factory=_Positions)
    group_names: list[str] = field(default_factory=list)
    group_ids: dict[str, int] = field(default_factory=dict)
    worker_labels: list[str] = field(default_factory=list)
    done: dict[int, int] = field(default_factory=dict)  # group id -> tasks that succeeded
    erred: dict[int, int] = field(default_factory=dict)  # group id -> tasks that raised
    rows: int = 0  # task rows read so far
    progress_at: float = 0.0  # when the last live progress message was made

    @property
    def id(self) -> str:
        return str(self.run.meta.id)

    # ------------------------------------------------------------ messages
    def start(self) -> list[encode.Message]:
        """``run_start``."""
        meta = self.run.meta
        return [encode.run_start(self.id, self.run.t0, meta.wall0, meta.options, self.title)]

    def end(self) -> list[encode.Message]:
        """``run_end`` of a finished run."""
        meta = self.run.meta
        summary = self.run.summary()
        return [encode.run_end(self.id, summary, meta.dropped, meta.errors, meta.reduced)]

    def poll(self, final: bool = False, upto: _Positions | None = None) -> list[encode.Message]:
        """Messages for what was recorded since the last poll (``upto``: stop there)."""
        out: list[encode.Message] = []
        out += self._tasks(upto.tasks if upto else None)
        out += self._cache(upto.cache if upto else None)
        out += self._resources(upto.resources if upto else None)
        out += self._processes(upto.processes if upto else None)
        out += self._stacks(final, upto.stacks if upto else None)
        return out

    def catch_up(self) -> list[encode.Message]:
        """Everything this feed has sent so far, for a panel joining mid-run."""
        other = Feed(self.run, self.cursors, self.title, self.batch_rows)
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
        upto = replace(
            self.at,
            stacks=_first_or(self.at.stacks, -math.inf),
            processes=dict(self.at.processes),
        )
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
        totals = dict(self.cursors.totals()) if self.cursors.totals else {}
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
        read = self._read(self.cursors.tasks, self.at.tasks, upto)
        if read is None:
            return []
        self.at.tasks = read.cursor
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
        read = self._read(self.cursors.cache, self.at.cache, upto)
        if read is None:
            return []
        self.at.cache = read.cursor
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
        read = self._read(self.cursors.resources, self.at.resources, upto)
        if read is None:
            return []
        self.at.resources = read.cursor
        if read.n <= 0:
            return []
        cols = {k: read.cols[k] for k in ("cpu", "memory", "processes")}
        cols["time"] = np.asarray(read.cols["time"], np.float64) - self.run.t0
        return self._batches("resources", cols, read.first)

    def _processes(self, upto: dict[str, int] | None) -> list[encode.Message]:
        """Resources of each worker process of a cluster (``source``: its label)."""
        if self.cursors.processes is None:
            return []
        out: list[encode.Message] = []
        for label, reader in sorted(self.cursors.processes().items()):
            if upto is not None and label not in upto:
                continue
            stop = None if upto is None else upto[label]
            read = self._read(reader, self.at.processes.get(label, 0), stop)
            if read is None:
                continue
            self.at.processes[label] = read.cursor
            if read.n > 0:
                cols = {k: read.cols[k] for k in ("cpu", "memory", "processes")}
                cols["time"] = np.asarray(read.cols["time"], np.float64) - self.run.t0
                out += self._batches("resources", cols, read.first, source=label)
        return out

    def _batches(
        self, kind: str, cols: dict[str, Any], first: int, source: str | None = None
    ) -> list[encode.Message]:
        n = len(cols["time" if kind != "tasks" else "start"])
        step = self.batch_rows
        out = []
        for lo in range(0, n, step):
            part = {k: np.asarray(v)[lo : lo + step] for k, v in cols.items()}
            index = first + lo if kind == "tasks" else None
            out.append(encode.table(kind, self.id, part, index, source=source))
        return out

    def _stacks(self, final: bool, upto: float | None) -> list[encode.Message]:
        reader = self.cursors.stacks
        if reader is None:
            return []
        last = self.at.stacks
        now = perf_counter()
        out = []
        for t_start, t_end, trees in reader(last):
            if last is not None and t_start <= last:
                continue
            if upto is not None and t_start > upto:
                break
            if not final and upto is None and t_end > now:
                break  # the cycle is still filling
            self.at.stacks = t_start
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
