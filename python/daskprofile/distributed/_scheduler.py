"""Scheduler side: a plugin that records tasks as they finish and streams them in batches.

This is the plugin for workers without daskprofile (the fallback): when every worker takes
daskprofile's worker plugin, the workers measure the rows and :class:`~._scheduler_graphs.
GraphProbe` (a subclass with no ``transition`` hook) only numbers graphs.

Runs inside the scheduler's event loop. Every ``flush`` seconds what was gathered since
the previous batch is published with ``Scheduler.log_event`` on the run's topic, which the
client subscribed to, packed to bytes (:func:`~._common.pack`: forwarded as they are;
``final`` returns the last one directly). Nothing here ever raises
into the scheduler: the first error switches the plugin off and is sent in the next batch.

The per-task work is kept as small as the data allows (distributed's own
``TaskStreamPlugin``, the measure, keeps each finished task's kwargs dict and nothing
else; ``benchmarks/bench_distributed.py`` compares the two). The scheduler does much work
of its own between two calls, so whatever dictionary of ours a call touches has left the
CPU's caches: each call touches as little as it can, and the rest is done per batch, for
all its tasks at once, by C-level ``map``/``zip``.

* ``transition`` (about six calls per task) returns at once for the states a task passes
  through on its way to running, checked first. Otherwise it keeps the time a task becomes
  ``processing`` in a small dict (tasks processing only); when the task leaves
  ``processing`` to ``memory`` or ``erred`` it reads what is needed of the kwargs (worker,
  thread, the last ``compute`` start/stop of ``startstops``, ``nbytes`` or the error type)
  while the scheduler still has them at hand, and appends that flat to a list (no tuple
  kept for the garbage collector to follow). Other transitions (released, forgotten, ...)
  are appended flat to a second list; none for tasks finished already, nor for bytes
  released when the cache is not recorded (the keys of tasks forgotten are then pruned
  from time to time). Each note carries the number of graphs seen so far: a key's entry
  given by a later graph does not concern it.
* ``update_graph`` (once per graph of a recorded client) numbers the graph (its
  *compute*) and reads each touched task's group (from its ``TaskGroup`` name, resolved
  once per name) and whether it has finished already, by C-level ``map``. The graph is
  applied with the batch, before the transitions noted after it; a graph touching keys
  seen before first applies what was noted until then.
* ``flush`` applies the graphs (each key gets an entry ``[compute, group id, ...]`` shared
  by the keys of one graph and group; the computes' counts) and the notes, in order (one
  at a time only around a task that ran twice), then sends the batch. At most
  ``max_pending`` notes wait: more are applied at once.

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
                 "totals": [[0, 10]],
                 "spans": [[0, ["load", "clean"]]],     # only when tasks are in spans
                 "edges": [[1, 2], [0, 0]],             # only when tasks wait for others
                 "edge_keys": ["x-ab-0", ...]}],        # (the keys ``edges`` index)
     "pending": {4: 3},             # compute -> its tasks not finished yet (changed ones)
     "computes": 4, "dropped": 0, "error": None,
     "exceptions": {"('x-1a2b', 0)": ["ValueError('bad')", "  File ..."]}}  # if any failed

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
forgotten. ``spans`` (only for graphs with tasks in a span: distributed's ``span`` or
``daskprofile.span``): the span names of each group id, from its ``TaskGroup``'s span.
``edges`` (only for graphs whose tasks wait for others): ``[tasks, dependencies]``,
positions in ``edge_keys`` (the graph's keys, then those of dependencies computed
before): the dependency edges as the scheduler holds them, read once per graph
(:func:`graph_edges`), so the client never materializes a graph again to learn them.
``exceptions`` (only when tasks raised): each failed task's ``exception_text`` (the
exception's repr) and ``traceback_text`` by key label, cut to a few KB (at most
:data:`MAX_TEXTS` per batch); kept from the ``erred`` transition until the task's row is
made, so tasks that do not fail cost nothing more.

Cluster tables (:mod:`._scheduler_tables`, only when there is something): ``members``
(workers present, joining, leaving: ``add_worker``/``remove_worker``, never per task),
``actions`` (tasks' non-compute ``startstops``, only once ``enable_actions`` asked for
them: workers without daskprofile), ``tables_error``.
"""

