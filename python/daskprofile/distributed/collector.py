"""Client side: registers the plugins, receives their batches live, holds the run's tables.

::

    collector = DistributedCollector(client, dt=0.1, interval=0.01)
    collector.start()            # subscribe, register the worker + scheduler plugins
    ...                          # computations on the cluster
    collector.stop()             # last batches, plugins and event topic removed
    collector.tasks_snapshot(), collector.resources_snapshot(), collector.stacks.trees()

Task rows are measured on the workers (their plugin is registered first), and the
scheduler's plugin only numbers graphs (:mod:`._scheduler_graphs`); the two are joined
here (:mod:`._assemble`). Batches come from the scheduler (graphs, cache) and from each
worker process (task rows, stacks, resources), each numbered; they are applied in order
per sender, in the client's event loop thread. Times arrive in the scheduler's clock and
are stored as this process's ``perf_counter`` seconds, like every local collector. The
collector never raises into the computation: any failure warns once, is recorded in
``errors`` and switches the failing part off.

Workers without daskprofile (an image without the package: the worker plugin cannot be
unpickled there) or any other failure to register the worker plugin: whatever of the
worker plugin got registered is removed, the scheduler's plugin records the task rows
itself (:mod:`._scheduler`: task rows, cache, graphs) and the collector falls back to what
the scheduler knows. Each worker's CPU and memory come from its heartbeats (polled with
``Scheduler.identity`` from the client's event loop every ``max(dt, 0.5)`` s), stacks from
distributed's own profiler (fetched at stop, all tasks in one group, :data:`ALL_TASKS`;
nothing if it has no samples). :attr:`reduced` names what is reduced and why; one
``RuntimeWarning`` says so; the computation is never failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any

import numpy as np

from ..collectors.base import Collector
from ..collectors.stacks import PAYLOAD_VERSION, StackCollector
from ..stacktree import FrameInfo, Tree
from ._assemble import RowAssembler
from ._cluster_log import ClusterLog
from ._common import LOCAL_SINKS, MESSAGE_VERSION, unpack, worker_address
from ._scheduler import (
    SchedulerProbe,
    await_subscriber,
    finish_probe,
    forget_topic,
    scheduler_clock,
)
from ._scheduler_graphs import GraphProbe
from ._scheduler_tables import enable_actions
from ._tables import (
    LATE_REPORT,
    CacheTable,
    Lookup,
    ProcessResources,
    TaskTable,
    cluster_totals,
)
from ._worker import WorkerProbe, finish_worker

__all__ = ["ALL_TASKS", "DistributedCollector", "active_client"]

#: the group of the stack samples of distributed's own profiler (workers without
#: daskprofile): it does not say which task a sample belongs to
ALL_TASKS = "(all tasks)"
#: fewest seconds between two polls of the workers' heartbeats (workers of small clusters
#: send one every 0.5 s)
HEARTBEAT_POLL = 0.5
#: seconds a heartbeat's sample stands for in the cluster's totals, at least (longer when
#: heartbeats come further apart: large clusters send one every few seconds)
HEARTBEAT_HOLD = 5.0
#: seconds a poll of the heartbeats may take before it is skipped
HEARTBEAT_TIMEOUT = 5.0
#: longest wait for the client's event loop to answer at stop
_WITHIN = {"callback_timeout": 20.0}
#: seconds a stopped run's topic keeps a handler that drops its late messages
LATE_EVENTS = 30.0


def active_client() -> Any:
    """The default ``distributed.Client`` if one is running, else None.

    Never imports distributed (nothing to find if it was not imported) and never starts
    a client.
    """
    import sys

    if "distributed" not in sys.modules:
        return None
    try:
        import distributed

        client = getattr(distributed, "default_client")()  # noqa: B009 - untyped
    except (ImportError, ValueError):
        return None
    return client if getattr(client, "status", None) == "running" else None


class _InOrder:
    """Applies numbered messages in order per sender; keeps early ones until their turn."""

    def __init__(self, apply: Callable[[dict[str, Any]], None]) -> None:
        self.apply = apply
        self.next: dict[str, int] = {}
        self.pending: dict[str, dict[int, dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def push(self, msg: dict[str, Any]) -> None:
        src, seq = str(msg["src"]), int(msg["seq"])
        with self.lock:
            expected = self.next.get(src, 0)
            if seq < expected:
                return  # seen already (a gap filled twice)
            waiting = self.pending.setdefault(src, {})
            waiting[seq] = msg
            while expected in waiting:
                self.apply(waiting.pop(expected))
                expected += 1
            self.next[src] = expected
            if not waiting:
                del self.pending[src]

    def gaps(self) -> int:
        """How many messages are held back waiting for an earlier one."""
        with self.lock:
            return sum(len(w) for w in self.pending.values())

    def flush_gaps(self) -> int:
        """Apply what is held back despite the gaps; returns the number of missing messages."""
        missing = 0
        with self.lock:
            for src, waiting in list(self.pending.items()):
                for seq in sorted(waiting):
                    missing += seq - self.next.get(src, 0)
                    self.apply(waiting.pop(seq))
                    self.next[src] = seq + 1
            self.pending.clear()
        return missing


class DistributedCollector(Collector):
    """Profiles what runs on a ``distributed`` cluster: tasks, cache, resources, stacks.

    ``client``: the ``distributed.Client`` (default: the default client). ``dt``: seconds
    between resource samples on each worker; ``interval``: between stack samples;
    ``cycle``: width of one stack-history entry; ``flush``: seconds between batches sent
    to the client. ``all_clients``: record tasks of every client of the scheduler (default:
    only this client's graphs). ``stacks_into``: a :class:`StackCollector` to merge the
    workers' samples into (default: a new one, ``self.stacks``). ``switch_interval``: the
    GIL switch interval the workers' stack samplers may set while tasks keep them from
    the GIL or hide from them (short tasks); None: they never change it (cheaper on tiny
    tasks, fewer samples of them).
    """

    name = "distributed"
    #: the plugin classes (tests replace them to check failure handling): the scheduler's
    #: when the workers measure the task rows, when they cannot, and the workers'
    graph_probe: type[SchedulerProbe] = GraphProbe
    scheduler_probe: type[SchedulerProbe] = SchedulerProbe
    worker_probe: type[WorkerProbe] = WorkerProbe
    #: seconds to wait at stop for batches still in flight
    drain_timeout = 5.0

    def __init__(
        self,
        client: Any = None,
        *,
        tasks: bool = True,
        cache: bool = True,
        resources: bool = True,
        stacks: bool = True,
        dt: float = 0.1,
        interval: float = 0.01,
        cycle: float = 1.0,
        flush: float = 0.2,
        max_records: int | None = None,
        all_clients: bool = False,
        stacks_into: StackCollector | None = None,
        switch_interval: float | None = 0.002,
        log: ClusterLog | None = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.options: dict[str, Any] = {
            "tasks": tasks,
            "cache": cache,
            "resources": resources,
            "stacks": stacks,
            "dt": float(dt),
            "interval": float(interval),
            "cycle": float(cycle),
            "flush": float(flush),
            "all_clients": all_clients,
            "switch_interval": switch_interval,
        }
        self.max_records = max_records
        self.topic = f"daskprofile-{uuid.uuid4().hex}"
        self.groups = Lookup()
        self.tasks = TaskTable(max_records, self.groups)
        self.cache = CacheTable(max_records, self.groups)
        self.processes: dict[str, ProcessResources] = {}
        #: the workers that took the worker plugin, and when (perf_counter)
        self.plugin_workers: frozenset[str] = frozenset()
        self._plugin_at = 0.0
        if stacks_into is None:
            stacks_into = StackCollector(interval, cycle, switch_interval=None)
        self.stacks = stacks_into
        #: actions, transfers, memory and workers (the run's cluster tables)
        self.log = log if log is not None else ClusterLog(max_records)
        self.computes = 0
        self.dropped_tasks = 0
        self.missing_batches = 0
        self.workers: dict[str, dict[str, Any]] = {}
        self.clock_offset = 0.0  # scheduler clock - this process's time.time()
        #: worker address -> seconds to add to its wall clock to get ours (latest estimate)
        self.clocks: dict[str, float] = {}
        self.host = socket.gethostname()
        self.to_perf = perf_counter() - time.time()
        self.started = False
        self.scheduler_address: str | None = None  # (a closed client forgets it)
        self.registered: list[str] = []
        #: who measures the task rows: ``"workers"`` (the scheduler numbers graphs only)
        #: or ``"scheduler"`` (workers without daskprofile)
        self.rows_from = "scheduler"
        self.assembler = RowAssembler(self.groups, self.tasks.workers, all_clients)
        self.on_batch: Callable[[DistributedCollector], None] | None = None
        #: takes the scheduler's batches instead of this collector's own tables (a
        #: :class:`~.source.ClusterSource` routing rows to runs)
        self.router: Any = None
        self._inbox = _InOrder(self._apply)
        self._warned = False
        self._subscribed = False
        self.local = False  # the scheduler runs in this process (see start)
        #: parts recorded in a reduced way -> why and what is left (workers without
        #: daskprofile: ``"stacks"``, ``"resources"``); empty when nothing is reduced
        self.reduced: dict[str, str] = {}
        self._poller: asyncio.Task[None] | None = None  # heartbeat polling (event loop)
        self._halt: asyncio.Event | None = None  # set: the poller ends
        self._last_seen: dict[str, float] = {}  # worker -> scheduler time of its heartbeat
        self._since = 0.0  # when the plugins came (scheduler clock)
        self._why = ""  # why the worker plugin is missing

    # ------------------------------------------------------------ errors
    @property
    def error(self) -> str | None:
        """The first error recorded, if any (the recorder reads this from samplers)."""
        return self.errors[0]["error"] if self.errors else None

    @property
    def dropped(self) -> int:
        """Stack samples lost (history cap, or batches that never arrived)."""
        return int(self.stacks.dropped) + self.missing_batches

    def _fail(self, what: str, whole: bool = True) -> None:
        """Record and warn (once); ``whole``: switch the collector off, else only the part
        that failed (its caller stops it)."""
        self.failed = self.failed or whole
        self.errors.append({"collector": self.name, "error": what})
        if not self._warned:
            self._warned = True
            part = "distributed profiling" if whole else what.split(":", 1)[0]
            warnings.warn(
                f"daskprofile: {part} switched off ({what}); the computation is not affected",
                RuntimeWarning,
                stacklevel=3,
            )

    def _guard(
        self, what: str, fn: Callable[..., Any], *args: Any, whole: bool = True, **kwargs: Any
    ) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self._fail(f"{what}: {exc!r}", whole)
            return None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Subscribe to the run's topic and register the plugins (idempotent)."""
        if self.started or self.failed:
            return
        if self.client is None:
            self.client = active_client()
        client = self.client
        if client is None:
            self._fail("no running distributed.Client")
            return
        if getattr(client, "asynchronous", False):
            self._fail("asynchronous clients are not supported yet")
            return
        self.started = True
        self.scheduler_address = getattr(getattr(client, "scheduler", None), "address", None)
        self.to_perf = perf_counter() - time.time()
        #: the scheduler runs in this process: its plugin hands us the events
        self.local = scheduler_here(client)
        if self.local:
            LOCAL_SINKS[self.topic] = (client.loop, self._on_event)
        else:
            self._guard("subscribing", client.subscribe_topic, self.topic, self._on_event)
            self._subscribed = not self.failed
        if not self.failed and not self.local:  # plugins' first messages must find us subscribed
            self._guard(
                "subscribing",
                client.run_on_scheduler,
                await_subscriber,
                topic=self.topic,
                client=client.id,
            )
        if not self.failed:
            self._guard("clock", self._measure_clock)
        if not self.failed:
            self._register()
        if self.failed:
            self._cleanup()

    def _measure_clock(self) -> None:
        """Offset of the scheduler's clock; none on this host (one clock: no noise)."""
        if self.local:  # one process, one clock: start() set to_perf, no offset
            return
        before = time.time()
        remote, host = self.client.run_on_scheduler(scheduler_clock)
        after = time.time()
        same_host = host == socket.gethostname()
        self.clock_offset = 0.0 if same_host else float(remote) - (before + after) / 2
        self.to_perf = perf_counter() - time.time() - self.clock_offset

    def _register(self) -> None:
        """The worker plugin first: when every worker takes it, the workers measure the
        task rows and the scheduler's plugin only numbers graphs (nothing per task there);
        else the scheduler's plugin records the tasks (see :meth:`_without_worker_plugin`)."""
        o = self.options
        if o["tasks"] or o["stacks"] or o["resources"]:
            self._register_workers()
        if self.failed:
            return
        thin = "worker" in self.registered
        self.rows_from = "workers" if thin else "scheduler"
        probe = (self.graph_probe if thin else self.scheduler_probe)(
            self.topic,
            None if o["all_clients"] else [self.client.id],
            tasks=o["tasks"],
            cache=o["cache"],
            flush=o["flush"],
            owner=str(self.client.id),
        )
        self._guard(
            "registering the scheduler plugin", self.client.register_plugin, probe, self.topic
        )
        if self.failed:
            return
        self.registered.append("scheduler")
        if self._why:
            self._reduce_tables(self._why)  # (the scheduler's plugin is there now)

    def _register_workers(self) -> None:
        o = self.options
        settings = {k: o[k] for k in ("stacks", "resources", "dt", "interval", "cycle", "flush")}
        settings["switch_interval"] = o["switch_interval"]
        settings["client_host"] = socket.gethostname()
        settings["tasks"] = o["tasks"]  # actions and transfers (see _worker_tables)
        settings["rows"] = o["tasks"]  # task rows (see _worker_rows)
        self._since = time.time() + self.clock_offset
        self.registered.append("worker")  # partly registered on failure: remove it too
        try:
            took = self.client.register_plugin(self.worker_probe(self.topic, settings), self.topic)
        except Exception as exc:  # distributed raises the first worker's error
            self._without_worker_plugin(exc)
        else:
            if isinstance(took, Mapping):  # {worker address: its answer}
                self.plugin_workers = frozenset(map(str, took))
                self._plugin_at = perf_counter()

    # ------------------------------------------------------------ workers without daskprofile
    def _without_worker_plugin(self, exc: BaseException) -> None:
        """The worker plugin could not be registered (workers without daskprofile, or its
        setup failed): remove what of it got registered, fall back to what the scheduler
        knows and say what is reduced."""
        self.registered.remove("worker")
        with contextlib.suppress(Exception):  # raises for workers that never had it
            self.client.unregister_worker_plugin(self.topic)
        what = _describe(exc)
        missing = isinstance(exc, ImportError) or what.startswith(_IMPORT_ERRORS)
        if missing and "daskprofile" in what:
            why = f"workers lack daskprofile ({what})"
        else:
            why = f"the worker plugin could not be registered ({what})"
        self._why = why
        o = self.options
        if o["stacks"]:
            self.reduced["stacks"] = f"{why}: no stack samples"
        if o["resources"]:
            self.reduced["resources"] = f"{why}: CPU/memory from the scheduler's heartbeats"
            sync = self.client.sync
            self._guard("heartbeat resources", sync, self._start_heartbeats, whole=False)
        warnings.warn(
            f"daskprofile: {why}; recording {' and '.join(self.reduced)} in a reduced way "
            "(tasks, cache and graphs as usual); the computation is not affected",
            RuntimeWarning,
            stacklevel=5,
        )

    async def _start_heartbeats(self) -> None:
        """Start polling the workers' heartbeats (in the client's event loop)."""
        if self._poller is None:
            self._halt = asyncio.Event()
            self._poller = asyncio.ensure_future(self._poll_heartbeats(self._halt))

    async def _stop_heartbeats(self, last: bool) -> None:
        """Stop polling (in the event loop); ``last``: poll once more, then. A poll under way
        is let finish within its timeout (see :func:`_within`)."""
        poller, self._poller = self._poller, None
        if poller is not None:
            if self._halt is not None:
                self._halt.set()
            done, _ = await asyncio.wait({poller}, timeout=HEARTBEAT_TIMEOUT + 1.0)
            if not done:
                poller.cancel()
        if last:
            await self._heartbeats_once()

    async def _poll_heartbeats(self, halt: asyncio.Event) -> None:
        period = max(float(self.options["dt"]), HEARTBEAT_POLL)
        while not halt.is_set():
            if not await self._heartbeats_once():
                return  # switched off (its error is recorded)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(halt.wait(), period)

    async def _heartbeats_once(self) -> bool:
        """Append each worker's latest heartbeat metrics; never raises (False: give up)."""
        client = self.client
        try:
            call = client.scheduler.identity(n_workers=-1)
            self._apply_heartbeats(await _within(call, HEARTBEAT_TIMEOUT))
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            return True  # a busy scheduler: the next poll
        except Exception as exc:
            if getattr(client, "status", None) == "running":
                self._fail(f"heartbeat resources: {exc!r}", whole=False)
            return False
        callback = self.on_batch
        if callback is not None:
            self._guard("batch callback", callback, self)
        return True

    def _apply_heartbeats(self, identity: Mapping[str, Any]) -> None:
        """Each worker's CPU and memory of its latest heartbeat, stamped with the time the
        scheduler received it (its clock), as one process's resource sample."""
        for address, info in (identity.get("workers") or {}).items():
            metrics = info.get("metrics") or {}
            seen, cpu, memory = info.get("last_seen"), metrics.get("cpu"), metrics.get("memory")
            if seen is None or cpu is None or memory is None:
                continue
            seen = float(seen)
            previous = self._last_seen.get(address)
            if previous is not None and seen <= previous:
                continue  # no heartbeat since the previous poll
            self._last_seen[address] = seen
            known = self.workers.get(address, {})
            proc = self.processes.get(address)
            if proc is None:
                host = str(info.get("host") or known.get("host") or "")
                proc = ProcessResources(0, host, self.max_records, hold=HEARTBEAT_HOLD)
                proc.workers = [address]
                self.processes[address] = proc
            elif previous is not None:  # a sample stands until the next heartbeat
                proc.hold = min(max(proc.hold or 0.0, 3 * (seen - previous)), 60.0)
            if not proc.pid and known.get("pid"):
                proc.pid = int(known["pid"])
            rows = {"time": [seen], "cpu": [float(cpu)], "memory": [memory], "processes": [1]}
            proc.extend(rows, self.to_perf)
            self.log.heartbeat(address, info, self.to_perf)  # memory table, reduced

    def _distributed_profile(self) -> None:
        """distributed's own stack samples since the plugins came, as one group."""
        since = self._since
        now = time.time() + self.clock_offset
        tree = self.client.profile(start=since, stop=now)
        if not isinstance(tree, Mapping) or not tree.get("count"):
            return  # its profiler is off (or nothing ran)
        # one tree for the whole time, placed now: in the run a profile() block records
        # (its history shows it in the last cycle), not in runs that ended earlier
        payload = _profile_payload(tree, ALL_TASKS, perf_counter(), self.topic)
        self.stacks.merge_remote(payload)
        self.reduced["stacks"] = (
            f"{self._why}: only the samples of distributed's profiler, every task in one "
            f"group {ALL_TASKS!r}"
        )

    def stop(self) -> None:
        """Collect the last batches, then remove the plugins and the event topic."""
        if not self.started:
            return
        self.started = False
        if self.registered and getattr(self.client, "status", None) == "running":
            self._final_batches()
        self._cleanup()

    def _final_batches(self) -> None:
        client = self.client
        if self._poller is not None:
            last = self._stop_heartbeats
            self._guard("heartbeat resources", client.sync, last, True, whole=False, **_WITHIN)
        if "stacks" in self.reduced:
            self._guard("distributed's profile", self._distributed_profile, whole=False)
        if "worker" in self.registered:
            finals = self._guard("worker drain", client.run, finish_worker, topic=self.topic)
            for msg in (finals or {}).values():
                if msg:
                    self._push(msg)
        name = self.topic
        last = self._guard("scheduler drain", self._on_scheduler, finish_probe, name=name)
        if last:
            self._push(last)
        deadline = perf_counter() + self.drain_timeout
        while self._inbox.gaps() and perf_counter() < deadline:
            time.sleep(0.005)
        if self._inbox.gaps():
            events = self._guard("event log", client.get_events, self.topic) or ()
            for _, msg in events:
                self._push(msg)
        self.missing_batches += self._inbox.flush_gaps()
        if self.rows_from == "workers":  # rows whose graph never came
            with self._inbox.lock:
                self._apply_batch(self.assembler.finish())

    def _cleanup(self) -> None:
        client = self.client
        LOCAL_SINKS.pop(self.topic, None)
        if self._poller is not None:  # (stopped already unless the drain was skipped)
            poller = self._poller
            with contextlib.suppress(Exception):  # a closed loop: the task went with it
                client.loop.add_callback(poller.cancel)
            self._poller = None
        if client is None or getattr(client, "status", None) != "running":
            return
        if self._subscribed:
            self._subscribed = False
            self._guard("unsubscribing", client.unsubscribe_topic, self.topic)
            # distributed (2026.8) leaves the handler in place: it would keep this
            # collector, and all it recorded, alive as long as the client. Messages still
            # on their way (the workers' last rows) must find a handler, though, or
            # distributed logs an error in the user's notebook: one that drops them, for
            # a while
            handlers = getattr(client, "_event_handlers", None)
            if isinstance(handlers, dict) and self.topic in handlers:
                handlers[self.topic] = _drop_late_event
                _forget_handler_later(client, self.topic)
        if "worker" in self.registered:
            self._guard("removing the worker plugin", client.unregister_worker_plugin, self.topic)
        if "scheduler" in self.registered:
            self._guard(
                "removing the scheduler plugin", client.unregister_scheduler_plugin, self.topic
            )
        self.registered = []
        self._guard(
            "removing the topic",
            self._on_scheduler,
            forget_topic,
            topic=self.topic,
            client=client.id,
        )

    def _on_scheduler(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """``fn(dask_scheduler=..., **kwargs)`` on the scheduler (awaited if it is a
        coroutine function). A scheduler in this process is called on the client's event
        loop, its own: ``client.run_on_scheduler`` would log each call in the scheduler's
        event log, which keeps up to 100,000 of them (a few hundred bytes each, per run)."""
        client = self.client
        if not self.local:
            return client.run_on_scheduler(fn, **kwargs)
        scheduler = client.cluster.scheduler

        async def call() -> Any:
            result = fn(dask_scheduler=scheduler, **kwargs)
            return await result if inspect.isawaitable(result) else result

        return client.sync(call)

    def __enter__(self) -> DistributedCollector:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ receiving
    def _on_event(self, event: Any) -> None:
        """Handler of the topic (the client's event loop thread); never raises."""
        try:
            self._push(event[1])
        except Exception as exc:
            self._fail(f"receiving: {exc!r}")

    def _push(self, msg: Any) -> None:
        msg = unpack(msg)
        if not isinstance(msg, dict) or msg.get("v") != MESSAGE_VERSION:
            return
        self._inbox.push(msg)

    def _apply(self, msg: dict[str, Any]) -> None:
        try:
            if msg["src"] == "scheduler":
                self._apply_scheduler(msg)
            else:
                self._apply_worker(msg)
            if msg.get("error"):
                self._fail(str(msg["error"]))
        except Exception as exc:
            self._fail(f"applying a batch: {exc!r}")
            return
        callback = self.on_batch
        if callback is not None:
            self._guard("batch callback", callback, self)

    @property
    def worker_labels(self) -> Lookup:
        """Labels of the worker threads seen (ids of the scheduler's task rows)."""
        return self.tasks.workers

    def _apply_scheduler(self, msg: dict[str, Any]) -> None:
        if msg.get("mode") == "graphs":  # the workers measure the rows: joined here
            msg = {**msg, **self.assembler.scheduler(msg)}
        self._apply_batch(msg)
        self._log_errors(self.log.scheduler_tables(msg, self.to_perf))

    def _apply_batch(self, msg: dict[str, Any]) -> None:
        """A batch in the scheduler probe's format (from it, or made by the assembler)."""
        self.groups.extend(msg["groups"])
        self.tasks.workers.extend(msg["workers"])
        for address, info in msg["worker_info"].items():
            self.workers.setdefault(address, {}).update(info)
            proc = self.processes.get(address)  # a worker's heartbeats (no worker plugin)
            if proc is not None and not proc.pid and info.get("pid"):
                proc.pid = int(info["pid"])
        if self.router is not None:
            self.router.scheduler_batch(self, msg)
        else:
            self.tasks.extend(msg["tasks"], self.to_perf, corrected=bool(msg.get("corrected")))
            self.cache.extend(msg["cache"], self.to_perf)
        self.computes = int(msg["computes"])
        self.dropped_tasks = int(msg["dropped"])

    def _apply_worker(self, msg: dict[str, Any]) -> None:
        src = str(msg["src"])
        proc = self.processes.get(src)
        if proc is None:
            proc = self.processes[src] = ProcessResources(msg["pid"], msg["host"], self.max_records)
        proc.workers = list(msg["workers"])
        # a worker's wall clock -> ours: add this (0 on our host: one clock)
        offset = float(msg.get("delay", 0.0)) - self.clock_offset
        for address in proc.workers:
            self.workers.setdefault(address, {}).update(pid=msg["pid"], hostname=msg["host"])
            self.clocks[address] = 0.0 if msg["host"] == self.host else offset
            if msg.get("versions"):
                self.workers[address]["versions"] = dict(msg["versions"])
        if self.router is not None:
            self.router.worker_batch(msg)
        elif msg.get("delays"):
            self.tasks.correct(msg["delays"])
        if msg.get("rows") or msg.get("row_texts"):  # task rows measured there
            self._apply_batch(self.assembler.worker(msg) | {"now": msg.get("now")})
        shift = float(msg["clock"]) + self.to_perf  # worker perf_counter -> ours
        if msg.get("resources"):
            proc.extend(msg["resources"], shift)
        stacks = msg.get("stacks")
        if stacks:
            stacks["buckets"] = [[t + shift, groups] for t, groups in stacks["buckets"]]
            self.stacks.merge_remote(stacks)
        if msg.get("tables"):  # actions, transfers, memory per worker (scheduler clock)
            self._log_errors(self.log.worker_tables(msg["tables"], self.to_perf))

    # ------------------------------------------------------------ cluster tables
    def _log_errors(self, errors: list[str]) -> None:
        for error in errors:  # that part is off on that worker (or the scheduler)
            self._fail(f"cluster tables: {error}", whole=False)

    def _reduce_tables(self, why: str) -> None:
        """Workers without daskprofile: actions from the scheduler's ``startstops``, memory
        from its heartbeats, no transfer logs (``reduced`` says so)."""
        o = self.options
        if o["tasks"]:
            name = self.topic
            enabled = self._guard(
                "scheduler actions",
                self._on_scheduler,
                enable_actions,
                name=name,
                whole=False,
            )
            if enabled:
                self.reduced["actions"] = (
                    f"{why}: from the scheduler's startstops (disk reads and writes in the "
                    "workers' clocks; bytes not known)"
                )
            self.reduced["transfers"] = f"{why}: no transfer logs"
        if o["resources"]:
            self.reduced["memory"] = (
                f"{why}: from the scheduler's heartbeats (no spilled keys, no spill counters)"
            )

    # ------------------------------------------------------------ reading
    def tasks_snapshot(self) -> dict[str, Any]:
        """The ``tasks`` table (Run.raw format); workers are ``"<address> thread <n>"``."""
        out = self.tasks.snapshot()
        out["dropped"] = int(out["dropped"]) + self.dropped_tasks
        return out

    def cache_snapshot(self) -> dict[str, Any]:
        """The ``cache`` table: bytes held in workers' memory per group (after each change)."""
        return self.cache.snapshot()

    def awaits_first_samples(self) -> bool:
        """Whether a worker that took the plugin has sent no resource sample yet (for at
        most :data:`LATE_REPORT` seconds): live totals wait for it, as it may have begun
        sampling before the processes that reported first."""
        if not self.plugin_workers or perf_counter() - self._plugin_at > LATE_REPORT:
            return False
        seen = {a for p in list(self.processes.values()) if p.columns.n for a in p.workers}
        return not self.plugin_workers <= seen

    def resources_snapshot(self) -> dict[str, np.ndarray]:
        """The ``resources`` table: the cluster's worker processes summed on a ``dt`` grid."""
        series = [p.snapshot() for p in list(self.processes.values())]
        return cluster_totals(series, self.options["dt"])

    def process_resources(self) -> list[dict[str, Any]]:
        """Per worker process: ``pid``, ``host``, ``workers`` and its own samples."""
        return [
            {"pid": p.pid, "host": p.host, "workers": list(p.workers), **p.snapshot()}
            for p in list(self.processes.values())
        ]

    def trees(self) -> dict[str, Tree]:
        """``{group: tree}`` of the workers' stack samples."""
        return self.stacks.trees()

    def history(self) -> list[tuple[float, float, dict[str, Tree]]]:
        """``[(t_start, t_end, {group: tree})]`` per cycle."""
        return self.stacks.history()

    def snapshot(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks_snapshot(),
            "cache": self.cache_snapshot(),
            "resources": self.resources_snapshot(),
            "stacks": self.trees(),
        }

    def info(
        self, t0: float = 0.0, rows: Mapping[str, tuple[int, int]] | None = None
    ) -> dict[str, Any]:
        """JSON-friendly description for ``run.meta.distributed`` (times: s since ``t0``).

        ``rows``: per worker process (its address), the run's resource samples ``(start,
        stop)`` (absolute sample indices): those of earlier runs and those that came after
        this one was kept are left out; a run's live readers read the same rows, so live
        and kept series are the same.
        """
        scheduler = self.scheduler_address or getattr(
            getattr(self.client, "scheduler", None), "address", None
        )
        processes = []
        for src, proc in list(self.processes.items()):
            start, stop = (0, None) if rows is None else rows.get(src, (0, None))
            with proc.columns.lock:
                p, n = proc.columns.since_locked(start)
            first = n - len(p["time"])  # the absolute index of its first sample
            if stop is not None and stop < n:
                p = {k: v[: max(0, len(v) - (n - stop))] for k, v in p.items()}
            processes.append(
                {
                    "first": int(first),
                    "pid": int(proc.pid),
                    "host": str(proc.host),
                    "workers": list(proc.workers),
                    "time": (p["time"] - t0).round(6).tolist(),
                    "cpu": p["cpu"].round(3).tolist(),
                    "memory": p["memory"].tolist(),
                }
            )
        return {
            "scheduler": scheduler,
            "workers": {a: dict(i) for a, i in sorted(self.workers.items())},
            "processes": processes,
            "computes": self.computes,
            "cache_metric": "nbytes",
            "clock_offset": self.clock_offset,
            "clocks": {a: round(c, 6) for a, c in sorted(self.clocks.items())},
            "missing_batches": self.missing_batches,
            "options": dict(self.options),
        }


def scheduler_here(client: Any) -> bool:
    """Whether ``client``'s scheduler runs in this process (a ``LocalCluster`` made here;
    not a scheduler reached by address, nor a remote cluster's handle)."""
    try:
        from distributed import Scheduler
    except ImportError:  # pragma: no cover - distributed is what calls us
        return False
    scheduler = getattr(getattr(client, "cluster", None), "scheduler", None)
    if not isinstance(scheduler, Scheduler):
        return False
    address = getattr(getattr(client, "scheduler", None), "address", None)
    return bool(address) and scheduler.address == address


def _drop_late_event(event: Any) -> None:
    """The handler of a topic no longer read: its late messages are dropped."""


def _forget_handler_later(client: Any, topic: str) -> None:
    """Remove ``topic``'s :func:`_drop_late_event` handler :data:`LATE_EVENTS` s from now."""

    def forget() -> None:
        handlers = getattr(client, "_event_handlers", None)
        if isinstance(handlers, dict) and handlers.get(topic) is _drop_late_event:
            del handlers[topic]

    with contextlib.suppress(Exception):  # a closed loop: the handlers went with it
        loop = client.loop
        loop.add_callback(lambda: loop.call_later(LATE_EVENTS, forget))


async def _within(call: Any, timeout: float) -> Any:
    """``await call``, or ``asyncio.TimeoutError`` after ``timeout`` seconds. Unlike
    ``asyncio.wait_for``, a call that times out is cancelled without waiting for it: a
    cancelled call to the scheduler closes its connection first, which can take long."""
    task = asyncio.ensure_future(call)
    task.add_done_callback(_retrieved)  # left behind (timed out, or we were cancelled)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        raise asyncio.TimeoutError
    return task.result()


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark a task's outcome as seen (asyncio logs exceptions nobody retrieved)."""
    if not task.cancelled():
        task.exception()


#: exceptions of an import that failed (as distributed may hand them back: their text)
_IMPORT_ERRORS = ("ModuleNotFoundError", "ImportError")
#: ``Name('text')`` of an exception distributed could not rebuild (sent back as Exception)
_STAND_IN = re.compile(r"(\w+)\((['\"])(.*?)\2?\)?", re.S)


def _describe(exc: BaseException) -> str:
    """``"ModuleNotFoundError: No module named 'daskprofile'"``: the exception's type and text,
    also when distributed hands a worker's exception back as a plain ``Exception`` holding
    its repr."""
    text = str(exc)
    if type(exc) is Exception:
        found = _STAND_IN.fullmatch(text)
        return f"{found.group(1)}: {found.group(3)}" if found else text
    return f"{type(exc).__name__}: {text}"


def _profile_payload(tree: Mapping[str, Any], group: str, t: float, token: str) -> dict[str, Any]:
    """A tree of distributed's profiler as the payload ``StackCollector.merge_remote`` reads:
    its stacks (outermost frame first) with their own samples, at time ``t``, in ``group``."""
    frames: dict[FrameInfo, int] = {}  # frame -> id (0 is the receiver's overflow marker)
    stacks: list[tuple[tuple[int, ...], int]] = []
    todo: list[tuple[Mapping[str, Any], tuple[int, ...]]] = [
        (child, ()) for child in (tree.get("children") or {}).values()
    ]
    while todo:
        node, outer = todo.pop()
        info = _frame_info(node)
        fid = frames.setdefault(info, len(frames) + 1)
        stack = (*outer, fid)
        children = list((node.get("children") or {}).values())
        own = int(node.get("count") or 0) - sum(int(c.get("count") or 0) for c in children)
        if own > 0:
            stacks.append((stack, own))
        todo.extend((child, stack) for child in children)
    return {
        "v": PAYLOAD_VERSION,
        "proc": f"distributed-profile-{token}",
        "pid": 0,
        "frames": [(fid, *info) for info, fid in frames.items()],
        "buckets": [(t, {group: stacks})] if stacks else [],
        "threads": {},
    }


def _frame_info(node: Mapping[str, Any]) -> FrameInfo:
    """The frame of one node of distributed's tree (identifier ``name;filename;first``)."""
    desc = node.get("description") or {}
    name, filename = str(desc.get("name", "?")), str(desc.get("filename", "?"))
    line = int(desc.get("line_number") or 0)
    first = str(node.get("identifier", "")).rsplit(";", 1)[-1]
    return FrameInfo(filename, name, int(first) if first.isdigit() else line, line)


def task_worker_address(label: str) -> str:
    """The worker address in a tasks-table ``worker`` label of a distributed run."""
    return worker_address(label)
