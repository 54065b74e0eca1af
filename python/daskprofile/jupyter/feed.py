"""One run's protocol messages, read incrementally from the collectors (or a finished Run).

A :class:`Feed` keeps cursors into a run's tables and, on each :meth:`Feed.poll`, turns the
rows recorded since the previous poll into ``groups``/``workers`` (only the new ones),
``tasks``, ``cache``, ``resources``, ``stacks`` and ``progress`` messages, and (protocol
1.2) ``spans`` (and the ``span`` column of ``tasks``, once the run has a span),
``exceptions`` and a cluster's ``cluster_workers``, ``actions``, ``memory`` and
``transfers`` (1.3: with the type of the data each moved, a ``type`` column that
``encode.adapt`` drops for older panels). Readers are small functions
``read(cursor) -> Read``; live readers copy only the new rows from the collectors (numpy
copies under the collector's lock, no key decoding), frozen readers slice a finished
:class:`~daskprofile.run.Run`. Feeds run on the publisher's thread only.

Lanes: a ``workers`` id is a lane of the feed; task rows' lanes come from their source's
worker labels. An action goes on the lane of the task row of its key when the run holds
one on that worker (task keys are decoded, once, only for runs with actions; an action
waits up to :data:`ACTION_WAIT` seconds for its task row), else on the first lane of its
worker's address, or on a lane of that address alone (``encode.action_lane``: sent only
to 1.2 panels, since no task row uses it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import numpy as np

from ..keys import group_color
from ..record.cursors import Cursors, Read, Reader
from ..run import Run
from ..spans import path
from . import encode

#: rows per columnar message when replaying or catching up
BATCH_ROWS = 65_536
#: cache occupancy is sent at most once per group per this many seconds (the last value)
CACHE_RESOLUTION = 1e-3
#: seconds (since it stopped) an action waits for the task row of its key, while live
ACTION_WAIT = 2.0
#: failed tasks per ``exceptions`` message (their texts are a few KB each)
EXCEPTION_ROWS = 100
#: keys added to a :class:`_KeyLanes` before they are merged into its sorted arrays
_MERGE_KEYS = 65_536


# ---------------------------------------------------------------- the feed


@dataclass
class _Positions:
    tasks: int = 0
    cache: int = 0
    resources: int = 0
    stacks: float | None = None  # start of the last cycle sent
    #: per worker process of a cluster (its label): resource rows read
    processes: dict[str, int] = field(default_factory=dict)
    exceptions: int = 0
    actions: int = 0
    transfers: int = 0
    memory: int = 0


class _KeyLanes:
    """The lane of each task key seen (a key's latest row wins), in about 12 bytes a key:
    hashes of the labels in sorted numpy arrays, the newest in a dict until merged."""

    def __init__(self) -> None:
        self.hashes = np.empty(0, np.int64)
        self.lanes = np.empty(0, np.int32)
        self.recent: dict[int, int] = {}

    def add(self, keys: list[str], lanes: np.ndarray) -> None:
        self.recent.update(zip(map(hash, keys), lanes.tolist(), strict=True))
        if len(self.recent) >= max(_MERGE_KEYS, len(self.hashes) // 4):
            self._merge()

    def _merge(self) -> None:
        n = len(self.recent)
        hashes = np.concatenate([self.hashes, np.fromiter(self.recent, np.int64, n)])
        lanes = np.concatenate([self.lanes, np.fromiter(self.recent.values(), np.int32, n)])
        order = np.argsort(hashes, kind="stable")  # the newer of equal hashes comes last
        hashes, lanes = hashes[order], lanes[order]
        last = np.ones(len(hashes), bool)
        last[:-1] = hashes[1:] != hashes[:-1]
        self.hashes, self.lanes, self.recent = hashes[last], lanes[last], {}

    def get(self, keys: list[str]) -> np.ndarray:
        """Lanes of ``keys`` (-1: not seen)."""
        wanted = np.fromiter(map(hash, keys), np.int64, len(keys))
        out = np.full(len(keys), -1, np.int64)
        if len(self.hashes):
            pos = np.minimum(np.searchsorted(self.hashes, wanted), len(self.hashes) - 1)
            found = self.hashes[pos] == wanted
            out[found] = self.lanes[pos[found]]
        recent = self.recent
        if recent:
            for i, h in enumerate(wanted.tolist()):
                lane = recent.get(h)
                if lane is not None:
                    out[i] = lane
        return out


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
    worker_labels: list[str] = field(default_factory=list)  # label of each lane
    lane_ids: dict[str, int] = field(default_factory=dict)
    #: lanes only actions use (labelled with a worker's address alone)
    action_only: set[int] = field(default_factory=set)
    #: worker addresses of ``transfers`` rows (ids index this list), and how many were sent
    addresses: list[str] = field(default_factory=list)
    address_ids: dict[str, int] = field(default_factory=dict)
    addresses_sent: int = 0
    #: type names of the data ``transfers`` rows moved (their ``type`` ids index this list,
    #: protocol 1.3), and how many were sent
    types: list[str] = field(default_factory=list)
    type_ids: dict[str, int] = field(default_factory=dict)
    types_sent: int = 0
    members_sent: list[dict[str, Any]] | None = None  # the last ``cluster_workers`` list
    #: span paths by protocol id - 1 (id 0: no span); tasks carry a span column once any
    span_names: list[str] = field(default_factory=list)
    span_ids: dict[str, int] = field(default_factory=dict)
    done: dict[int, int] = field(default_factory=dict)  # group id -> tasks that succeeded
    erred: dict[int, int] = field(default_factory=dict)  # group id -> tasks that raised
    rows: int = 0  # task rows read so far
    progress_at: float = 0.0  # when the last live progress message was made
    series_at: float = 0.0  # when the sampled series were last polled (see ``poll``)
    #: lanes of the task source's worker ids (its labels only grow)
    _task_lanes: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    #: first lane of each worker address (a cluster's), of task rows then of actions
    _address_lane: dict[str, int] = field(default_factory=dict)
    _key_lanes: _KeyLanes = field(default_factory=_KeyLanes)
    #: task rows whose keys are not in ``_key_lanes`` yet: (first row, lanes)
    _unindexed: list[tuple[int, np.ndarray]] = field(default_factory=list)
    _members_version: Any = None  # of the last ``cluster_workers`` list read
    #: a cluster run's task rows read so far: (first row, lanes), for ``reruns``
    _row_lanes: list[tuple[int, np.ndarray]] = field(default_factory=list)
    reruns_sent: set[int] = field(default_factory=set)  # task rows sent in ``reruns``

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

    def poll(
        self, final: bool = False, upto: _Positions | None = None, series: bool = True
    ) -> list[encode.Message]:
        """Messages for what was recorded since the last poll (``upto``: stop there).
        ``series=False``: the task rows and what goes with them only (exceptions, actions,
        transfers, workers); the sampled series (cache, CPU/memory, stacks) wait for the
        next poll that asks for them."""
        out: list[encode.Message] = []
        out += self._tasks(upto.tasks if upto else None)
        out += self._exceptions(upto.exceptions if upto else None)
        if series or final or upto is not None:
            out += self._cache(upto.cache if upto else None)
            out += self._resources(upto.resources if upto else None)
            out += self._processes(upto.processes if upto else None)
        out += self._members()
        out += self._actions(final or upto is not None, upto.actions if upto else None)
        out += self._transfers(upto.transfers if upto else None)
        if series or final or upto is not None:
            out += self._memory(upto.memory if upto else None)
            out += self._stacks(final, upto.stacks if upto else None)
        return out

    def catch_up(self) -> list[encode.Message]:
        """Everything this feed has sent so far, for a panel joining mid-run."""
        other = Feed(self.run, self.cursors, self.title, self.batch_rows)
        other.group_names = list(self.group_names)
        other.group_ids = dict(self.group_ids)
        other.worker_labels = list(self.worker_labels)
        other.lane_ids = dict(self.lane_ids)
        other.action_only = set(self.action_only)
        other._address_lane = dict(self._address_lane)
        other.addresses = list(self.addresses)
        other.address_ids = dict(self.address_ids)
        other.types = list(self.types)
        other.type_ids = dict(self.type_ids)
        other.span_names = list(self.span_names)
        other.span_ids = dict(self.span_ids)
        out = other.start()
        if other.group_names:
            out.append(_groups(self.id, 0, other.group_names))
        if other.span_names:
            out.append(_spans(self.id, 1, other.span_names))
        out += other._lanes_message(range(len(other.worker_labels)))
        # no stacks cycle sent yet: send none (the live feed will)
        upto = replace(
            self.at,
            stacks=_first_or(self.at.stacks, -math.inf),
            processes=dict(self.at.processes),
        )
        out += other.poll(upto=upto)
        if other.addresses_sent < len(other.addresses) or other.types_sent < len(other.types):
            out += other._batches("transfers", _no_transfers(), 0)  # known, in no row sent
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

    def _lanes(self, labels: list[str]) -> tuple[np.ndarray, list[encode.Message]]:
        """Lanes of a task source's worker lookup, and ``workers`` messages for new ones."""
        known = len(self._task_lanes)
        if len(labels) <= known:
            return self._task_lanes, []
        before = len(self.worker_labels)
        lanes = [self._lane(str(label)) for label in labels[known:]]
        self._task_lanes = np.concatenate([self._task_lanes, np.asarray(lanes, np.int64)])
        return self._task_lanes, self._lanes_message(range(before, len(self.worker_labels)))

    def _lane(self, label: str, action_only: bool = False) -> int:
        """The lane of ``label``, added if new (a cluster worker's first task lane is
        where its actions without a task row go)."""
        lane = self.lane_ids.get(label)
        if lane is not None:
            return lane
        lane = self.lane_ids[label] = len(self.worker_labels)
        self.worker_labels.append(label)
        if action_only:
            self.action_only.add(lane)
        elif encode.worker_kind(label) == "worker":
            address = _address(label)
            if self._address_lane.get(address, -1) in self.action_only | {-1}:
                self._address_lane[address] = lane
        return lane

    def _lanes_message(self, lanes: Any) -> list[encode.Message]:
        """``workers`` messages for ``lanes``: those of tasks, then those only actions use
        (apart: a panel older than 1.2 gets the first only)."""
        out = []
        for only in (False, True):
            ids = [i for i in lanes if (i in self.action_only) == only]
            if ids:
                out.append(encode.workers(self.id, ids, [self.worker_labels[i] for i in ids]))
        return out

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
        lanes, new_lanes = self._lanes(read.cols["workers"])
        out += new_lanes
        group = ids[np.asarray(read.cols["group"], np.int64)] if len(ids) else np.zeros(read.n)
        worker = _pick(lanes, read.cols["worker"])
        if self.cursors.actions is not None:  # their keys may be wanted for actions' lanes
            self._unindexed.append((read.first, worker.astype(np.int32)))
        if self.cursors.members is not None:  # rows a worker that leaves may take along
            self._row_lanes.append((read.first, worker.astype(np.int32)))
        self._count(group, np.asarray(read.cols["status"]))
        cols = {"group": group, "worker": worker, "status": read.cols["status"]}
        for name in ("submit", "start", "stop"):
            cols[name] = np.asarray(read.cols[name], np.float64) - self.run.t0
        out += self._span_column(read, cols)
        self.rows += read.n
        return out + self._batches("tasks", cols, read.first)

    def _span_column(self, read: Read, cols: dict[str, Any]) -> list[encode.Message]:
        """Add the rows' ``span`` ids to ``cols`` once the run has a span (a ``spans``
        message for new ones); a run without spans sends no column."""
        lookup = read.cols.get("spans") or [None]
        raw = read.cols.get("span")
        if raw is None or len(lookup) <= 1:
            return self._no_span(cols, read.n)
        raw = np.asarray(raw, np.int64)
        known = len(self.span_names)
        ids = np.zeros(len(lookup), np.int64)
        for sid in np.unique(raw).tolist():
            label = path(tuple(lookup[sid])) if 0 < sid < len(lookup) and lookup[sid] else None
            if label is not None:
                ids[sid] = self.span_ids.get(label) or self._new_span(label)
        if not self.span_names:
            return []
        cols["span"] = ids[raw]
        new = self.span_names[known:]
        return [_spans(self.id, known + 1, new)] if new else []

    def _no_span(self, cols: dict[str, Any], n: int) -> list[encode.Message]:
        if self.span_names:
            cols["span"] = np.zeros(n, np.int64)
        return []

    def _new_span(self, label: str) -> int:
        self.span_names.append(label)
        self.span_ids[label] = len(self.span_names)
        return len(self.span_names)

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
        self, kind: str, cols: dict[str, Any], first: int, source: str | None = None, **extra: Any
    ) -> list[encode.Message]:
        n = len(next(iter(cols.values())))
        step = self.batch_rows
        out = []
        for lo in range(0, max(n, 1 if kind == "transfers" else 0), step):
            part = {k: np.asarray(v)[lo : lo + step] for k, v in cols.items()}
            index = first + lo if kind in ("tasks", "actions") else None
            if kind == "transfers":
                extra["addresses"] = self.addresses[self.addresses_sent :]
                self.addresses_sent = len(self.addresses)
                extra["types"] = self.types[self.types_sent :]
                self.types_sent = len(self.types)
            out.append(encode.table(kind, self.id, part, index, source=source, **extra))
        return out

    # ------------------------------------------------------------ protocol 1.2
    def _exceptions(self, upto: int | None) -> list[encode.Message]:
        read = self._read(self.cursors.exceptions, self.at.exceptions, upto)
        if read is None:
            return []
        self.at.exceptions = read.cursor
        if read.n <= 0:
            return []
        cols, t0 = read.cols, self.run.t0
        names = ("key", "group", "worker", "type", "message", "traceback")
        rows = [
            {**{name: str(cols[name][i] or "") for name in names}, "time": cols["time"][i] - t0}
            for i in range(read.n)
        ]
        dropped = int(cols.get("dropped", 0) or 0)
        return [
            encode.exceptions(self.id, rows[lo : lo + EXCEPTION_ROWS], read.first + lo, dropped)
            for lo in range(0, len(rows), EXCEPTION_ROWS)
        ]

    def _members(self) -> list[encode.Message]:
        """``cluster_workers`` when the run's workers changed (the whole list)."""
        if self.cursors.members is None:
            return []
        version, table = self.cursors.members()
        if version == self._members_version:
            return []
        self._members_version = version
        members = _members(table, self.run.t0)
        if members == (self.members_sent or []):
            return []
        self.members_sent = members
        return [encode.cluster_workers(self.id, members), *self._reruns(table)]

    def _reruns(self, table: Mapping[str, Any]) -> list[encode.Message]:
        """``reruns``: the task rows, read so far, of keys a worker that left held
        (``lost``), was running (``interrupted``) or failed with (``killed``), on that
        worker; each row once. Decodes only the keys of those workers' rows."""
        taken = _taken(table)
        if not taken or self.cursors.keys is None:
            return []
        labels = self.worker_labels
        gone = [i for i, label in enumerate(labels) if _address(label) in taken]
        rows: list[int] = []
        why: list[str] = []
        workers: list[str] = []
        for first, lanes in self._row_lanes:
            at = np.flatnonzero(np.isin(lanes, gone))
            if not len(at):
                continue
            keys = self.cursors.keys((first + at).tolist())
            for i, key in zip(at.tolist(), keys, strict=True):
                address = _address(labels[lanes[i]])
                reason = taken[address].get(key)
                if reason is not None and first + i not in self.reruns_sent:
                    self.reruns_sent.add(first + i)
                    rows.append(first + i)
                    why.append(reason)
                    workers.append(address)
        return [encode.reruns(self.id, rows, why, workers)] if rows else []

    def _actions(self, settled: bool, upto: int | None) -> list[encode.Message]:
        """Actions (rows of keys whose task row has not come yet wait a little, unless
        ``settled``: the run has finished or this catches up to a cursor)."""
        read = self._read(self.cursors.actions, self.at.actions, upto)
        if read is None:
            return []
        if read.n <= 0:
            self.at.actions = read.cursor
            return []
        cols = read.cols
        addresses = [str(cols["workers"][w]) for w in np.asarray(cols["worker"]).tolist()]
        lanes = self._key_lane(cols["key"], addresses)
        n = read.n if settled else _waited(lanes, cols["stop"], perf_counter() - ACTION_WAIT)
        self.at.actions = read.first + n
        if n <= 0:
            return []
        out = self._fill_lanes(lanes[:n], addresses[:n])
        ids, groups = self._group_map(cols["groups"])
        kind = _action_codes(cols["actions"])[np.asarray(cols["action"][:n], np.int64)]
        known = kind >= 0
        size = np.asarray(cols["bytes"][:n], np.float64)
        rows = {
            "worker": lanes[:n],
            "action": kind,
            "group": _pick(ids, cols["group"][:n]),
            "start": np.asarray(cols["start"][:n], np.float64) - self.run.t0,
            "stop": np.asarray(cols["stop"][:n], np.float64) - self.run.t0,
            "bytes": np.where(size < 0, np.nan, size),
        }
        if not known.all():  # never, while distributed has only those four
            rows = {k: v[known] for k, v in rows.items()}
        return groups + out + self._batches("actions", rows, read.first)

    def _key_lane(self, keys: list[str], addresses: list[str]) -> np.ndarray:
        """Lane of the task row of each action's key, on the action's worker (-1: none)."""
        self._index_keys()
        lanes = self._key_lanes.get(keys)
        labels = self.worker_labels
        for i, lane in enumerate(lanes.tolist()):
            if lane >= 0 and _address(labels[lane]) != addresses[i]:
                lanes[i] = -1  # it ran elsewhere (again, after a worker left)
        return lanes

    def _index_keys(self) -> None:
        """Keys of the task rows read so far into ``_key_lanes`` (each row decoded once)."""
        keys_at = self.cursors.keys
        pending, self._unindexed = self._unindexed, []
        if keys_at is None:
            return
        step = self.batch_rows
        for first, lanes in pending:
            for lo in range(0, len(lanes), step):
                part = lanes[lo : lo + step]
                self._key_lanes.add(keys_at(list(range(first + lo, first + lo + len(part)))), part)

    def _fill_lanes(self, lanes: np.ndarray, addresses: list[str]) -> list[encode.Message]:
        """Rows without a task lane go to their worker's first lane (made if none)."""
        known = len(self.worker_labels)
        for i in np.flatnonzero(lanes < 0).tolist():
            address = addresses[i]
            lane = self._address_lane.get(address)
            if lane is None:
                lane = self._address_lane[address] = self._lane(
                    encode.action_lane(address), action_only=True
                )
            lanes[i] = lane
        return self._lanes_message(range(known, len(self.worker_labels)))

    def _transfers(self, upto: int | None) -> list[encode.Message]:
        read = self._read(self.cursors.transfers, self.at.transfers, upto)
        if read is None:
            return []
        self.at.transfers = read.cursor
        if read.n <= 0:
            return []
        cols = read.cols
        ids = self._address_map(cols["workers"], cols["source"], cols["destination"])
        rows = {
            "start": np.asarray(cols["start"], np.float64) - self.run.t0,
            "stop": np.asarray(cols["stop"], np.float64) - self.run.t0,
            "source": ids[np.asarray(cols["source"], np.int64)],
            "destination": ids[np.asarray(cols["destination"], np.int64)],
            "bytes": np.asarray(cols["bytes"], np.float64),
            "incoming": (np.asarray(cols["direction"]) == 0).astype(np.uint8),
            "type": self._type_map(cols.get("types") or [], cols["type"]),
        }
        return self._batches("transfers", rows, read.first)

    def _type_map(self, names: list[str], used: Any) -> np.ndarray:
        """Ids in ``types`` of the transfers' type ids ``used`` (into ``names``; an id
        without a name is ``""``, not known), new names appended in order of first use."""
        rows = np.asarray(used, np.int64)
        ids = np.zeros(max(len(names), int(rows.max()) + 1 if len(rows) else 0), np.int64)
        for i in dict.fromkeys(rows.tolist()):
            name = str(names[i]) if i < len(names) else ""
            tid = self.type_ids.get(name)
            if tid is None:
                tid = self.type_ids[name] = len(self.types)
                self.types.append(name)
            ids[i] = tid
        out: np.ndarray = ids[rows]
        return out

    def _address_map(self, names: list[str], *used: Any) -> np.ndarray:
        """Ids in ``addresses`` of the addresses ``used`` (ids of ``names``), in order of
        first use; the others map to 0."""
        ids = np.zeros(len(names), np.int64)
        seen = np.concatenate([np.asarray(u, np.int64) for u in used])
        for i in dict.fromkeys(seen.tolist()):
            name = str(names[i])
            aid = self.address_ids.get(name)
            if aid is None:
                aid = self.address_ids[name] = len(self.addresses)
                self.addresses.append(name)
            ids[i] = aid
        return ids

    def _memory(self, upto: int | None) -> list[encode.Message]:
        """A ``memory`` batch per worker (managed, unmanaged, spilled bytes)."""
        read = self._read(self.cursors.memory, self.at.memory, upto)
        if read is None:
            return []
        self.at.memory = read.cursor
        if read.n <= 0:
            return []
        cols = read.cols
        worker = np.asarray(cols["worker"], np.int64)
        process = np.asarray(cols["process"], np.float64)
        managed = np.minimum(np.asarray(cols["managed"], np.float64), process)
        table = {
            "time": np.asarray(cols["time"], np.float64) - self.run.t0,
            "managed": np.maximum(managed, 0.0),
            "unmanaged": np.maximum(process - managed, 0.0),
            "spilled": np.maximum(np.asarray(cols["spilled"], np.float64), 0.0),
        }
        out = []
        limits = cols["limits"]
        for wid in np.unique(worker).tolist():
            mask = worker == wid
            part = {k: v[mask] for k, v in table.items()}
            limit = int(limits[wid] or 0) if wid < len(limits) else 0
            source = str(cols["workers"][wid])
            out += self._batches("memory", part, 0, source=source, limit=limit)
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