from __future__ import annotations

import asyncio
import heapq
import socket
from collections import Counter
from collections.abc import Hashable, Iterable
from contextlib import suppress
from itertools import compress, repeat
from operator import attrgetter, gt, is_, is_not, itemgetter, le
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time
from tornado.ioloop import PeriodicCallback

from ..failures import MESSAGE_CHARS, TRACEBACK_CHARS, cut
from ..keys import GroupIndex, key_label
from ._common import (
    LOCAL_SINKS,
    MESSAGE_VERSION,
    exception_name,
    killed_text,
    pack,
    worker_label,
)
from ._scheduler_tables import SchedulerTables

__all__ = [
    "SchedulerProbe",
    "await_subscriber",
    "finish_probe",
    "forget_topic",
    "scheduler_clock",
]

#: task columns of a batch, in order
TASK_FIELDS = ("key", "group", "worker", "submit", "start", "stop", "error", "compute")
#: output keys whose labels identify a graph (the smallest few, sorted)
GRAPH_KEYS = 3
#: keys with an entry before those forgotten by the scheduler are looked for
PRUNE_MIN = 10_000
#: failed tasks whose exception texts one batch carries, at most
MAX_TEXTS = 1_000

#: states a task passes through on its way to running (nothing to note)
_ON_THE_WAY = frozenset({"waiting", "queued", "no-worker"})
#: states of a finished task
_DONE = frozenset({"memory", "erred"})

_TASK_GROUP_NAME = attrgetter("group.name")
_TASK_GROUP = attrgetter("group")
_STATE = attrgetter("state")
_DEPENDENCIES = attrgetter("dependencies")

#: a task that left processing, noted flat (no tuple the garbage collector would follow):
#: key, submit time, worker, thread, compute start, compute stop, nbytes (memory) | error
#: type, graphs numbered so far (an entry of a later graph is not of this run)
RAN = 8
#: another transition, noted flat: key, start, finish, how many RAN slots came before it,
#: graphs numbered so far
MOVED = 5

# A key's entry: a list [compute, group id, next, shared] shared by the keys of one graph
# and group. ``next`` is the entry that replaces it once the task has finished (itself once
# it has); ``shared``: earlier computes count the task too (``SchedulerProbe._also``).
_COMPUTE, _GID, _NEXT, _SHARED = 0, 1, 2, 3
Entry = list[Any]
_COMPUTE_OF, _GID_OF, _NEXT_OF, _SHARED_OF = map(itemgetter, (_COMPUTE, _GID, _NEXT, _SHARED))


