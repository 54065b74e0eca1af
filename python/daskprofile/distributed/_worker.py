"""Worker side: per-process stack and resource sampling, streamed to the client.

One :class:`ProcessProbe` per worker process and run (workers of a ``processes=False``
cluster share the kernel's process, hence one probe for all of them). It owns:

* a stack sampler thread that, every ``interval``, takes the stacks of the threads running
  tasks (``Worker.active_threads``) *including the innermost frame*, cut at distributed's
  task runner, counted per task group (daskprofile's sampler engine and payload format);
* daskprofile's :class:`~daskprofile.collectors.resources.ResourceCollector` (CPU and RSS
  of the worker process and its children every ``dt``).

:class:`WorkerProbe` (the ``WorkerPlugin``) attaches its worker to the probe and drains it
every ``flush`` seconds from the worker's event loop into ``Worker.log_event``, packed to bytes
(:func:`~._common.pack`: neither the worker nor the scheduler walks them). Times leave
the worker in the scheduler's clock. Errors switch the probe off and travel in the next
message; nothing raises into the worker. Each worker's actions, transfers and memory
samples (:mod:`._worker_tables`) ride in the same messages (``tables``).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from time import perf_counter
from time import time as wall_time
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin
from tornado.ioloop import PeriodicCallback

from ..collectors import _frames
from ..collectors.stackcut import Memo, Rules, cut
from ..collectors.stacks import _WorkerSampler
from ..keys import GroupIndex, key_label
from ..versions import versions
from ._common import MESSAGE_VERSION, pack
from ._worker_rows import TaskRows
from ._worker_tables import WorkerTables, drain_all

__all__ = ["ProcessProbe", "WorkerProbe", "finish_worker"]

#: states of a task running, and those it reaches from there having run
_RUNNING = frozenset({"executing", "long-running"})
_RAN = frozenset({"memory", "error"})

#: where workers' stacks are cut (see :mod:`~daskprofile.collectors.stackcut`): at
#: distributed's task runner, and at dask's task-calling machinery and distributed's context
#: managers around the call where they sit at the outer end of a stack. A sample of nothing
#: else (between tasks) is empty, and not counted.
_CUT = Rules(
    stop=("distributed/worker.py",),
    omit=(
        "dask/_task_spec.py",
        "dask/core.py",
        "dask/utils.py",
        "contextlib.py",
        "distributed/metrics.py",
        "distributed/utils.py",
    ),
)


class _TaskThreadSampler(_WorkerSampler):
    """daskprofile's sampler engine fed by distributed's ``active_threads``.

    Keeps the innermost frame of each sample (distributed's own profiler drops it) and
    cuts each stack where distributed calls the task.
    """

    def __init__(
        self, interval: float, cycle: float, spent: list[float], switch: float | None = None
    ) -> None:
        # without a switch interval to set, short tasks are not chased either (the
        # catcher lowers it): the live panel's default, ~50 us/task less on tiny tasks
        super().__init__(
            interval,
            cycle,
            idle_timeout=float("inf"),
            spent=spent,
            switch_interval=switch,
            catch_short_tasks=switch is not None,
        )
        self.workers: list[Any] = []
        self._codes: Memo = {}
        self._groups = GroupIndex()

    def idle(self) -> bool:
        return False  # stopped by the plugin's teardown, never on its own

    def _running(self) -> dict[int, tuple[Any, Any]]:
        running: dict[int, tuple[Any, Any]] = {}
        for w in list(self.workers):
            tasks = w.state.tasks
            for ident, key in w.active_threads.copy().items():
                running[ident] = (key, tasks.get(key))
        return running

    def sample(self) -> int:
        """One sample of every thread running a task in this process's workers; how many."""
        running = self._running()
        self.ticks += 1
        if not running:
            return 0
        taken = 0
        stacks = _frames.read(running)
        now = perf_counter()
        groups = self._groups
        with self.lock:
            counts = self._bucket(int(now // self.cycle))
            for ident, frames in stacks.items():
                if frames is None:
                    self.unreadable += 1
                    continue
                stack = cut(frames, _CUT, self._codes, self.table.intern)
                if not stack:
                    continue  # between tasks: only distributed's machinery on the stack
                key, ts = running[ident]
                group = groups.groups[groups.index(key, getattr(ts, "run_spec", None))]
                per_group = counts.setdefault(group, {})
                per_group[stack] = per_group.get(stack, 0) + 1
                self.by_thread[ident] = self.by_thread.get(ident, 0) + 1
                taken += 1
        return taken


class ProcessProbe:
    """Stack and resource sampling of one worker process for one run."""

    def __init__(self, topic: str, settings: dict[str, Any]) -> None:
        self.topic = topic
        self.settings = settings
        self.token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.lock = threading.RLock()
        self.seq = 0
        self.error: str | None = None
        self._error_sent = False
        self.finished = False
        self.workers: list[Any] = []
        self.stacks: _TaskThreadSampler | None = None
        self.resources: Any = None
        self._cursor = 0
        #: ``[seconds, tasks]`` of the tasks this process's workers ran, for the stack sampler
        self.spent = [0.0, 0.0]
        #: worker and client share a clock: distributed's noisy clock correction is undone
        self.same_host = settings.get("client_host") == socket.gethostname()
        self.delays: list[tuple[str, float]] = []  # (key, correction applied by distributed)
        #: each attached worker's actions, transfers and memory (see _worker_tables)
        self.tables: dict[str, WorkerTables] = {}
        #: each attached worker's task rows, when the workers measure them (see
        #: _worker_rows); their groups are named once for the process
        self.rows: dict[str, TaskRows] = {}
        self.row_groups = GroupIndex()
        self._row_groups_sent = 0

    def task_done(self, ts: Any) -> None:
        """Add the compute time of a task that finished executing to :attr:`spent`."""
        for entry in reversed(getattr(ts, "startstops", None) or ()):
            if entry.get("action") == "compute":
                self.spent[0] += entry["stop"] - entry["start"]
                self.spent[1] += 1
                return

    def task_executing(self, key: Any, delay: float) -> None:
        """Note the clock correction distributed adds to this task's start/stop."""
        if delay and self.same_host and len(self.delays) < 1_000_000:
            self.delays.append((key_label(key), delay))

    # ------------------------------------------------------------ lifecycle
    def attach(self, worker: Any) -> None:
        """Sample ``worker``'s task threads too; starts the samplers on first use."""
        with self.lock:
            if worker not in self.workers:
                self.workers.append(worker)
            if self.stacks is None and self.resources is None and not self.finished:
                self._guard(self._start)
            if self.stacks is not None:
                self.stacks.workers = list(self.workers)

    def detach(self, worker: Any) -> bool:
        """Stop sampling ``worker``; returns True (and stops) when no worker is left."""
        with self.lock:
            if worker in self.workers:
                self.workers.remove(worker)
            if self.stacks is not None:
                self.stacks.workers = list(self.workers)
            if self.workers:
                return False
        self.stop()
        return True

    def _start(self) -> None:
        s = self.settings
        if s["stacks"]:
            # the switch interval is lowered only while tasks keep the sampler late: lowered
            # for good it cost the worker's event loop ~10% more CPU on numpy tasks
            switch = s.get("switch_interval") or None
            self.stacks = _TaskThreadSampler(s["interval"], s["cycle"], self.spent, switch)
            self.stacks.start("daskprofile-distributed-stacks")
        if s["resources"]:
            from ..collectors.resources import ResourceCollector

            self.resources = ResourceCollector(s["dt"])
            # its first sample lists the process tree (ms): not in the worker's event loop
            _in_background("start", self._start_resources, self.resources)

    def _start_resources(self, resources: Any) -> None:
        try:
            resources.start()
        except Exception as exc:
            self.error = self.error or f"worker {os.getpid()}: resource sampler: {exc!r}"
        with self.lock:
            stopped = self.resources is not resources
        if stopped:  # stop() came first
            resources.stop()

    def stop(self) -> None:
        """Stop both samplers (idempotent); undrained samples are discarded.

        The resource sampler ends in the background (its last sample takes milliseconds);
        its thread is gone shortly after.
        """
        stacks, self.stacks = self.stacks, None
        with self.lock:
            resources, self.resources = self.resources, None
        if stacks is not None:
            stacks.stop()
        if resources is not None:
            _in_background("stop", resources.stop)

    # ------------------------------------------------------------ draining
    def drain(
        self, worker: Any, final: bool = False, rows_only: bool = False
    ) -> dict[str, Any] | None:
        """The message with what was sampled since the previous one (None: nothing new);
        ``rows_only``: only the task rows (sent soon after they are made, between the
        periodic messages)."""
        with self.lock:
            if self.finished:
                return None
            make = self._rows_message if rows_only else self._message
            msg: dict[str, Any] | None = self._guard(make, worker)
            if msg is None and self.error is not None and not self._error_sent:
                msg = self._envelope(worker)
            if msg is not None:
                msg["error"] = None if self._error_sent else self.error
                self._error_sent = self.error is not None
                msg["seq"] = self.seq
                self.seq += 1
            if final:
                self.finished = True
        if final:
            self.stop()
            if msg is not None:
                msg["final"] = True
        return msg

    def _message(self, worker: Any) -> dict[str, Any] | None:
        stacks = self.stacks.drain() if self.stacks is not None else None
        if stacks is not None:  # msgpack: string map keys only
            stacks["threads"] = {str(k): n for k, n in stacks["threads"].items()}
        resources = None
        if self.resources is not None:
            rows, self._cursor = self.resources.since(self._cursor)
            if len(rows["time"]):
                resources = {k: v.tolist() for k, v in rows.items()}
            if self.resources.error:
                raise RuntimeError(f"resource sampler: {self.resources.error}")
        if self.stacks is not None and self.stacks.error:
            raise RuntimeError(f"stack sampler: {self.stacks.error}")
        delays, self.delays = self.delays, []
        tables = drain_all(self.tables)  # never raises: its errors travel inside
        rows = self._rows()
        if not (stacks or resources or delays or tables or rows or self.seq == 0):
            return None
        msg = self._envelope(worker)
        msg["stacks"] = stacks
        msg["resources"] = resources
        msg["delays"] = delays
        msg["tables"] = tables
        if rows:
            msg.update(rows)
        return msg

    @staticmethod
    def encode(msg: dict[str, Any]) -> bytes:
        """``msg`` as it is sent (:func:`~._common.pack`)."""
        return pack(msg)

    def _rows_message(self, worker: Any) -> dict[str, Any] | None:
        rows = self._rows()
        if rows is None:
            return None
        msg = self._envelope(worker)
        msg.update(rows)
        return msg

    def _rows(self) -> dict[str, Any] | None:
        """The workers' task rows since the previous message: ``rows`` (address ->
        columns), ``row_groups`` (group names new since then; ids follow), ``row_texts``
        (failed tasks' texts by key label) and ``rows_dropped``; None when there are none."""
        per_worker, texts, dropped = {}, {}, 0
        for address, task_rows in list(self.rows.items()):
            columns = task_rows.drain()
            if columns is not None:
                per_worker[address] = columns
            texts.update(task_rows.texts())
            dropped += task_rows.dropped
        if not per_worker and not texts:
            return None
        names = self.row_groups.groups
        new, self._row_groups_sent = names[self._row_groups_sent :], len(names)
        return {"rows": per_worker, "row_groups": new, "row_texts": texts, "rows_dropped": dropped}

    def _envelope(self, worker: Any) -> dict[str, Any]:
        delay = 0.0 if self.same_host else float(getattr(worker, "scheduler_delay", 0.0) or 0.0)
        return {
            "v": MESSAGE_VERSION,
            "src": self.token,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "workers": [str(w.address) for w in self.workers],
            # perf_counter -> scheduler clock: add this
            "clock": wall_time() + delay - perf_counter(),
            # when it was made (scheduler clock)
            "now": wall_time() + delay,
            # this host's wall clock -> the scheduler's (0: the client's host, one clock)
            "delay": delay,
            # what runs the tasks here (the first message only)
            "versions": versions() if self.seq == 0 else None,
            # what distributed adds to each worker's task times now (taken off again on
            # this host, where the clocks are one; exactly per task with ``delays``)
            "scheduler_delay": {
                str(w.address): float(getattr(w, "scheduler_delay", 0.0) or 0.0)
                for w in self.workers
            }
            if self.same_host
            else {},
            "stacks": None,
            "resources": None,
            "delays": [],
        }

    def _guard(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            if self.error is None:
                self.error = f"worker {os.getpid()}: {exc!r}"
            self.stop()
            return None


def _in_background(what: str, fn: Any, *args: Any) -> None:
    name = f"daskprofile-distributed-{what}"
    threading.Thread(target=fn, args=args, name=name, daemon=True).start()


_probes: dict[str, ProcessProbe] = {}
_probes_lock = threading.Lock()


def _probe_for(topic: str, settings: dict[str, Any]) -> ProcessProbe:
    with _probes_lock:
        probe = _probes.get(topic)
        if probe is None:
            probe = _probes[topic] = ProcessProbe(topic, settings)
        return probe


def _drop_probe(topic: str, probe: ProcessProbe) -> None:
    with _probes_lock:
        if _probes.get(topic) is probe:
            del _probes[topic]


class WorkerProbe(WorkerPlugin):
    """Attaches a worker to its process's probe and streams the probe's samples."""

    idempotent = False

    def __init__(self, topic: str, settings: dict[str, Any]) -> None:
        self.topic = topic
        self.settings = dict(settings)
        self.worker: Any = None
        self.probe: ProcessProbe | None = None
        self.tables: WorkerTables | None = None
        self.rows: TaskRows | None = None
        self._callback: PeriodicCallback | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"topic": self.topic, "settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["topic"], state["settings"])  # type: ignore[misc]

    def setup(self, worker: Any) -> None:
        self.worker = worker
        self.probe = _probe_for(self.topic, self.settings)
        self.probe.attach(worker)
        self.tables = WorkerTables(worker, self.settings, self.probe.same_host)
        self.tables.start()
        self.probe.tables[self.tables.address] = self.tables
        if self.settings.get("rows"):  # task rows measured here (the scheduler numbers graphs)
            self.rows = TaskRows(worker, self.probe.same_host, self.probe.row_groups)
            self.rows.send = self.send_rows
            self.probe.rows[self.rows.address] = self.rows
        self._callback = PeriodicCallback(self.flush, self.settings["flush"] * 1000)
        self._callback.start()
        # at once: the client knows this worker's clock correction before any of its rows
        self.flush()

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        probe, worker, rows = self.probe, self.worker, self.rows
        if probe is None or worker is None:
            return
        try:
            if finish == "waiting":  # to be computed here
                if rows is not None:
                    rows.arrived(key)
            elif finish == "executing":
                if rows is not None:
                    rows.executing(key)
                else:  # the scheduler's rows carry distributed's correction: say which
                    probe.task_executing(key, float(worker.scheduler_delay or 0.0))
            elif start in _RUNNING:
                ts = worker.state.tasks.get(key)
                if rows is None:
                    probe.task_done(ts)
                elif ts is not None and finish in _RAN:
                    ran = rows.done(ts, finish)  # (one read of its startstops for both)
                    if ran:
                        probe.spent[0] += ran
                        probe.spent[1] += 1
                else:
                    probe.task_done(ts)
                    rows.forget(key)
                tables = self.tables  # a transfer, a disk read or write besides compute
                if tables is not None and ts is not None and len(ts.startstops) > 1:
                    tables.note(ts, finish)
            elif finish == "released" and rows is not None and start != "memory":
                rows.forget(key)  # stolen or cancelled before it ran
        except Exception as exc:  # never raise into the worker
            probe.error = probe.error or f"worker {os.getpid()}: {exc!r}"

    def teardown(self, worker: Any) -> None:
        if self.rows is not None:
            self.flush()  # a worker leaving mid-run: the rows it made are sent first
        callback, self._callback = self._callback, None
        if callback is not None:
            callback.stop()
        tables, self.tables = self.tables, None
        probe, self.probe = self.probe, None
        rows, self.rows = self.rows, None
        if rows is not None:
            rows.send = None
        if tables is not None:
            tables.stop()
            if probe is not None:
                probe.tables.pop(tables.address, None)
        if rows is not None and probe is not None:
            probe.rows.pop(rows.address, None)
        if probe is not None and probe.detach(worker):
            _drop_probe(self.topic, probe)

    def send_rows(self) -> None:
        """Send the task rows made since the previous message (worker's event loop)."""
        self.flush(rows_only=True)

    def flush(self, rows_only: bool = False) -> None:
        """Send what the probe sampled since the previous message (worker's event loop)."""
        probe = self.probe
        if probe is None:
            return
        msg = None
        try:
            msg = probe.drain(self.worker, rows_only=rows_only)
            if msg is not None:
                self.worker.log_event(self.topic, probe.encode(msg))
        except Exception as exc:  # never raise into the worker: send the error instead
            error = f"worker {os.getpid()}: {exc!r}"
            probe.error = probe.error or error
            probe.stop()
            if msg is not None:  # keep the numbering without gaps
                keep = ("v", "src", "seq", "pid", "host", "workers", "clock")
                stub = {k: msg[k] for k in keep} | {"error": error}
                self.worker.log_event(self.topic, pack(stub))


def finish_worker(dask_worker: Any, topic: str) -> dict[str, Any] | None:
    """Stop this worker's probe for ``topic`` and return its last message (``client.run``)."""
    plugins = dask_worker.plugins.values()
    plugin = next((p for p in plugins if isinstance(p, WorkerProbe) and p.topic == topic), None)
    if plugin is None or plugin.probe is None:
        return None
    callback, plugin._callback = plugin._callback, None
    if callback is not None:
        callback.stop()
    return plugin.probe.drain(dask_worker, final=True)
