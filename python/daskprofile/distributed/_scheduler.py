"""Scheduler side: a plugin that records tasks as they finish and streams them in batches.

Runs inside the scheduler's event loop. Every ``flush`` seconds what was gathered since
the previous batch is published with ``Scheduler.log_event`` on the run's topic, which the
client subscribed to (``final`` returns the last one directly). Nothing here ever raises
into the scheduler: the first error switches the plugin off and is sent in the next batch.

The scheduler calls ``transition`` several times per task, each time with its own data
structures in the CPU's caches; every dictionary of ours touched there would be a cache
miss. So ``transition`` only notes what happened, in order, in one list: it returns at
once for the states a task passes through on its way to running, and otherwise appends
``(key, time)`` when a task becomes ``processing``, ``(key, finish, kwargs)`` when it
leaves ``processing`` (the scheduler's own kwargs dict: worker, thread, ``startstops``,
``nbytes``) and ``(key, start, finish, None)`` for the rest (released, forgotten, ...).
``update_graph`` (once per graph of a recorded client) numbers the graph (its *compute*),
reads each touched task's ``TaskGroup`` name and state (C-level ``map``), resolves group
ids once per ``TaskGroup`` name and counts the graph's tasks per group. Each ``flush``
applies the notes in order (per key: the submit time, the entry ``(compute, group id,
...)`` shared by the keys of one graph and group, the bytes held), then turns the finished
tasks into columns. At most ``max_pending`` notes are kept: more are applied at once.

Message (``src == "scheduler"``, version :data:`~._common.MESSAGE_VERSION`)::

    {"v": 2, "src": "scheduler", "seq": 3, "now": 1.7e9,       # scheduler clock (s)
     "groups": ["inc"],             # group names new since the previous batch (ids follow)
     "workers": ["tcp://w:1 thread 0"],   # worker thread labels new since then (ids follow)
     "worker_info": {"tcp://w:1": {"name", "host", "pid", "nthreads", "memory_limit"}},
     "tasks": {"key": [...], "group": [...], "worker": [...], "submit": [...],
               "start": [...], "stop": [...], "error": [None | "ValueError"],
               "compute": [...]},   # one entry per task finished since the last batch
     "cache": {"time": [...], "group": [...], "metric": [...]},   # bytes held per group
     "graphs": [{"compute": 4, "client": "Client-...", "keys": ["inc-ab-0", ...],
                 "totals": [[0, 10]]}],
     "pending": {4: 3},             # compute -> its tasks not finished yet (changed ones)
     "computes": 4, "dropped": 0, "error": None}

Times are the workers' ``compute`` start/stop (``startstops``, already in the scheduler's
clock) and the time the task became ``processing`` on the scheduler (``submit``).
``graphs``: one entry per ``update_graph`` of a recorded client since the previous batch;
``keys`` are the labels of (up to) the 3 smallest requested output keys, sorted (as
``key_label`` gives them); ``totals`` count the graph's touched tasks per group id (ids of
``groups``, sent in this batch or before). ``pending``: for each compute whose count
changed, how many of its tasks have not finished: a task finishes when it leaves
``processing`` to ``memory`` or ``erred``, becomes ``memory``/``erred`` otherwise (a failed
dependency), or is released or forgotten before it ran. Tasks already in memory (or
erred) when the graph arrives are not counted; a task still to finish for an earlier
compute counts for both. Every compute is sent at least once; one sent with 0 is then
forgotten.
"""

from __future__ import annotations

import asyncio
import heapq
import socket
from collections import Counter
from collections.abc import Hashable, Iterable
from itertools import compress, repeat
from operator import attrgetter, is_, itemgetter, le
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time
from tornado.ioloop import PeriodicCallback

from ..keys import GroupIndex, key_label
from ._common import MESSAGE_VERSION, exception_name, worker_label

__all__ = ["SchedulerProbe", "finish_probe", "forget_topic", "scheduler_clock"]

#: task columns of a batch, in order
TASK_FIELDS = ("key", "group", "worker", "submit", "start", "stop", "error", "compute")
#: output keys whose labels identify a graph (the smallest few, sorted)
GRAPH_KEYS = 3
#: keys with an entry before those forgotten by the scheduler are looked for
PRUNE_MIN = 10_000