def _entry(number: int, gid: int, shared: bool = False) -> tuple[Entry, Entry]:
    """A graph's entry for the tasks of one group (to finish), and its finished one."""
    done: Entry = [number, gid, None, False]
    done[_NEXT] = done
    return [number, gid, done, shared], done


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
        owner: str | None = None,
    ) -> None:
        self.topic = topic
        #: the recording's client: when it leaves the scheduler, the plugins go too
        self.owner = owner
        self.clients = None if clients is None else set(clients)
        self.record_tasks = tasks
        self.record_cache = cache
        self.flush_interval = flush
        self.max_pending = max_pending
        self._reset()

    def __getstate__(self) -> dict[str, Any]:
        keep = ("topic", "clients", "record_tasks", "record_cache", "flush_interval")
        return {k: self.__dict__[k] for k in (*keep, "max_pending", "owner")}

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
        # noted by ``transition`` and ``update_graph``, applied in order by ``_settle``
        self._submit: dict[Hashable, float] = {}  # tasks processing: since when
        self._ran: list[Any] = []  # RAN slots per task
        self._moved: list[Any] = []  # MOVED slots per transition
        self._ran_max = RAN * self.max_pending
        self._moved_max = MOVED * self.max_pending
        self._graphs_noted: list[tuple[Any, ...]] = []
        self._keys_noted: set[Hashable] = set()  # their keys
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
        # failed tasks: (exception_text, traceback_text) until their row is made, then the
        # batch's texts by key label (only tasks that raised pay for this)
        self._failed: dict[Hashable, tuple[Any, Any]] = {}
        self._texts: dict[str, list[str]] = {}
        self._graph_spans: dict[int, list[list[Any]]] = {}  # graph -> [[TaskGroup, names]]
        self._occupancy: list[int] = []  # bytes held per group id
        self._occupancy_sent: list[int] = []
        self._callback: PeriodicCallback | None = None
        self._removal: asyncio.Task[None] | None = None
        #: (event loop, handler) of a client in this process (see ``LOCAL_SINKS``)
        self._sink: tuple[Any, Any] | None = None
        #: workers joining and leaving; actions when workers lack daskprofile
        self.tables = SchedulerTables()

    # ------------------------------------------------------------ scheduler hooks
    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._callback = PeriodicCallback(self._tick, self.flush_interval * 1000)
        self._callback.start()
        self.tables.start(scheduler)
        # the client in this process, not subscribed: it gets the topic's events from here,
        # those logged before this plugin first (the workers' first messages); no await
        # from here until the scheduler adds the plugin, so none comes in between
        self._sink = LOCAL_SINKS.get(self.topic)
        if self._sink is not None:
            loop, handler = self._sink
            for event in list(scheduler.get_events(self.topic)):
                loop.add_callback(handler, event)

    def log_event(self, topic: str, msg: Any) -> None:
        """Every event the scheduler logs (any topic): this run's go to a local client."""
        sink = self._sink
        if sink is not None and topic == self.topic:
            try:
                sink[0].add_callback(sink[1], (time(), msg))
            except Exception as exc:  # a closed loop: the client is gone
                self._sink = None
                self._fail(exc)

    # workers joining and leaving (once per worker, never per task): see _scheduler_tables
    def add_worker(self, scheduler: Any, worker: str) -> None:
        self.tables.joined(scheduler, worker)

    def remove_worker(
        self, scheduler: Any, worker: str, *, stimulus_id: str | None = None, **kw: Any
    ) -> None:
        self.tables.left(scheduler, worker, stimulus_id)

    def remove_client(self, scheduler: Any, client: str) -> None:
        """The recording's client left without removing the plugins (its process died, or
        it was closed from an event loop): remove them and the topic, so nothing stays."""
        if self.owner is None or client != self.owner or self._removal is not None:
            return
        self.off = True
        self._stop_callback()
        try:
            self._removal = asyncio.get_running_loop().create_task(
                remove_probe(scheduler, self.topic)
            )
        except Exception as exc:
            self._fail(exc)

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
            if (kw.get("annotations") or {}).get("span"):  # tasks in spans: per TaskGroup
                self._graph_spans[self.computes + 1] = group_spans(scheduler, tasks)
            self._note_graph(scheduler, str(client), tasks, keys)
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
                    text = kw.get("exception_text") or killed_text(key, kw)
                    extra = exception_name(text)
                    self._failed[key] = (text, kw.get("traceback_text"))
                else:
                    return  # released: it runs again later, or is forgotten
                # what is needed of the kwargs, read while the CPU has them at hand
                try:
                    last = kw["startstops"][-1]
                    if last["action"] == "compute":
                        begin, end = last["start"], last["stop"]
                    else:
                        begin, end = _compute_span(kw["startstops"])
                    worker, thread = kw["worker"], kw["thread"]
                except (KeyError, IndexError, TypeError):  # erred where no worker ran it
                    begin, end = _compute_span(kw.get("startstops"))
                    worker, thread = kw.get("worker"), kw.get("thread")
                ran = self._ran
                ran.extend((key, submit, worker, thread, begin, end, extra, self.computes))
                if len(ran) >= self._ran_max:
                    self._settle()
            elif start == "erred" or (start == "memory" and not self.record_cache):
                return  # finished already; entries of keys forgotten are pruned later
            else:
                if start == "released":  # perhaps from processing, passing through released
                    self._submit.pop(key, None)
                moved = self._moved
                moved.extend((key, start, finish, len(self._ran), self.computes))
                if len(moved) >= self._moved_max:
                    self._settle()
        except Exception as exc:
            self._fail(exc)

    # ------------------------------------------------------------ graphs
    def _note_graph(self, scheduler: Any, client: str, tasks: list[Hashable], keys: Any) -> None:
        """Number a graph and read what its tasks are now (group, finished or not); the rest
        waits for the next ``_settle``, which applies graphs before the transitions noted
        after them."""
        states = list(map(scheduler.tasks.get, tasks))
        if any(map(is_, states, repeat(None))):  # not expected (C-level: no __eq__ calls)
            tasks = list(compress(tasks, states))
            states = list(filter(None, states))
        gids = self._group_ids(states)
        finished = list(map(_DONE.__contains__, map(_STATE, states)))
        fresh = self._compute_of.keys().isdisjoint(tasks) and self._keys_noted.isdisjoint(tasks)
        if not fresh and (self._ran or self._moved or self._graphs_noted):
            self._settle()  # keys seen before: what happened to them first
        self.computes += 1
        done = finished if any(finished) else None
        edges = graph_edges(tasks, states)
        noted = (self.computes, client, tasks, gids, done, keys, fresh, edges)
        self._graphs_noted.append(noted)
        self._keys_noted.update(tasks)
        if len(self._graphs_noted) >= self.max_pending:
            self._settle()

    def _group_ids(self, states: list[Any]) -> int | list[int]:
        """Group id of each task (one int when they share a ``TaskGroup``: submit, map, a
        layer), memoised per ``TaskGroup`` name (fused tasks are named after their layers)."""
        names = list(map(_TASK_GROUP_NAME, states))
        by_task_group = self._by_task_group
        if names and names.count(names[0]) == len(names):
            gid = by_task_group.get(names[0])
            if gid is None:
                gid = by_task_group[names[0]] = self._task_group_id(states[0])
            return gid
        new = set(names) - by_task_group.keys()
        if new:
            example = dict(zip(names, states, strict=True))  # one task of each name
            for name in new:
                by_task_group[name] = self._task_group_id(example[name])
        return list(map(by_task_group.__getitem__, names))

    def _task_group_id(self, ts: Any) -> int:
        return self._group_id(ts.key, getattr(ts, "run_spec", None))

    def _apply_graphs(self) -> None:
        noted, self._graphs_noted = self._graphs_noted, []
        self._keys_noted = set()
        for graph in noted:
            self._graph(graph)

    def _graph(self, graph: tuple[Any, ...]) -> None:
        """A graph noted: its keys get its entries, its tasks are counted and described."""
        number, client, tasks, gids, finished, keys, fresh, edges = graph
        if type(gids) is int and finished is None and fresh:  # one group, all to run
            self._compute_of.update(zip(tasks, repeat(_entry(number, gids)[0])))
            self._left[number] = len(tasks)
            self._left_changed.add(number)
            totals = [[gids, len(tasks)]]
        else:
            self._entries(number, tasks, gids, finished)
            if type(gids) is int:
                totals = [[gids, len(tasks)]]
            else:
                totals = [[gid, n] for gid, n in sorted(Counter(gids).items())]
        graph_info = {"compute": number, "client": client, "keys": _graph_keys(keys)}
        spans = self._graph_spans.pop(number, None)
        if spans:  # [[group id, span names]]
            by_name = self._by_task_group
            graph_info["spans"] = [[by_name[n], names] for n, names in spans if n in by_name]
        if edges is not None:
            graph_info["edges"] = edges["edges"]
            graph_info["edge_keys"] = [*tasks, *edges["edge_extra"]]
        self._graphs.append(graph_info | {"totals": totals})

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
        gids: int | list[int],
        finished: list[bool] | None,
    ) -> None:
        """The graph's keys get its entries (C-level); its unfinished tasks are counted."""
        per_task: list[int] = []
        if isinstance(gids, int):
            single, distinct = gids, {gids}
        else:
            single, per_task, distinct = -1, gids, set(gids)
        pairs = {gid: _entry(number, gid) for gid in distinct}
        entry_of = {gid: pair[0] for gid, pair in pairs.items()}
        done_of = {gid: pair[1] for gid, pair in pairs.items()}
        compute_of = self._compute_of
        finished = finished or []
        done_keys = list(compress(tasks, finished))
        shared = compute_of.keys() & tasks
        if shared:
            shared.difference_update(done_keys)
            shared = self._count_for_earlier(shared)
        if per_task:
            compute_of.update(zip(tasks, map(entry_of.__getitem__, per_task), strict=True))
        else:
            compute_of.update(zip(tasks, repeat(entry_of[single])))
        if done_keys:
            done_gids = compress(per_task, finished) if per_task else repeat(single)
            compute_of.update(zip(done_keys, map(done_of.__getitem__, done_gids), strict=False))
            for key in self._also.keys() & done_keys:
                del self._also[key]
        if shared:
            shared_of = {gid: [number, gid, done, True] for gid, done in done_of.items()}
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
            if entry[_NEXT] is not entry and entry[_COMPUTE] in left:
                also.setdefault(key, []).append(entry[_COMPUTE])
                shared.add(key)
        return shared

    # ------------------------------------------------------------ applying the notes
    def _settle(self) -> None:
        """Apply the notes of ``transition``, in order: a move after the tasks that left
        processing before it. Mostly by C-level ``map``/``zip`` over all of them at once;
        one at a time only around a task noted again after a move of it (it ran twice)."""
        if self._graphs_noted:
            self._apply_graphs()
        ran, moved = self._ran, self._moved
        if not (ran or moved):
            return
        self._ran, self._moved = [], []
        keys = ran[0::RAN]
        last_note = dict(zip(keys, range(0, len(ran), RAN), strict=True))  # key -> its slot
        in_order = len(last_note) < len(keys) or any(
            map(le, moved[3::MOVED], map(last_note.get, moved[0::MOVED], repeat(-1)))
        )
        if not in_order:
            if ran:
                self._finished(ran, keys, 0, len(keys))
            if moved:
                self._moved_all(moved)
            return
        done = 0  # notes of ``ran`` applied
        for key, start, finish, before, seen in zip(*[iter(moved)] * MOVED, strict=True):
            for i in range(done, before // RAN):
                self._finished(ran, keys, i, i + 1)
            done = max(done, before // RAN)
            self._moved_one(key, start, finish, seen)
        for i in range(done, len(keys)):
            self._finished(ran, keys, i, i + 1)

    def _finished(self, ran: list[Any], keys: list[Any], first: int, stop: int) -> None:
        """Tasks that left processing to memory or erred (the RAN notes ``first`` to
        ``stop`` of ``ran``, keys ``keys``; each task once): their rows, their computes'
        counts, the bytes they hold."""
        if first or stop < len(keys):
            ran, keys = ran[first * RAN : stop * RAN], keys[first:stop]
        entries: list[Any] = list(map(self._compute_of.get, keys))
        if _stale(entries, ran[7::RAN]):
            ran, keys, entries = self._recorded_only(ran, keys, entries)
            if not keys:
                return
        self._first_finish(keys, entries)
        extras = ran[6::RAN]
        kinds = set(map(type, extras))
        if str in kinds:  # erred ones: an error type instead of bytes
            errors = [x if type(x) is str else None for x in extras]
            sizes = [x if type(x) is int else 0 for x in extras]
        else:
            errors = [None] * len(keys)
            sizes = extras if kinds == {int} else [x if type(x) is int else 0 for x in extras]
        if self.record_cache:
            self._store(keys, entries, sizes, errors if str in kinds else None)
        if self.record_tasks:
            self._rows(keys, entries, ran, errors)
            if str in kinds:
                self._note_texts(keys, errors)

    def _recorded_only(
        self, ran: list[Any], keys: list[Any], found: list[Entry | None]
    ) -> tuple[list[Any], list[Any], list[Entry]]:
        """The notes of tasks of recorded graphs (recording every client: also of graphs
        not seen, as compute 0); not those of an entry given after the task ran (the key
        ran for a client not recorded, then a recorded graph took it up)."""
        kept: list[Any] = []
        kept_keys: list[Any] = []
        entries: list[Entry] = []
        for i, (key, known, seen) in enumerate(zip(keys, found, ran[7::RAN], strict=True)):
            entry = known if known is not None else self._unseen(key)
            if entry is None or entry[_COMPUTE] > seen:
                continue
            kept += ran[i * RAN : (i + 1) * RAN]
            kept_keys.append(key)
            entries.append(entry)
        return kept, kept_keys, entries

    def _first_finish(self, keys: list[Any], entries: list[Entry], gone: bool = False) -> None:
        """The tasks that finished for the first time: their entries give way to finished
        ones (unless ``gone``: the keys were forgotten); their computes count them off."""
        nexts = list(map(_NEXT_OF, entries))
        first = list(map(is_not, nexts, entries))
        if not any(first):
            return
        if not gone:
            self._compute_of.update(zip(keys, nexts, strict=True))
        opened = list(compress(entries, first))
        left, changed = self._left, self._left_changed
        for number, n in Counter(map(_COMPUTE_OF, opened)).items():
            if number in left:
                left[number] -= n
                changed.add(number)
        if any(map(_SHARED_OF, opened)):
            for key, entry in zip(compress(keys, first), opened, strict=True):
                if entry[_SHARED]:
                    self._count_also(key)

    def _moved_all(self, moved: list[Any]) -> None:
        """MOVED notes: by C-level ``map`` per kind of move, unless a key moved twice."""
        keys = moved[0::MOVED]
        if len(set(keys)) < len(keys):
            for key, start, finish, _, seen in zip(*[iter(moved)] * MOVED, strict=True):
                self._moved_one(key, start, finish, seen)
            return
        kinds = list(zip(moved[1::MOVED], moved[2::MOVED], strict=True))
        seen = moved[4::MOVED]
        for kind in set(kinds):
            if len(kinds) > 1:
                pick = list(map(kind.__eq__, kinds))
                self._moved_many(list(compress(keys, pick)), *kind, list(compress(seen, pick)))
            else:
                self._moved_many(keys, *kind, seen)

    def _moved_many(self, keys: list[Any], start: str, finish: str, seen: list[int]) -> None:
        """Keys (each once) moved from ``start`` to ``finish`` outside processing; ``seen``:
        graphs numbered when each moved (an entry of a later graph is not concerned)."""
        compute_of = self._compute_of
        entries: list[Any] = list(map(compute_of.get, keys))
        if _stale(entries, seen):
            keep = [e is not None and e[_COMPUTE] <= s for e, s in zip(entries, seen, strict=True)]
            keys, entries = list(compress(keys, keep)), list(compress(entries, keep))
            if not keys:
                return
        gone = finish == "forgotten"
        if gone:
            list(map(compute_of.pop, keys))
        if start == "memory" and self.record_cache:
            sizes = list(map(self._held.pop, keys, repeat(0)))
            occupancy = self._occupancy
            for gid, size in _sums(entries, sizes).items():
                occupancy[gid] -= size
        # released or forgotten before it ran, erred with a dependency, in memory
        self._first_finish(keys, entries, gone)

    def _store(
        self, keys: list[Any], entries: list[Entry], sizes: list[int], errors: list[Any] | None
    ) -> None:
        """Bytes of the tasks now in memory, per key and per group."""
        if errors is not None:
            ok = list(map(is_, errors, repeat(None)))
            keys, entries = list(compress(keys, ok)), list(compress(entries, ok))
            sizes = list(compress(sizes, ok))
        self._held.update(zip(keys, sizes, strict=True))
        occupancy = self._occupancy
        for gid, size in _sums(entries, sizes).items():
            occupancy[gid] += size

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
        submits, begins = ran[1::RAN], ran[4::RAN]
        if None in submits or None in begins:  # processing before recording began; no span
            self._rows_one_by_one(keys, entries, ran, errors)
            return
        idents = list(zip(ran[2::RAN], ran[3::RAN], strict=True))
        wids = list(map(self._workers.get, idents))
        if None in wids:
            wids = [self._worker_id(*ident) for ident in idents]
        columns["key"] += keys
        columns["group"] += map(_GID_OF, entries)
        columns["worker"] += wids
        columns["submit"] += submits
        columns["start"] += begins
        columns["stop"] += ran[5::RAN]
        columns["error"] += errors
        columns["compute"] += map(_COMPUTE_OF, entries)

    def _note_texts(self, keys: list[Any], errors: list[Any]) -> None:
        """The exception and traceback texts of the failed tasks among these, for the
        batch (cut; at most ``MAX_TEXTS`` per batch)."""
        failed, texts = self._failed, self._texts
        for key, error in zip(keys, errors, strict=True):
            found = failed.pop(key, None) if error is not None else None
            if found is not None and len(texts) < MAX_TEXTS:
                text, trace = (t if isinstance(t, str) else "" for t in found)
                texts[key_label(key)] = [cut(text, MESSAGE_CHARS), cut(trace, TRACEBACK_CHARS)]

    def _rows_one_by_one(
        self, keys: list[Any], entries: list[Entry], ran: list[Any], errors: list[Any]
    ) -> None:
        columns = self._columns
        for i, (key, entry, error) in enumerate(zip(keys, entries, errors, strict=True)):
            _, submit, worker, thread, begin, end, _, _ = ran[i * RAN : (i + 1) * RAN]
            if submit is None:
                continue  # no row: already processing when recording began
            if begin is None:
                begin = end = submit
            row = (key, entry[_GID], self._worker_id(worker, thread), submit, begin, end)
            for field, value in zip(TASK_FIELDS, (*row, error, entry[_COMPUTE]), strict=True):
                columns[field].append(value)

    def _moved_one(self, key: Hashable, start: str, finish: str, seen: int) -> None:
        """Any other transition: bytes released, tasks finished without running here;
        ``seen``: graphs numbered when it moved (an entry of a later graph is not concerned)."""
        entry = self._compute_of.get(key)
        if entry is None or entry[_COMPUTE] > seen:
            return
        if finish == "forgotten":
            del self._compute_of[key]
        if start == "memory" and self.record_cache:
            size = self._held.pop(key, None)
            if size:
                self._occupancy[entry[_GID]] -= size
        if entry[_NEXT] is not entry:
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
        entry = self._compute_of[key] = _entry(0, gid)[1]
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
    def batch(self, force: bool = False) -> dict[str, Any] | None:
        """The message holding everything new since the previous batch (None: nothing,
        unless ``force``)."""
        self._settle()
        self._failed.clear()  # of tasks whose rows were not made (not recorded)
        self._prune()
        groups = self._groups.groups
        cache = self._cache_rows()
        more = self.tables.drain(self.scheduler) or {}  # members, actions (_scheduler_tables)
        more.update(self._extras())
        if not (
            more
            or self._columns["key"]
            or cache["group"]
            or self._graphs
            or self._left_changed
            or (self.error and not self._error_sent)
            or len(groups) > self._groups_sent
            or self.seq == 0
            or force
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
        if self._texts:  # failed tasks' texts by key label (absent when none failed)
            msg["exceptions"], self._texts = self._texts, {}
        if more:
            msg.update(more)
        self._error_sent = self.error is not None
        self.seq += 1
        self._groups_sent, self._workers_sent = len(groups), len(self._worker_labels)
        self._worker_info = {}
        self._graphs = []
        return msg

    def _extras(self) -> dict[str, Any]:
        """More of the batch, from a subclass (sent when not empty)."""
        return {}

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
                self.scheduler.log_event(self.topic, pack(msg))
        except Exception as exc:
            self._fail(exc)
        if self.off and self._error_sent:
            self._stop_callback()  # switched off and the client told: nothing more to send

    def final(self) -> dict[str, Any] | None:
        """Stop recording and return the last batch (to the client, not through the log)."""
        self._stop_callback()
        try:  # always one: its number tells the client whether a batch is still on its way
            msg = self.batch(force=True)
        except Exception as exc:
            self._fail(exc)
            msg = self.batch()  # the error, at least
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
        self._graphs_noted, self._keys_noted = [], set()
        self._compute_of, self._held, self._also = {}, {}, {}
        self._failed, self._graph_spans = {}, {}


def _ignore(*args: Any, **kwargs: Any) -> None:
    """``transition`` of a probe switched off."""


def _stale(entries: list[Any], seen: list[int]) -> bool:
    """Whether a key has no entry, or one of a graph numbered after its note was taken."""
    return None in entries or any(map(gt, map(_COMPUTE_OF, entries), seen))


def _sums(entries: list[Entry], values: list[int]) -> dict[int, int]:
    """Sum of ``values`` per group id (of each value's entry)."""
    gids = list(map(_GID_OF, entries))
    if not gids or gids.count(gids[0]) == len(gids):
        return {gids[0]: sum(values)} if gids else {}
    out: dict[int, int] = {}
    for gid, value in zip(gids, values, strict=True):
        out[gid] = out.get(gid, 0) + value
    return out


def _labels(keys: list[Any]) -> list[str]:
    """Key labels (``key_label``), without a Python call per key for string keys."""
    if set(map(type, keys)) <= {str}:
        return keys
    return list(map(key_label, keys))


def graph_edges(keys: list[Hashable], states: list[Any]) -> dict[str, Any] | None:
    """The dependency edges of a graph's tasks (``states``, whose keys are ``keys``) as the
    scheduler holds them: ``{"edges": [tasks, dependencies], "edge_extra": [...]}``,
    positions in ``keys`` followed by ``edge_extra`` (dependencies outside the graph: data
    computed by an earlier graph); None when no task waits for another. Once per graph;
    a graph of independent tasks costs one C-level pass."""
    try:
        deps = list(map(_DEPENDENCIES, states))
    except AttributeError:  # not a scheduler's TaskState: edges not known
        return None
    if not any(deps):
        return None
    at = dict(zip(keys, range(len(keys)), strict=True))
    tasks: list[int] = []
    found: list[int] = []
    extra: list[Hashable] = []
    for i, depends in enumerate(deps):
        for dep in depends:
            j = at.get(dep.key)
            if j is None:
                j = at[dep.key] = len(keys) + len(extra)
                extra.append(dep.key)
            tasks.append(i)
            found.append(j)
    return {"edges": [tasks, found], "edge_extra": extra}


def _graph_keys(keys: Any) -> list[str]:
    """Labels of the (up to) ``GRAPH_KEYS`` smallest requested keys, sorted."""
    keys = list(keys or ())
    labels = keys if set(map(type, keys)) <= {str} else list(map(key_label, keys))
    if len(labels) <= GRAPH_KEYS:
        return sorted(labels)
    return heapq.nsmallest(GRAPH_KEYS, labels)


def group_spans(scheduler: Any, tasks: list[Hashable]) -> list[list[Any]]:
    """``[[TaskGroup name, span names]]`` of a graph's tasks in a span other than the
    default: the span of each ``TaskGroup`` (``scheduler.extensions["spans"]``), one lookup
    per group."""
    extension = getattr(scheduler, "extensions", {}).get("spans")
    if extension is None:
        return []
    states = filter(None, map(scheduler.tasks.get, tasks))
    out = []
    for group in set(map(_TASK_GROUP, states)):
        span = extension.spans.get(getattr(group, "span_id", None))
        name = tuple(getattr(span, "name", ()) or ())
        if name and name != ("default",):
            out.append([group.name, list(name)])
    return out


def _compute_span(startstops: Any) -> tuple[Any, Any]:
    """(start, stop) of the last ``compute`` entry of a task's ``startstops`` (or Nones)."""
    for entry in reversed(startstops or ()):
        if entry.get("action") == "compute":
            return float(entry["start"]), float(entry["stop"])
    return None, None


# ---------------------------------------------------------------- run_on_scheduler helpers
async def remove_probe(scheduler: Any, name: str) -> None:
    """Remove the scheduler plugin ``name``, the worker plugin of that name and its topic."""
    if name in getattr(scheduler, "worker_plugins", {}):
        with suppress(Exception):  # removed meanwhile
            await scheduler.unregister_worker_plugin(comm=None, name=name)
    if name in scheduler.plugins:
        with suppress(ValueError):
            scheduler.remove_plugin(name=name)
    topics = getattr(getattr(scheduler, "_broker", None), "_topics", None)
    if isinstance(topics, dict):
        topics.pop(name, None)


def scheduler_clock() -> tuple[float, str]:
    """The scheduler's clock (``distributed.metrics.time``) and host name."""
    return time(), socket.gethostname()


def finish_probe(dask_scheduler: Any, name: str) -> dict[str, Any] | None:
    """Stop the probe ``name`` and return its last batch; it stays registered."""
    probe = dask_scheduler.plugins.get(name)
    if not isinstance(probe, SchedulerProbe):
        return None
    return probe.final()


async def await_subscriber(dask_scheduler: Any, topic: str, client: str, wait: float = 5.0) -> bool:
    """Wait (up to ``wait`` s) until ``client`` is subscribed to ``topic``: the subscription
    travels on the client's batched stream, not with this call, and events published
    before it arrives reach nobody (they stay in the event log)."""
    topics = getattr(getattr(dask_scheduler, "_broker", None), "_topics", None)
    if not isinstance(topics, dict):
        return False
    deadline = time() + wait
    while client not in getattr(topics.get(topic), "subscribers", ()):
        if time() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


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
