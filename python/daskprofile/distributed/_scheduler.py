"""Scheduler side: a plugin that records tasks as they finish and streams them in batches.

Runs inside the scheduler's event loop. ``transition`` does a few dict operations per task;
every ``flush`` seconds the rows gathered since the previous batch are published with
``Scheduler.log_event`` on the run's topic, which the client subscribed to. Times are the
workers' ``compute`` start/stop (``startstops``, already in the scheduler's clock) and the
time the task became ``processing`` on the scheduler. Nothing here ever raises into the
scheduler: the first error switches the plugin off and is sent in the next batch.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Hashable
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time
from tornado.ioloop import PeriodicCallback

from ..keys import GroupIndex, key_label
from ._common import MESSAGE_VERSION, exception_name, worker_label

__all__ = ["SchedulerProbe", "finish_probe", "forget_topic", "scheduler_clock"]

#: task columns of a batch, in order
TASK_FIELDS = ("key", "group", "worker", "submit", "start", "stop", "error", "compute")


class SchedulerProbe(SchedulerPlugin):
    """Records the tasks of one run on the scheduler and publishes them in batches.

    ``clients``: ids of the clients whose graphs are recorded (None: every client).
    ``tasks``/``cache``: what to record. ``flush``: seconds between batches.
    ``max_pending``: task rows kept between two batches (more are counted as dropped).
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
        self._compute_of: dict[Hashable, int] = {}
        self._processing: dict[Hashable, float] = {}
        self._groups = GroupIndex()
        self._groups_sent = 0
        self._workers: dict[tuple[Any, Any], int] = {}
        self._by_task_group: dict[str, int] = {}
        self._threads_per_worker: dict[str, int] = {}
        self._worker_labels: list[str] = []
        self._workers_sent = 0
        self._worker_info: dict[str, dict[str, Any]] = {}
        self._rows: list[tuple[Any, ...]] = []  # one tuple of TASK_FIELDS per task
        self._memory: dict[Hashable, tuple[int, int]] = {}  # key -> (group id, nbytes)
        self._occupancy: list[int] = []
        self._changed: set[int] = set()  # groups whose bytes held changed since the batch
        self._callback: PeriodicCallback | None = None

    # ------------------------------------------------------------ scheduler hooks
    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._callback = PeriodicCallback(self.flush, self.flush_interval * 1000)
        self._callback.start()

    async def close(self) -> None:
        self._stop_callback()

    def update_graph(  # type: ignore[override]
        self, scheduler: Any, *, client: str, tasks: list[Hashable], **kw: Any
    ) -> None:
        if self.off or (self.clients is not None and client not in self.clients):
            return
        try:
            self.computes += 1
            number = self.computes
            compute_of = self._compute_of
            for key in tasks:
                compute_of[key] = number
        except Exception as exc:
            self._fail(exc)

    def transition(self, key: Hashable, start: str, finish: str, *args: Any, **kw: Any) -> None:
        if self.off:
            return
        try:
            if finish == "processing":
                if self.clients is None or key in self._compute_of:
                    self._processing[key] = time()
            elif start == "processing":
                submit = self._processing.pop(key, None)
                if submit is not None and finish in ("memory", "erred"):
                    self._finished(key, submit, finish, kw)
            elif start == "memory" and self.record_cache:
                self._released(key)
            if finish == "forgotten":
                self._compute_of.pop(key, None)
        except Exception as exc:
            self._fail(exc)

    # ------------------------------------------------------------ recording
    def _finished(self, key: Hashable, submit: float, finish: str, kw: dict[str, Any]) -> None:
        ts = self.scheduler.tasks.get(key)
        gid = self._group_id(key, ts)
        if finish == "memory" and self.record_cache:
            self._stored(key, gid, kw.get("nbytes"))
        if not self.record_tasks:
            return
        if len(self._rows) >= self.max_pending:
            self.dropped += 1
            return
        start, stop = _compute_span(kw.get("startstops"), submit)
        address = kw.get("worker")
        wid = self._workers.get((address, kw.get("thread")))
        if wid is None:
            wid = self._worker_id(address if isinstance(address, str) else "", kw)
        error = None if finish == "memory" else exception_name(kw.get("exception_text"))
        compute = self._compute_of.get(key, 0)
        label = key if type(key) is str else key_label(key)
        self._rows.append((label, gid, wid, submit, start, stop, error, compute))

    def _group_id(self, key: Hashable, ts: Any) -> int:
        """Group id, memoised per distributed TaskGroup (fused tasks named after layers)."""
        tg = getattr(ts, "group", None)
        name = getattr(tg, "name", None)
        gid = self._by_task_group.get(name) if name is not None else None
        if gid is None:
            gid = self._groups.index(key, getattr(ts, "run_spec", None))
            if name is not None:
                self._by_task_group[name] = gid
        return gid

    def _worker_id(self, address: str, kw: dict[str, Any]) -> int:
        ident = (address, kw.get("thread"))
        wid = self._workers.get(ident)
        if wid is None:
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

    def _stored(self, key: Hashable, gid: int, nbytes: Any) -> None:
        size = int(nbytes) if isinstance(nbytes, (int, float)) else 0
        old = self._memory.get(key)
        if old is not None:
            self._add(old[0], -old[1])
        self._memory[key] = (gid, size)
        self._add(gid, size)

    def _released(self, key: Hashable) -> None:
        old = self._memory.pop(key, None)
        if old is not None:
            self._add(old[0], -old[1])

    def _add(self, gid: int, nbytes: int) -> None:
        occupancy = self._occupancy
        while gid >= len(occupancy):
            occupancy.append(0)
        occupancy[gid] += nbytes
        self._changed.add(gid)

    # ------------------------------------------------------------ batches
    def batch(self) -> dict[str, Any] | None:
        """The message holding everything new since the previous batch (None: nothing)."""
        groups = self._groups.groups
        if not (
            self._rows
            or self._changed
            or (self.error and not self._error_sent)
            or len(groups) > self._groups_sent
            or self.seq == 0
        ):
            return None
        now = time()
        msg: dict[str, Any] = {
            "v": MESSAGE_VERSION,
            "src": "scheduler",
            "seq": self.seq,
            "now": now,
            "groups": groups[self._groups_sent :],
            "workers": self._worker_labels[self._workers_sent :],
            "worker_info": self._worker_info,
            "tasks": _columns(self._rows, TASK_FIELDS),
            "cache": self._cache_rows(now),
            "computes": self.computes,
            "dropped": self.dropped,
            "error": None if self._error_sent else self.error,
        }
        self._error_sent = self.error is not None
        self.seq += 1
        self._groups_sent, self._workers_sent = len(groups), len(self._worker_labels)
        self._worker_info = {}
        self._rows = []
        return msg

    def _cache_rows(self, now: float) -> dict[str, list[Any]]:
        """Bytes held by each group that changed since the previous batch, at ``now``."""
        changed, self._changed = sorted(self._changed), set()
        occupancy = self._occupancy
        return {
            "time": [now] * len(changed),
            "group": changed,
            "metric": [occupancy[g] for g in changed],
        }

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
        self.off = True
        self._compute_of, self._processing, self._memory = {}, {}, {}
        return msg

    def _stop_callback(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback.stop()

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = f"scheduler plugin: {exc!r}"
        self.off = True


def _columns(rows: list[tuple[Any, ...]], fields: tuple[str, ...]) -> dict[str, list[Any]]:
    """Row tuples -> ``{field: column list}``."""
    if not rows:
        return {f: [] for f in fields}
    return {f: list(col) for f, col in zip(fields, zip(*rows, strict=True), strict=True)}


def _compute_span(startstops: Any, default: float) -> tuple[float, float]:
    """(start, stop) of the last ``compute`` entry of a task's ``startstops``."""
    for entry in reversed(startstops or ()):
        if entry.get("action") == "compute":
            return float(entry["start"]), float(entry["stop"])
    return default, default


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
