"""A dask.distributed cluster as one more source of a recording.

A :class:`ClusterSource` runs one :class:`~.collector.DistributedCollector` (scheduler and
worker plugins, batches in order, clocks) per client, and writes what arrives into the
collectors of the run that submitted each graph: task rows into its
:class:`~daskprofile.collectors.tasks.TaskCollector`, bytes held per group into its
:class:`~daskprofile.collectors.cache.CacheCollector`, workers' stack samples into the
stack sampler it was given, and tasks per group into its progress totals. The recording
says where records go (:meth:`ClusterSource.expect`, a :class:`Target`); the source never
calls back into it. Worker processes' resources stay here, one series per process, read
through :meth:`ClusterSource.processes`. What a client's collector records in a reduced way
(workers without daskprofile: ``DistributedCollector.reduced``) is copied into
``run.meta.reduced`` of every run its graphs are recorded for.

Routing: the watch (:mod:`.watch`) tells the recording of every graph before it leaves;
the recording names its target with :meth:`ClusterSource.expect`. The scheduler plugin
numbers each graph it receives and sends its output keys back, so rows of compute ``n`` go
to the target that submitted those keys, whenever they arrive: futures still running after
their cell ended land in that cell's run. :meth:`ClusterSource.pending` says how many of a
target's graphs still have tasks to run.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np

from ..collectors.base import Columns
from ..collectors.cache import CacheCollector
from ..collectors.stacks import StackCollector
from ..collectors.tasks import RemoteRows, TaskCollector
from ..failures import message_from_repr
from ..keys import key_label
from ..run import Run
from ._assemble import as_label
from ._cluster_log import ClusterLog, attach_tables
from ._common import worker_address
from ._tables import LATE_REPORT, Lookup, cluster_totals
from .collector import DistributedCollector, active_client

__all__ = ["ClusterSettings", "ClusterSource", "Target", "active_client", "signature"]

#: output keys compared to match a graph with its submission (the smallest labels)
SIGNATURE_KEYS = 3
#: key corrections or rows awaiting their other half, at most
_AWAITING_MAX = 200_000
#: signatures of other recordings' graphs remembered per client, at most
_FOREIGN_MAX = 10_000


@dataclass(frozen=True)
class ClusterSettings:
    """What to record on clusters (the recording's options)."""

    tasks: bool = True
    cache: bool = True
    resources: bool = True
    stacks: bool = True
    dt: float = 0.1
    interval: float = 0.01
    #: seconds between the plugins' periodic batches (the workers' samples, actions,
    #: transfers and memory; the scheduler's graphs and cache). Task rows do not wait for
    #: them (a worker sends its rows within 0.15 s). 0.5 s, not profile()'s 0.2: the live
    #: panel's default; on a 20k-task LocalCluster compute it cost ~110 us/task of CPU
    #: less than 0.2 s (bench_cluster_panel), and the series it sends wait for tokens less
    flush: float = 0.5
    max_records: int | None = None
    all_clients: bool = False
    #: the GIL switch interval the workers' stack samplers may set to sample short tasks
    #: and tasks that hold the GIL (None: they never change it; see ``DistributedCollector``)
    switch_interval: float | None = 0.002

    @classmethod
    def of(cls, options: Any, **more: Any) -> ClusterSettings:
        """The settings a recording's options (a ``ProfileOptions``) ask for, plus ``more``."""
        names = ("tasks", "cache", "resources", "stacks", "dt", "interval", "max_records")
        return cls(**{name: getattr(options, name) for name in names}, **more)


@dataclass(eq=False)
class Target:
    """Where the cluster records of one run go."""

    run: Run
    tasks: TaskCollector | None = None
    cache: CacheCollector | None = None
    #: tasks per group in the run's graphs (progress totals), added to
    totals: dict[str, int] = field(default_factory=dict)
    #: graphs submitted for this run whose rows have not all arrived
    waiting: int = 0
    #: where each process's resource series starts for this run (sample index): a first
    #: guess when the run opens, settled once a sample from after its start came in
    resource_start: dict[str, int] = field(default_factory=dict)
    #: processes whose ``resource_start`` is settled (:func:`_settle`)
    settled: set[str] = field(default_factory=set)
    #: when the run opened (perf_counter; samples' clock)
    opened: float = -np.inf
    #: and where it stops, once the run was kept (:meth:`ClusterSource.describe`)
    resource_stop: dict[str, int] = field(default_factory=dict)
    #: called once a batch has added task rows to this target (the event loop thread)
    arrived: Callable[[], None] | None = None
    #: when its graphs were first found all recorded (perf_counter; see ``samples_behind``)
    rows_done: float | None = None


def signature(keys: Iterable[Any]) -> tuple[str, ...]:
    """The labels that identify a graph's output keys (the smallest few, sorted)."""
    return tuple(heapq.nsmallest(SIGNATURE_KEYS, map(key_label, keys)))


class _Client:
    """One client's collector and the routing of its graphs to targets."""

    def __init__(self, collector: DistributedCollector) -> None:
        self.collector = collector
        self.cid = str(collector.client.id)
        self.live = True  # False once stopped or closed: nothing more will come
        #: graphs announced and not yet seen by the scheduler, oldest first
        self.expected: deque[tuple[tuple[str, ...], Target]] = deque()
        self.owner: dict[int, Target] = {}  # the plugin's graph number -> target
        self.left: dict[int, int] = {}  # graph number -> tasks not finished
        #: key -> (collector, row, correction applied) of rows awaiting their exact one
        self.awaiting: dict[str, tuple[TaskCollector, int, float]] = {}
        self.corrections: dict[str, float] = {}  # key -> correction, for rows to come
        #: worker address -> distributed's latest clock correction there (this host only)
        self.worker_delay: dict[str, float] = {}
        #: targets told what this client's collector records in a reduced way
        self.reduced_in: set[Target] = set()
        #: graph number -> group id -> span names, of graphs with tasks in spans
        self.spans: dict[int, dict[int, tuple[str, ...]]] = {}
        #: output-key signatures of graphs this client sends for another recording (another
        #: thread's ``profile()`` block on the same client): not recorded here
        self.foreign: deque[tuple[str, ...]] = deque(maxlen=_FOREIGN_MAX)
        self.elsewhere: set[int] = set()  # their graph numbers, until their tasks finished


class ClusterSource:
    """Clients' clusters recorded into runs (see the module docstring)."""

    def __init__(self, settings: ClusterSettings, stacks: StackCollector | None = None) -> None:
        self.settings = settings
        self.stacks = stacks
        self.lock = threading.RLock()
        self.clients: dict[str, _Client] = {}  # client id -> its collector and routing
        self.default: Target | None = None  # rows of graphs not submitted for a target
        self.errors: list[dict[str, str]] = []
        #: every client's actions, transfers, memory and workers (runs read their window)
        self.log = ClusterLog(settings.max_records)

    # ------------------------------------------------------------ clients
    def add_client(self, client: Any = None) -> bool:
        """Record ``client`` (default: the default client) from now on; False if there is
        none or its plugins could not be installed (then in :attr:`errors`).

        The plugins are installed without holding :attr:`lock`: installing waits for the
        client's event loop, which may be delivering another client's batch meanwhile.
        """
        client = client if client is not None else active_client()
        if client is None or getattr(client, "status", None) != "running":
            return False
        if getattr(client, "asynchronous", False):
            return False  # cannot block its event loop for a round trip
        cid = str(client.id)
        with self.lock:
            entry = self.clients.get(cid)
            if entry is not None and entry.live:
                return True
            collector = self._collector(client)
            self.clients[cid] = entry = _Client(collector)  # its batches are routed at once
        collector.start()
        if not collector.started:
            with self.lock:
                self.clients.pop(cid, None)
                self._keep_errors(collector)
            return False
        return True

    def _collector(self, client: Any) -> DistributedCollector:
        s = self.settings
        collector = DistributedCollector(
            client,
            tasks=s.tasks,
            cache=s.cache,
            resources=s.resources,
            stacks=s.stacks and self.stacks is not None,
            dt=s.dt,
            interval=s.interval,
            flush=s.flush,
            max_records=s.max_records,
            all_clients=s.all_clients,
            switch_interval=s.switch_interval,
            stacks_into=self.stacks,
            log=self.log,
        )
        collector.errors = []
        collector.router = _Router(self, client)
        return collector

    def _keep_errors(self, collector: DistributedCollector) -> None:
        for error in collector.errors:
            if error not in self.errors:
                self.errors.append(error)

    # ------------------------------------------------------------ targets
    def expect(self, client: Any, keys: Iterable[Any], target: Target) -> None:
        """``client`` is about to submit a graph with output ``keys`` for ``target``."""
        if not self.add_client(client):
            return
        with self.lock:
            entry = self.clients.get(str(client.id))
            if entry is None:
                return
            entry.expected.append((signature(keys), target))
            target.waiting += 1
            _mark_distributed(target.run)
            _tell_reduced(entry, target)

    def foreign(self, client: Any, keys: Iterable[Any]) -> None:
        """``client`` is about to submit a graph with output ``keys`` for another recording:
        it is not recorded here (rather than by the default target)."""
        with self.lock:
            entry = self.clients.get(str(getattr(client, "id", "")))
            if entry is not None:
                entry.foreign.append(signature(keys))

    def open(self, target: Target) -> None:
        """``target``'s run starts now: its resource series start with the last sample
        before it (what each process used when the run began: a short run has a value
        even before its own first sample comes) and go on with the next ones. Samples
        taken before it that were still on their way count by their time (:func:`_settle`)."""
        target.opened = perf_counter()
        with self.lock:
            for entry in self.clients.values():
                for address, proc in list(entry.collector.processes.items()):
                    target.resource_start.setdefault(address, max(0, proc.columns.n - 1))
        attach_tables(self.log, target.run)  # run.actions, .transfers, .memory, .workers

    def pending(self, target: Target) -> int:
        """Graphs of ``target`` whose tasks have not all been recorded yet."""
        if target.waiting:
            target.rows_done = None
        return target.waiting

    def samples_behind(self, target: Target) -> bool:
        """Whether, ``target``'s graphs all recorded, the worker processes' resource
        samples have not reached that moment yet: they come in batches every ``flush``
        seconds, and a run ended before them would end its CPU/memory lines that much
        before its tasks. False after ``2 flush`` seconds of waiting."""
        if target.waiting:
            target.rows_done = None
            return False
        now = perf_counter()
        if target.rows_done is None:
            target.rows_done = now
        done = target.rows_done
        if now >= done + 2 * self.settings.flush:
            return False
        reached = self._samples_until()
        return reached is not None and reached < done - self.settings.dt

    def _samples_until(self) -> float | None:
        """Where the worker processes still reporting have all sent samples up to (None:
        no samples)."""
        lasts = []
        with self.lock:
            for entry in self.clients.values():
                for proc in list(entry.collector.processes.values()):
                    if proc.hold is None and proc.columns.n:  # (heartbeats: no batches)
                        lasts.append(proc.last())
        if not lasts:
            return None
        newest = max(lasts)
        return min(t for t in lasts if t >= newest - LATE_REPORT)

    def forget(self, target: Target) -> None:
        """``target``'s run has finished: later rows of its graphs are not recorded."""
        with self.lock:
            for entry in self.clients.values():
                entry.reduced_in.discard(target)
                entry.expected = deque(e for e in entry.expected if e[1] is not target)
                for number in [n for n, t in entry.owner.items() if t is target]:
                    del entry.owner[number]
                    entry.left.pop(number, None)
                    entry.spans.pop(number, None)
            if self.default is target:
                self.default = None
        self.log.release(target.run)  # cluster tables' rows no run reads any more go

    # ------------------------------------------------------------ reading
    def processes(self, target: Target) -> dict[str, Callable[[int], Any]]:
        """``{worker address: reader}`` of each worker process's resources, from the
        target's start (``reader(cursor) -> (columns, next cursor)``)."""
        out: dict[str, Callable[[int], Any]] = {}
        with self.lock:
            for entry in self.clients.values():
                for src, proc in list(entry.collector.processes.items()):
                    label = ", ".join(proc.workers) or src
                    target.resource_start.setdefault(src, 0)
                    out[label] = _since(proc.columns, target, src)
        return out

    def resources(
        self, t0: float, t1: float | None, complete: bool = False
    ) -> dict[str, np.ndarray]:
        """The cluster's worker processes summed on a ``dt`` grid from ``t0`` (to ``t1``);
        ``complete``: only the rows every process has reported (see ``cluster_totals``),
        none while a worker that took the plugin has not reported yet."""
        series: list[dict[str, np.ndarray]] = []
        with self.lock:
            for entry in self.clients.values():
                if complete and entry.collector.awaits_first_samples():
                    series = []
                    break
                series += [p.snapshot() for p in entry.collector.processes.values()]
        totals = cluster_totals(series, self.settings.dt, origin=t0, complete=complete)
        keep = totals["time"] >= t0 - 1e-3
        if t1 is not None:
            keep &= totals["time"] <= t1 + 1e-3
        return {k: v[keep] for k, v in totals.items()}

    def describe(self, t0: float, target: Target | None = None) -> dict[str, Any] | None:
        """What ``run.meta.distributed`` holds: the first client's cluster (times from
        ``t0``), stopped or not. With ``target``, each process's resource samples are the
        target's: from where its live readers start, to the samples there are now, where
        its live readers stop from now on (:meth:`processes`)."""
        rows: dict[str, tuple[int, int]] | None = None
        with self.lock:
            entries = list(self.clients.values())
            if target is not None:
                rows = {}
                for entry in entries:
                    for src, proc in list(entry.collector.processes.items()):
                        with proc.columns.lock:
                            start = _settle(target, src, proc.columns, final=True)
                        stop = target.resource_stop.setdefault(src, proc.columns.n)
                        rows[src] = (start or 0, stop)
        return entries[0].collector.info(t0, rows) if entries else None

    # ------------------------------------------------------------ ending
    def stop(self) -> None:
        """Stop every collector (their last batches are applied first) and remove the
        plugins. What they recorded stays readable until :meth:`clear`."""
        with self.lock:
            entries = [e for e in self.clients.values() if e.live]
        for entry in entries:
            self._stop_entry(entry, "the recording ended")

    def client_closing(self, client: Any) -> None:
        """``client.close()`` was called: take its last batches and remove its plugins now,
        while it can still reach the cluster (see ``watch.add_close_listener``)."""
        with self.lock:
            entry = self.clients.get(str(getattr(client, "id", "")))
        if entry is not None:
            self._stop_entry(entry, "the client closed")

    def _stop_entry(self, entry: _Client, why: str) -> None:
        with self.lock:
            if not entry.live:
                return  # stopped already (by another thread)
            entry.live = False
        collector = entry.collector
        if getattr(collector.client, "status", None) != "running":
            why = "the client was closed"  # its last batches and plugins are out of reach
        try:
            collector.stop()  # (outside the lock: its last batches are routed meanwhile)
        except Exception as exc:  # never fail the user's code
            collector.errors.append({"collector": "distributed", "error": repr(exc)})
        with self.lock:
            self._keep_errors(collector)
            for target in list(entry.reduced_in):  # the final word (stacks at stop)
                _tell_reduced(entry, target)
            _give_up(entry, why)

    def clear(self) -> None:
        """Forget the stopped clients and what they recorded (call :meth:`stop` first)."""
        with self.lock:
            self.clients = {cid: e for cid, e in self.clients.items() if e.live}

    def drop_closed_clients(self) -> None:
        """Clients that were closed send nothing more (their plugins went with their
        connection): their runs stop waiting for them."""
        with self.lock:
            for entry in self.clients.values():
                if entry.live and getattr(entry.collector.client, "status", None) != "running":
                    entry.live = False
                    entry.collector.started = False
                    _give_up(entry, "the client closed")

    # ------------------------------------------------------------ routing (event loop)
    def _graphs(self, entry: _Client, graphs: list[dict[str, Any]], groups: Lookup) -> None:
        for graph in graphs:
            number = int(graph["compute"])
            ours = graph.get("client", entry.cid) == entry.cid
            keys = tuple(graph.get("keys") or ())
            if ours and keys in entry.foreign:  # another recording's: not ours to record
                entry.foreign.remove(keys)
                entry.elsewhere.add(number)
                continue
            announced = _claim(entry.expected, keys) if ours else None
            target = announced if announced is not None else self.default
            if target is None:
                continue
            entry.owner[number] = target
            if graph.get("spans"):
                entry.spans[number] = {int(g): tuple(names) for g, names in graph["spans"]}
            _mark_distributed(target.run)
            _tell_reduced(entry, target)
            if announced is None:  # a graph nobody announced (another client, all_clients)
                target.waiting += 1
            target.run.meta.computes += 1
            for gid, n in graph.get("totals") or ():
                name = groups.names[gid]
                target.totals[name] = target.totals.get(name, 0) + int(n)
            edges = graph.get("edges")
            recorder = None if target.tasks is None else target.tasks.graph
            if edges and recorder is not None:  # the scheduler's: no graph materialized here
                labels = [as_label(k) for k in graph.get("edge_keys") or ()]
                recorder.cluster_edges(labels, edges[0], edges[1])

    def _pending(self, entry: _Client, pending: Mapping[Any, int]) -> None:
        for number, left in pending.items():
            n = int(number)
            target = entry.owner.get(n)
            if target is None:
                if int(left) <= 0:
                    entry.elsewhere.discard(n)
                continue
            if int(left) > 0:
                entry.left[n] = int(left)
                continue
            entry.left.pop(n, None)
            entry.spans.pop(n, None)
            del entry.owner[n]
            target.waiting = max(0, target.waiting - 1)

    def _tasks(self, entry: _Client, rows: dict[str, list[Any]], names: _Names) -> None:
        """Task rows of one batch, each to the target of its graph (or the default)."""
        by_target: dict[int, tuple[Target, list[int]]] = {}
        owner, default, elsewhere = entry.owner, self.default, entry.elsewhere
        for i, number in enumerate(rows["compute"]):
            if number in elsewhere:  # another recording's graph
                continue
            target = owner.get(number, default)
            if target is None or target.tasks is None:
                continue
            by_target.setdefault(id(target), (target, []))[1].append(i)
        for target, picked in by_target.values():
            assert target.tasks is not None
            self._add_rows(entry, target.tasks, rows, picked, names)
            if target.arrived is not None:
                target.arrived()

    def _add_rows(
        self,
        entry: _Client,
        tasks: TaskCollector,
        rows: dict[str, list[Any]],
        picked: list[int],
        names: _Names,
    ) -> None:
        keys = [rows["key"][i] for i in picked]
        workers = [names.workers[rows["worker"][i]] for i in picked]
        # distributed's clock correction, taken off now: exactly if it came already, else
        # the worker's latest (the exact one, when it comes, moves the row the rest); rows
        # the workers made come without it
        corrections, latest = entry.corrections, entry.worker_delay
        applied = (
            [0.0] * len(keys)
            if names.corrected
            else [
                _pop_or(corrections, key, latest.get(worker_address(w), 0.0))
                for key, w in zip(keys, workers, strict=True)
            ]
        )
        shift = names.to_perf
        starts = [rows["start"][i] + shift - d for i, d in zip(picked, applied, strict=True)]
        stops = [rows["stop"][i] + shift - d for i, d in zip(picked, applied, strict=True)]
        remote = RemoteRows(
            key=keys,
            group=[names.groups[rows["group"][i]] for i in picked],
            worker=workers,
            submit=[rows["submit"][i] + shift for i in picked],
            start=starts,
            stop=stops,
            error=[rows["error"][i] for i in picked],
            compute=[int(rows["compute"][i]) for i in picked],
            span=_row_spans(entry.spans, rows, picked),
            exception=_row_texts(names.texts, keys, rows, picked),
        )
        first = tasks.add_rows(remote)
        if not names.corrected and "worker" in entry.collector.registered:  # sent by workers
            for offset, (key, d) in enumerate(zip(keys, applied, strict=True)):
                _remember(entry.awaiting, key, (tasks, first + offset, d))

    def _correct(self, entry: _Client, delays: list[list[Any]]) -> None:
        for key, delay in delays:
            found = entry.awaiting.pop(key, None)
            if found is None:
                _remember(entry.corrections, key, float(delay))
            elif float(delay) != found[2]:
                found[0].shift(found[1], found[2] - float(delay))

    def _cache(self, rows: dict[str, list[Any]], names: _Names) -> None:
        target = self._latest()
        if target is None or target.cache is None or not rows["time"]:
            return
        target.cache.add_rows(
            [t + names.to_perf for t in rows["time"]],
            [names.groups[g] for g in rows["group"]],
            rows["metric"],
        )

    def _latest(self) -> Target | None:
        """The target of the most recent graph (where bytes held per group are drawn)."""
        for entry in self.clients.values():
            if entry.owner:
                return entry.owner[max(entry.owner)]
        return self.default


@dataclass
class _Names:
    groups: list[str]
    workers: list[str]
    to_perf: float
    #: the batch's failed tasks' ``[exception_text, traceback_text]`` by key label
    texts: Mapping[str, Any] = field(default_factory=dict)
    #: distributed's clock correction is off the rows already (the workers made them)
    corrected: bool = False


class _Router:
    """What a client's collector hands its scheduler batches to (event loop thread)."""

    def __init__(self, source: ClusterSource, client: Any) -> None:
        self.source = source
        self.cid = str(client.id)

    def scheduler_batch(self, collector: DistributedCollector, msg: dict[str, Any]) -> None:
        source = self.source
        with source.lock:
            entry = source.clients.get(self.cid)
            if entry is None:
                return
            names = _Names(collector.groups.names, collector.worker_labels.names, collector.to_perf)
            names.texts = msg.get("exceptions") or {}
            names.corrected = bool(msg.get("corrected"))
            # each part on its own: one that fails (recorded by the caller) does not keep
            # the others, the pending counts above all, from the runs they belong to
            failed = _each(
                lambda: source._graphs(entry, msg.get("graphs") or [], collector.groups),
                lambda: source._tasks(entry, msg["tasks"], names),
                lambda: source._cache(msg["cache"], names),
                lambda: source._pending(entry, msg.get("pending") or {}),
            )
        if failed is not None:
            raise failed

    def worker_batch(self, msg: dict[str, Any]) -> None:
        source = self.source
        with source.lock:
            entry = source.clients.get(self.cid)
            if entry is None:
                return
            entry.worker_delay.update(msg.get("scheduler_delay") or {})
            if msg.get("delays"):
                source._correct(entry, msg["delays"])


def _settle(target: Target, src: str, columns: Columns, final: bool = False) -> int | None:
    """(Under ``columns.lock``.) The sample of process ``src`` that ``target``'s series
    starts with: the last one taken before the run opened, once a sample from after that
    came in (a batch on its way when the run opened holds samples from before it); None
    while none has, unless ``final``: then the newest. Settled once, for readers and the
    kept run alike."""
    guess = target.resource_start.get(src, 0)
    if src in target.settled:
        return guess
    lo = max(guess, columns.first) - columns.first
    hi = columns.n - columns.first
    after = bisect.bisect_left(columns.cols["time"], target.opened, lo, max(lo, hi))
    if after >= hi and not final:
        return None
    start = columns.first + max(lo, after - 1)
    target.resource_start[src] = start
    target.settled.add(src)
    return start


def _since(columns: Columns, target: Target, src: str) -> Callable[[int], Any]:
    """A reader of process ``src``'s ``columns`` for ``target``: from its settled start
    (nothing until then), to ``target.resource_stop[src]`` once that is set."""
    stops = target.resource_stop

    def read(cursor: int) -> tuple[dict[str, np.ndarray], int]:
        with columns.lock:
            start = _settle(target, src, columns, final=src in stops)
            if start is None:  # no sample from after the run's start yet
                return columns.since_locked(columns.n)[0], cursor
            rows, new_cursor = columns.since_locked(max(cursor, start))
        stop = stops.get(src)
        if stop is not None and new_cursor > stop:
            cut = new_cursor - max(stop, cursor, start)
            rows = {k: v[: max(0, len(v) - cut)] for k, v in rows.items()}
            new_cursor = max(stop, cursor, start)
        return rows, new_cursor

    return read


def _each(*parts: Callable[[], None]) -> Exception | None:
    """Call every part; the first exception raised, if any (the others still ran)."""
    first: Exception | None = None
    for part in parts:
        try:
            part()
        except Exception as exc:
            first = first or exc
    return first


def _give_up(entry: _Client, why: str) -> None:
    """No more rows will come for this client: its targets stop waiting, and a target whose
    graphs had not all been recorded says so in its run."""
    for target in set(entry.owner.values()) | set(_queued(entry)):
        if target.waiting and not target.run.finished:
            target.run.meta.errors.append(
                {
                    "collector": "distributed",
                    "error": f"{why} before {target.waiting} graph(s) on "
                    f"{entry.cid} were fully recorded",
                }
            )
        target.waiting = 0


def _queued(entry: _Client) -> list[Target]:
    return [target for _, target in entry.expected]


def _claim(expected: deque[tuple[tuple[str, ...], Target]], keys: tuple[str, ...]) -> Target | None:
    """The target that announced a graph with these output keys (the oldest such), else the
    oldest announced one (graphs reach the scheduler in the order they were sent); removed."""
    for i, (sig, target) in enumerate(expected):
        if sig == keys:
            del expected[i]
            return target
    return expected.popleft()[1] if expected else None


def _mark_distributed(run: Run) -> None:
    schedulers = run.meta.schedulers
    if "distributed" not in schedulers:
        schedulers.append("distributed")


def _tell_reduced(entry: _Client, target: Target) -> None:
    """The target's run names what the client's collector records in a reduced way."""
    reduced = entry.collector.reduced
    if reduced and not target.run.finished:
        target.run.meta.reduced.update(reduced)
        entry.reduced_in.add(target)


def _row_spans(
    spans: Mapping[int, Mapping[int, tuple[str, ...]]], rows: Mapping[str, Any], picked: list[int]
) -> list[tuple[str, ...] | None] | None:
    """Span names of the picked rows, by their graph and group (None: no graph in a span)."""
    if not spans:
        return None
    nowhere: Mapping[int, tuple[str, ...]] = {}
    compute, group = rows["compute"], rows["group"]
    return [spans.get(int(compute[i]), nowhere).get(int(group[i])) for i in picked]


def _row_texts(
    texts: Mapping[str, Any], keys: list[str], rows: Mapping[str, Any], picked: list[int]
) -> list[tuple[str, str] | None] | None:
    """``(message, traceback)`` of the picked rows that failed (None: not known)."""
    if not texts:
        return None
    errors = rows["error"]
    out: list[tuple[str, str] | None] = []
    for key, i in zip(keys, picked, strict=True):
        found = texts.get(key) if errors[i] is not None else None
        out.append((message_from_repr(str(found[0])), str(found[1])) if found else None)
    return out


def _pop_or(table: dict[str, float], key: str, default: float) -> float:
    found = table.pop(key, None)
    return default if found is None else found


def _remember(table: dict[str, Any], key: str, value: Any) -> None:
    table[key] = value
    if len(table) > _AWAITING_MAX:
        for old in list(table)[: _AWAITING_MAX // 4]:
            del table[old]