#: states a task passes through on its way to running (nothing to note)
_ON_THE_WAY = frozenset({"waiting", "queued", "no-worker"})
#: states of a finished task
_DONE = frozenset({"memory", "erred"})

_TASK_GROUP_NAME = attrgetter("group.name")
_STATE = attrgetter("state")

#: a task that left processing, noted flat (no tuple the garbage collector would follow):
#: key, submit time, worker id, compute start, compute stop, nbytes (memory) | error type
RAN = 6
#: another transition, noted flat: key, start, finish, how many RAN notes came before it
MOVED = 4

# A key's entry: a tuple (compute, group id, next, shared) shared by the keys of one graph
# and group. ``next`` is the entry that replaces it once the task has finished (None: it
# has); ``shared``: earlier computes count the task too (``SchedulerProbe._also``).
_COMPUTE, _GID, _NEXT, _SHARED = 0, 1, 2, 3
Entry = tuple[Any, ...]


class SchedulerProbe(SchedulerPlugin):
    """Records the tasks of one run on the scheduler and publishes them in batches.

    ``clients``: ids of the clients whose graphs are recorded (None: every client).
    ``tasks``/``cache``: what to record. ``flush``: seconds between batches.
    ``max_pending``: task rows kept between two batches (more are counted as dropped);
    also the transitions noted before they are applied (then applied at once).
    Cache rows are the bytes held per group, for the groups that changed, once per batch.
    """

    idempotent = False

    def __init__(
        self,
        topic: str,
        clients: list[str] | None,
        *,
        tasks: bool = True,
        cache: bool = True,
        flush: float = 0.2,
        max_pending: int = 500_000,
    ) -> None:
        self.topic = topic
        self.clients = None if clients is None else set(clients)
        self.record_tasks = tasks
        self.record_cache = cache
        self.flush_interval = flush
        self.max_pending = max_pending
        self._reset()

    def __getstate__(self) -> dict[str, Any]:
        keep = ("topic", "clients", "record_tasks", "record_cache", "flush_interval")
        return {k: self.__dict__[k] for k in (*keep, "max_pending")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    def _reset(self) -> None:
        self.scheduler: Any = None
        self.off = False
        self.error: str | None = None
        self._error_sent = False
        self.seq = 0
        self.computes = 0
        self.dropped = 0
        # noted by ``transition``, applied in order by ``_settle``
        self._submit: dict[Hashable, float] = {}  # tasks processing: since when
        self._ran: list[Any] = []  # RAN slots per task
        self._moved: list[Any] = []  # MOVED slots per transition
        self._ran_max = RAN * self.max_pending
        self._moved_max = MOVED * self.max_pending
        # per key
        self._compute_of: dict[Hashable, Entry] = {}  # of the graph that touched it last
        self._prune_at = PRUNE_MIN  # entries counted when forgotten keys are pruned
        self._also: dict[Hashable, list[int]] = {}  # earlier computes still counting it
        self._held: dict[Hashable, int] = {}  # bytes in memory (cache)
        # per compute: tasks not finished yet; computes changed since the previous batch
        self._left: dict[int, int] = {}
        self._left_changed: set[int] = set()
        self._graphs: list[dict[str, Any]] = []
        self._groups = GroupIndex()
        self._groups_sent = 0
        self._by_task_group: dict[str, int] = {}  # TaskGroup name -> group id
        self._workers: dict[tuple[Any, Any], int] = {}
        self._threads_per_worker: dict[str, int] = {}
        self._worker_labels: list[str] = []
        self._workers_sent = 0
        self._worker_info: dict[str, dict[str, Any]] = {}
        self._columns: dict[str, list[Any]] = {f: [] for f in TASK_FIELDS}  # batch's rows
        self._occupancy: list[int] = []  # bytes held per group id
        self._occupancy_sent: list[int] = []
        self._callback: PeriodicCallback | None = None

    # ------------------------------------------------------------ scheduler hooks
    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._callback = PeriodicCallback(self._tick, self.flush_interval * 1000)
        self._callback.start()

    async def close(self) -> None:
        self._stop_callback()

    def _tick(self) -> None:
        self.flush()  # looked up at each tick: a wrapped ``flush`` is what runs

    def update_graph(  # type: ignore[override]
        self,
        scheduler: Any,
        *,
        client: str,
        tasks: list[Hashable],
        keys: Iterable[Hashable] = (),
        **kw: Any,
    ) -> None:
        if self.off or (self.clients is not None and client not in self.clients):
            return
        try:
            self._settle()  # what happened before this graph first
            self._graph(scheduler, str(client), tasks, keys)
        except Exception as exc:
            self._fail(exc)

    def transition(self, key: Hashable, start: str, finish: str, *args: Any, **kw: Any) -> None:
        if finish in _ON_THE_WAY:  # most transitions: nothing to note
            return
        try:
            if finish == "processing":
                self._submit[key] = time()
            elif start == "processing":
                submit = self._submit.pop(key, None)
                if finish == "memory":
                    extra = kw.get("nbytes")
                elif finish == "erred":
                    extra = exception_name(kw.get("exception_text"))
                else:
                    return  # released: it runs again later, or is forgotten
                # what is needed of the kwargs, read while the CPU has them at hand
                ident = (kw.get("worker"), kw.get("thread"))
                wid = self._workers.get(ident)
                if wid is None:
                    wid = self._worker_id(*ident)
                try:
                    last = kw["startstops"][-1]
                    if last["action"] == "compute":
                        begin, end = last["start"], last["stop"]
                    else:
                        begin, end = _compute_span(kw["startstops"])
                except (KeyError, IndexError, TypeError):
                    begin = end = None  # no startstops (erred where no worker ran it)
                ran = self._ran
                ran.extend((key, submit, wid, begin, end, extra))
                if len(ran) >= self._ran_max:
                    self._settle()
            elif start == "erred" or (start == "memory" and not self.record_cache):
                return  # finished already; entries of keys forgotten are pruned later
            else:
                if start == "released" and finish == "forgotten":
                    self._submit.pop(key, None)  # perhaps processing (passing through released)
                moved = self._moved
                moved.extend((key, start, finish, len(self._ran)))
                if len(moved) >= self._moved_max:
                    self._settle()
        except Exception as exc:
            self._fail(exc)

    # ------------------------------------------------------------ graphs
    def _graph(self, scheduler: Any, client: str, tasks: list[Hashable], keys: Any) -> None:
        """Number a graph, give its keys their entries, count its tasks."""
        self.computes += 1
        number = self.computes
        states = list(map(scheduler.tasks.get, tasks))
        if None in states:  # not expected: touched tasks are in the scheduler's state
            tasks = list(compress(tasks, states))
            states = list(filter(None, states))
        names = list(map(_TASK_GROUP_NAME, states))
        per_name = Counter(names)
        gid_of = self._task_group_ids(per_name, names, states)
        finished = list(map(_DONE.__contains__, map(_STATE, states)))
        self._entries(number, tasks, names, finished, gid_of)
        totals: dict[int, int] = {}
        for name, n in per_name.items():
            gid = gid_of[name]
            totals[gid] = totals.get(gid, 0) + n
        self._graphs.append(
            {
                "compute": number,
                "client": client,
                "keys": _graph_keys(keys),
                "totals": [[gid, totals[gid]] for gid in sorted(totals)],
            }
        )

    def _task_group_ids(
        self, per_name: Counter[str], names: list[str], states: list[Any]
    ) -> dict[str, int]:
        """Group id of each TaskGroup name (memoised; fused tasks named after layers)."""
        by_task_group = self._by_task_group
        new = per_name.keys() - by_task_group.keys()
        if new:
            example = dict(zip(names, states, strict=True))  # one task of each name
            for name in new:
                ts = example[name]
                by_task_group[name] = self._group_id(ts.key, getattr(ts, "run_spec", None))
        return {name: by_task_group[name] for name in per_name}

    def _group_id(self, key: Hashable, run_spec: Any = None) -> int:
        gid = self._groups.index(key, run_spec)
        grow = len(self._groups.groups) - len(self._occupancy)
        if grow > 0:
            self._occupancy.extend([0] * grow)
            self._occupancy_sent.extend([0] * grow)
        return gid

    def _entries(
        self,
        number: int,
        tasks: list[Hashable],
        names: list[str],
        finished: list[bool],
        gid_of: dict[str, int],
    ) -> None:
        """The graph's keys get its entries (C-level); its unfinished tasks are counted."""
        gids = set(gid_of.values())
        done_of = {gid: (number, gid, None, False) for gid in gids}
        compute_of = self._compute_of
        done_keys = list(compress(tasks, finished)) if any(finished) else []
        shared = compute_of.keys() & tasks
        if shared:
            shared.difference_update(done_keys)
            shared = self._count_for_earlier(shared)
        entry_of: dict[str, Entry] = {
            name: (number, gid, done_of[gid], False) for name, gid in gid_of.items()
        }
        compute_of.update(zip(tasks, map(entry_of.__getitem__, names), strict=True))
        if done_keys:
            entry_of = {name: done_of[gid] for name, gid in gid_of.items()}
            done_names = compress(names, finished)
            compute_of.update(zip(done_keys, map(entry_of.__getitem__, done_names), strict=True))
            for key in self._also.keys() & done_keys:
                del self._also[key]
        if shared:
            shared_of = {gid: (number, gid, done_of[gid], True) for gid in gids}
            for key in shared:
                compute_of[key] = shared_of[compute_of[key][_GID]]
        self._left[number] = len(tasks) - len(done_keys)
        self._left_changed.add(number)

    def _count_for_earlier(self, keys: set[Hashable]) -> set[Hashable]:
        """Of these keys of a new graph, those still to finish for an earlier compute: they
        count for it too (``_also``)."""
        compute_of, also, left = self._compute_of, self._also, self._left
        shared = set()
        for key in keys:
            entry = compute_of[key]
            if entry[_NEXT] is not None and entry[_COMPUTE] in left:
                also.setdefault(key, []).append(entry[_COMPUTE])
                shared.add(key)
        return shared

    # ------------------------------------------------------------ applying the notes
    def _settle(self) -> None:
        """Apply the notes of ``transition``, in order: a move after the tasks that left
        processing before it. Mostly by C-level ``map``/``zip`` over all of them at once;
        one at a time only around a task noted again after a move of it (it ran twice)."""
        ran, moved = self._ran, self._moved
        if not (ran or moved):
            return
        self._ran, self._moved = [], []
        keys = ran[0::RAN]
        last_note = dict(zip(keys, range(len(keys)), strict=True))
        in_order = len(last_note) < len(keys) or any(
            map(le, moved[3::MOVED], map(last_note.get, moved[0::MOVED], repeat(-1)))
        )
        if not in_order:
            self._finished(ran)
            for key, start, finish, _ in zip(*[iter(moved)] * MOVED, strict=True):
                self._moved_one(key, start, finish)
            return
        done = 0
        for key, start, finish, before in zip(*[iter(moved)] * MOVED, strict=True):
            for i in range(done, before):
                self._finished(ran[i * RAN : (i + 1) * RAN])
            done = max(done, before)
            self._moved_one(key, start, finish)
        for i in range(done, len(keys)):
            self._finished(ran[i * RAN : (i + 1) * RAN])

    def _finished(self, ran: list[Any]) -> None:
        """Tasks that left processing to memory or erred (RAN notes, each task once):
        their rows, their computes' counts, the bytes they hold."""
        keys = ran[0::RAN]
        found = list(map(self._compute_of.get, keys))
        if None in found:  # of no recorded graph (or, recording every client, of none seen)
            ran, keys, entries = self._recorded_only(ran, keys, found)
            if not keys:
                return
        else:
            entries = found  # type: ignore[assignment]
        ids = list(map(id, entries))
        distinct = dict(zip(ids, entries, strict=True))
        if any(e[_NEXT] is not None for e in distinct.values()):
            self._first_finish(keys, ids, distinct)
        extras = ran[5::RAN]
        kinds = set(map(type, extras))
        if str in kinds:  # erred ones: an error type instead of bytes
            errors = [x if type(x) is str else None for x in extras]
            sizes = [x if type(x) is int else 0 for x in extras]
        else:
            errors = [None] * len(keys)
            sizes = extras if kinds == {int} else [x if type(x) is int else 0 for x in extras]
        if self.record_cache:
            self._store(keys, ids, distinct, sizes, errors if str in kinds else None)
        if self.record_tasks:
            self._rows(keys, entries, ran, errors)

    def _recorded_only(
        self, ran: list[Any], keys: list[Any], found: list[Entry | None]
    ) -> tuple[list[Any], list[Any], list[Entry]]:
        """The notes of tasks of recorded graphs (recording every client: also of graphs
        not seen, as compute 0)."""
        kept: list[Any] = []
        kept_keys: list[Any] = []
        entries: list[Entry] = []
        for i, (key, seen) in enumerate(zip(keys, found, strict=True)):
            entry = seen if seen is not None else self._unseen(key)
            if entry is None:
                continue
            kept += ran[i * RAN : (i + 1) * RAN]
            kept_keys.append(key)
            entries.append(entry)
        return kept, kept_keys, entries

    def _first_finish(self, keys: list[Any], ids: list[int], distinct: dict[int, Entry]) -> None:
        """Entries of tasks finished for the first time give way; their computes count them."""
        after = {i: e if e[_NEXT] is None else e[_NEXT] for i, e in distinct.items()}
        self._compute_of.update(zip(keys, map(after.__getitem__, ids), strict=True))
        left, changed = self._left, self._left_changed
        for i, n in Counter(ids).items():
            entry = distinct[i]
            if entry[_NEXT] is None:
                continue
            number = entry[_COMPUTE]
            if number in left:
                left[number] -= n
                changed.add(number)
            if entry[_SHARED]:
                for key in compress(keys, map(i.__eq__, ids)):
                    self._count_also(key)

    def _store(
        self,
        keys: list[Any],
        ids: list[int],
        distinct: dict[int, Entry],
        sizes: list[int],
        errors: list[Any] | None,
    ) -> None:
        """Bytes of the tasks now in memory, per key and per group."""
        if errors is not None:
            ok = list(map(is_, errors, repeat(None)))
            keys, ids, sizes = (
                list(compress(keys, ok)),
                list(compress(ids, ok)),
                list(compress(sizes, ok)),
            )
        self._held.update(zip(keys, sizes, strict=True))
        occupancy = self._occupancy
        if len(distinct) == 1:
            occupancy[next(iter(distinct.values()))[_GID]] += sum(sizes)
            return
        for i, entry in distinct.items():
            occupancy[entry[_GID]] += sum(compress(sizes, map(i.__eq__, ids)))

    def _rows(
        self, keys: list[Any], entries: list[Entry], ran: list[Any], errors: list[Any]
    ) -> None:
        """The batch's task rows (at most ``max_pending``; more are counted as dropped)."""
        columns = self._columns
        room = self.max_pending - len(columns["key"])
        n = len(keys)
        if n > room:
            self.dropped += n - max(room, 0)
            if room <= 0:
                return
            keys, entries, errors, ran = (
                keys[:room],
                entries[:room],
                errors[:room],
                ran[: room * RAN],
            )
        submits, begins, ends = ran[1::RAN], ran[3::RAN], ran[4::RAN]
        if None in submits or None in begins:  # processing before recording began; no span
            self._rows_one_by_one(keys, entries, ran, errors)
            return
        columns["key"] += keys
        columns["group"] += map(itemgetter(_GID), entries)
        columns["worker"] += ran[2::RAN]
        columns["submit"] += submits
        columns["start"] += begins
        columns["stop"] += ends
        columns["error"] += errors
        columns["compute"] += map(itemgetter(_COMPUTE), entries)

    def _rows_one_by_one(
        self, keys: list[Any], entries: list[Entry], ran: list[Any], errors: list[Any]
    ) -> None:
        columns = self._columns
        for i, (key, entry, error) in enumerate(zip(keys, entries, errors, strict=True)):
            _, submit, wid, begin, end, _ = ran[i * RAN : (i + 1) * RAN]
            if submit is None:
                continue  # no row: already processing when recording began
            if begin is None:
                begin = end = submit
            for field, value in zip(
                TASK_FIELDS,
                (key, entry[_GID], wid, submit, begin, end, error, entry[_COMPUTE]),
                strict=True,
            ):
                columns[field].append(value)

    def _moved_one(self, key: Hashable, start: str, finish: str) -> None:
        """Any other transition: bytes released, tasks finished without running here."""
        if finish == "forgotten":
            entry = self._compute_of.pop(key, None)
        else:
            entry = self._compute_of.get(key)
        if entry is None:
            return
        if start == "memory" and self.record_cache:
            size = self._held.pop(key, None)
            if size:
                self._occupancy[entry[_GID]] -= size
        if entry[_NEXT] is not None:
            # released or forgotten before it ran, erred with a dependency, in memory
            if finish != "forgotten":
                self._compute_of[key] = entry[_NEXT]
            left, number = self._left, entry[_COMPUTE]
            if number in left:
                left[number] -= 1
                self._left_changed.add(number)
            if entry[_SHARED]:
                self._count_also(key)

    def _count_also(self, key: Hashable) -> None:
        """A shared task finished: the earlier computes counting it too count it off."""
        left, changed = self._left, self._left_changed
        for other in self._also.pop(key, ()):
            if other in left:
                left[other] -= 1
                changed.add(other)

    def _unseen(self, key: Hashable) -> Entry | None:
        """Entry of a task of no graph seen (recording every client: compute 0), kept."""
        if self.clients is not None:
            return None
        ts = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        name = getattr(getattr(ts, "group", None), "name", None)
        gid = self._by_task_group.get(name) if name is not None else None
        if gid is None:
            gid = self._group_id(key, getattr(ts, "run_spec", None))
            if name is not None:
                self._by_task_group[name] = gid
        entry = self._compute_of[key] = (0, gid, None, False)
        return entry

    def _worker_id(self, address: Any, thread: Any) -> int:
        ident = (address, thread)
        wid = self._workers.get(ident)
        if wid is None:
            address = address if isinstance(address, str) else ""
            index = self._threads_per_worker.get(address, 0)
            self._threads_per_worker[address] = index + 1
            wid = self._workers[ident] = len(self._worker_labels)
            self._worker_labels.append(worker_label(address, index))
            if address not in self._worker_info:
                self._worker_info[address] = self._describe_worker(address)
        return wid

    def _describe_worker(self, address: str) -> dict[str, Any]:
        ws = self.scheduler.workers.get(address) if self.scheduler is not None else None
        if ws is None:
            return {}
        return {
            "name": str(ws.name),
            "host": str(ws.host),
            "pid": int(ws.pid),
            "nthreads": int(ws.nthreads),
            "memory_limit": int(ws.memory_limit or 0),
        }

    # ------------------------------------------------------------ batches
    def batch(self) -> dict[str, Any] | None:
        """The message holding everything new since the previous batch (None: nothing)."""
        self._settle()
        self._prune()
        groups = self._groups.groups
        cache = self._cache_rows()
        if not (
            self._columns["key"]
            or cache["group"]
            or self._graphs
            or self._left_changed
            or (self.error and not self._error_sent)
            or len(groups) > self._groups_sent
            or self.seq == 0
        ):
            return None
        tasks, self._columns = self._columns, {f: [] for f in TASK_FIELDS}
        tasks["key"] = _labels(tasks["key"])
        now = time()
        cache["time"] = [now] * len(cache["group"])
        msg: dict[str, Any] = {
            "v": MESSAGE_VERSION,
            "src": "scheduler",
            "seq": self.seq,
            "now": now,
            "groups": groups[self._groups_sent :],
            "workers": self._worker_labels[self._workers_sent :],
            "worker_info": self._worker_info,
            "tasks": tasks,
            "cache": cache,
            "graphs": self._graphs,
            "pending": self._pending(),
            "computes": self.computes,
            "dropped": self.dropped,
            "error": None if self._error_sent else self.error,
        }
        self._error_sent = self.error is not None
        self.seq += 1
        self._groups_sent, self._workers_sent = len(groups), len(self._worker_labels)
        self._worker_info = {}
        self._graphs = []
        return msg

    def _prune(self) -> None:
        """Forget the entries of keys the scheduler forgot (not noted one by one: keys
        forgotten from memory are not when bytes held are not followed). Runs when the
        entries doubled since the last time: O(1) per key."""
        compute_of = self._compute_of
        if len(compute_of) < self._prune_at or self.scheduler is None:
            return
        known = self.scheduler.tasks.keys()
        for key in compute_of.keys() - known:
            del compute_of[key]
        for key in self._also.keys() - known:
            del self._also[key]
        self._prune_at = max(PRUNE_MIN, 2 * len(compute_of))

    def _pending(self) -> dict[int, int]:
        """``{compute: tasks not finished}`` of the computes that changed; a compute sent
        with 0 is forgotten."""
        left = self._left
        out = {number: max(0, left[number]) for number in sorted(self._left_changed)}
        self._left_changed = set()
        for number, n in out.items():
            if n == 0:
                del left[number]
        return out

    def _cache_rows(self) -> dict[str, list[Any]]:
        """Bytes held by each group that changed since the previous batch (no times yet)."""
        occupancy, sent = self._occupancy, self._occupancy_sent
        if not self.record_cache or occupancy == sent:
            return {"time": [], "group": [], "metric": []}
        changed = [g for g, (a, b) in enumerate(zip(occupancy, sent, strict=True)) if a != b]
        self._occupancy_sent = list(occupancy)
        return {"time": [], "group": changed, "metric": [occupancy[g] for g in changed]}

    def flush(self) -> None:
        """Publish a batch if there is anything new (runs every ``flush`` seconds)."""
        try:
            msg = self.batch()
            if msg is not None:
                self.scheduler.log_event(self.topic, msg)
        except Exception as exc:
            self._fail(exc)
        if self.off and self._error_sent:
            self._stop_callback()  # switched off and the client told: nothing more to send

    def final(self) -> dict[str, Any] | None:
        """Stop recording and return the last batch (to the client, not through the log)."""
        self._stop_callback()
        msg = self.batch()
        if msg is not None:
            msg["final"] = True
        self._switch_off()
        return msg

    def _stop_callback(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback.stop()

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = f"scheduler plugin: {exc!r}"
        self._switch_off()

    def _switch_off(self) -> None:
        """Nothing more is recorded; what is held per key is let go."""
        self.off = True
        self.__dict__["transition"] = _ignore  # found before the method
        self._submit, self._ran, self._moved = {}, [], []
        self._compute_of, self._held, self._also = {}, {}, {}


def _ignore(*args: Any, **kwargs: Any) -> None:
    """``transition`` of a probe switched off."""


def _labels(keys: list[Any]) -> list[str]:
    """Key labels (``key_label``), without a Python call per key for string keys."""
    if set(map(type, keys)) <= {str}:
        return keys
    return list(map(key_label, keys))


def _graph_keys(keys: Any) -> list[str]:
    """Labels of the (up to) ``GRAPH_KEYS`` smallest requested keys, sorted."""
    keys = list(keys or ())
    labels = keys if set(map(type, keys)) <= {str} else map(key_label, keys)
    return heapq.nsmallest(GRAPH_KEYS, labels)


def _compute_span(startstops: Any) -> tuple[Any, Any]:
    """(start, stop) of the last ``compute`` entry of a task's ``startstops`` (or Nones)."""
    for entry in reversed(startstops or ()):
        if entry.get("action") == "compute":
            return float(entry["start"]), float(entry["stop"])
    return None, None


# ---------------------------------------------------------------- run_on_scheduler helpers
def scheduler_clock() -> tuple[float, str]:
    """The scheduler's clock (``distributed.metrics.time``) and host name."""
    return time(), socket.gethostname()


def finish_probe(dask_scheduler: Any, name: str) -> dict[str, Any] | None:
    """Stop the probe ``name`` and return its last batch; it stays registered."""
    probe = dask_scheduler.plugins.get(name)
    if not isinstance(probe, SchedulerProbe):
        return None
    return probe.final()


async def forget_topic(dask_scheduler: Any, topic: str, client: str, wait: float = 2.0) -> bool:
    """Drop the run's event topic from the scheduler's event log (nothing left behind).

    The client's unsubscription travels on another channel than this call: wait (up to
    ``wait`` seconds) for it first, or it would create the topic again.
    """
    broker = getattr(dask_scheduler, "_broker", None)
    topics = getattr(broker, "_topics", None)
    if not isinstance(topics, dict):
        if broker is not None:
            broker.truncate(topic)
        return False
    deadline = time() + wait
    while client in getattr(topics.get(topic), "subscribers", ()) and time() < deadline:
        await asyncio.sleep(0.005)
    return topics.pop(topic, None) is not None