def _address(label: str) -> str:
    """The worker address of a cluster lane's label (``"<address> thread <n>"``)."""
    return label.rsplit(" thread ", 1)[0]


def _pick(lookup: np.ndarray, ids: Any) -> np.ndarray:
    """``lookup[ids]`` (zeros when the lookup is empty)."""
    ids = np.asarray(ids, np.int64)
    return lookup[ids] if len(lookup) else np.zeros(len(ids), np.int64)


def _action_codes(names: list[str]) -> np.ndarray:
    """Protocol codes of a table's action names (-1: not one of the protocol's)."""
    codes = encode.ACTION_CODES
    return np.asarray([codes.index(n) if n in codes else -1 for n in names], np.int64)


def _waited(lanes: np.ndarray, stops: Any, before: float) -> int:
    """Rows that can go: those before the first one without a lane that stopped after
    ``before`` (its task row may still come)."""
    waiting = np.flatnonzero((lanes < 0) & (np.asarray(stops, np.float64) > before))
    return int(waiting[0]) if len(waiting) else len(lanes)


def _members(table: Mapping[str, Any], t0: float) -> list[dict[str, Any]]:
    """The ``cluster_workers`` rows of a raw ``workers`` table (times in s since t0)."""

    def since(t: Any) -> float | None:
        return None if t is None else float(t) - t0

    out = []
    for i, address in enumerate(table.get("address") or ()):
        joined = table["joined"][i]
        out.append(
            {
                "address": str(address),
                "name": str(table["name"][i] or ""),
                "host": str(table["host"][i] or ""),
                "threads": int(table["threads"][i] or 0),
                "memory_limit": int(table["memory_limit"][i] or 0),
                "joined": None if joined is None or joined < t0 else since(joined),
                "left": since(table["left"][i]),
                "reason": table["reason"][i],
            }
        )
    return out


def _taken(table: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Per worker that left: the keys it took with it and why (``lost``, ``interrupted``,
    ``killed``: the last wins)."""
    out: dict[str, dict[str, str]] = {}
    for i, address in enumerate(table.get("address") or ()):
        if table["left"][i] is None:
            continue
        keys = out.setdefault(str(address), {})
        for why, name in (("lost", "lost"), ("interrupted", "processing"), ("killed", "killed")):
            keys.update(dict.fromkeys(map(str, table[name][i] or ()), why))
    return {a: k for a, k in out.items() if k}


def _no_transfers() -> dict[str, np.ndarray]:
    specs = (*encode.COLUMNS["transfers"], *encode.OPTIONAL_COLUMNS["transfers"])
    return {name: np.zeros(0) for name, _ in specs}


def _spans(run: str, first: int, names: list[str]) -> encode.Message:
    return encode.spans(run, range(first, first + len(names)), names)


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
