"""Worker side of the cluster tables: one worker's actions, transfers and memory.

A :class:`WorkerTables` per worker and run, made by the worker plugin, drained into each
message of its process's probe (``msg["tables"][address]``), on the worker's event loop:

* actions: a task's non-compute ``startstops`` (transfer, disk-read, disk-write,
  deserialize), noted by the plugin's ``transition`` hook when a task that has some leaves
  ``executing`` (tasks with only ``compute`` cost one ``len``); a transfer's bytes are
  those of the incoming transfer logged with the same start;
* transfers: the entries appended to ``Worker.transfer_incoming_log`` and
  ``transfer_outgoing_log`` since the previous drain (found by identity from the newest
  one: nothing is copied when nothing is new);
* memory: every ``dt`` (a callback on the event loop): process memory, managed bytes in
  RAM, spilled bytes and keys, and the ``SpillBuffer``'s spill/unspill counters.

Times leave in the scheduler's clock: distributed's clock correction is taken off again on
the client's host (one clock there), as for task rows. Any error switches these tables off
for this worker and travels in the next message; nothing raises into the worker.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping
from time import time
from typing import Any

from dask.utils import typename
from tornado.ioloop import PeriodicCallback

from ..keys import GroupIndex, key_label
from ._common import MEMORY_COUNTS

__all__ = ["WorkerTables", "drain_all"]

#: action rows, transfer rows or memory samples kept between two drains, at most
MAX_ROWS = 200_000
#: incoming transfers remembered (start -> bytes) to give transfer actions their bytes,
#: and fetched keys' types (a transfer's type, once the key is gone from the worker)
MAX_SIZES = 8192

ACTION_FIELDS = ("key", "group", "action", "start", "stop", "peer", "bytes")
TRANSFER_FIELDS = ("direction", "start", "stop", "peer", "bytes", "compressed", "keys", "type")
#: states a task that ran reaches from ``executing``
_DONE = frozenset({"memory", "error"})
#: a memory sample: its time, then the counts (see ``_common.MEMORY_COUNTS``)
MEMORY_FIELDS = ("time", *MEMORY_COUNTS)


class _LogReader:
    """The entries appended to one of a worker's transfer-log deques since the last read."""

    def __init__(self, log: deque[dict[str, Any]], total: Callable[[], int]) -> None:
        self.log = log
        self.total = total  # transfers counted by the worker (to count entries missed)
        self.last = log[-1] if log else None
        self.seen = total()

    def new(self) -> tuple[list[dict[str, Any]], int]:
        """New entries, oldest first, and how many were missed (the deque wrapped)."""
        log, last = self.log, self.last
        if not log or log[-1] is last:
            return [], 0
        entries = list(log)  # one C-level copy: no append can come in between
        i = len(entries) - 1
        while i >= 0 and entries[i] is not last:
            i -= 1
        new = entries[i + 1 :]
        self.last = entries[-1]
        total = self.total()
        missed = 0
        if i < 0 and last is not None:  # wrapped past the last one read
            missed = max(0, total - self.seen - len(new))
        self.seen = total
        return new, missed


class WorkerTables:
    """Actions, transfers and memory samples of one worker (see the module docstring)."""

    def __init__(self, worker: Any, settings: Mapping[str, Any], same_host: bool) -> None:
        self.worker = worker
        self.address = str(worker.address)
        self.same_host = same_host
        self.record_tasks = bool(settings.get("tasks", True))
        self.record_memory = bool(settings.get("resources", True))
        self.dt = float(settings.get("dt", 0.1))
        self.error: str | None = None
        self._error_sent = False
        self.off = False
        self._groups = GroupIndex()
        self._typenames: dict[Any, str] = {}
        self._notes: list[Any] = []  # flat: key, group, action, start, stop, shift, source
        self._sizes: dict[float, int] = {}  # incoming transfer start -> bytes
        self._key_types: dict[Any, Any] = {}  # dependency of a task noted -> its type
        self._memory: list[tuple[Any, ...]] = []
        self._lost = {"actions": 0, "transfers": 0}
        self._lost_sent = dict(self._lost)
        self._limit_sent = False
        self._incoming: _LogReader | None = None
        self._outgoing: _LogReader | None = None
        self._callback: PeriodicCallback | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Skip what the logs hold already; sample memory now and every ``dt``."""
        try:
            w = self.worker
            if self.record_tasks:
                self._incoming = _LogReader(
                    w.transfer_incoming_log, lambda: w.state.transfer_incoming_count_total
                )
                self._outgoing = _LogReader(
                    w.transfer_outgoing_log, lambda: w.transfer_outgoing_count_total
                )
            if self.record_memory:
                self.sample()
                self._callback = PeriodicCallback(self.sample, self.dt * 1000)
                self._callback.start()
        except Exception as exc:
            self._fail(exc)

    def stop(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback.stop()

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = f"worker {self.address} (pid {os.getpid()}) tables: {exc!r}"
        self.off = True
        self.stop()
        self._notes, self._memory = [], []

    def _shifts(self) -> tuple[float, float]:
        """What to add to a time with distributed's clock correction (transfers) and to a
        time of the worker's own clock (disk reads and writes, samples): scheduler clock."""
        delay = float(getattr(self.worker, "scheduler_delay", 0.0) or 0.0)
        own = 0.0 if self.same_host else delay
        return own - delay, own

    # ------------------------------------------------------------ hooks
    def note(self, ts: Any, finish: str) -> None:
        """A task with more than its ``compute`` in ``startstops`` left ``executing`` (to
        ``finish``: noted if ``memory`` or ``error``)."""
        if self.off or not self.record_tasks or finish not in _DONE:
            return
        try:
            notes = self._notes
            if len(notes) >= 7 * MAX_ROWS:
                self._lost["actions"] += len(ts.startstops) - 1
                return
            key = ts.key
            groups = self._groups
            group = groups.groups[groups.index(key, getattr(ts, "run_spec", None))]
            corrected, own = self._shifts()
            fetched = False
            for entry in ts.startstops:
                action = entry.get("action")
                if action == "compute":
                    continue
                fetched = fetched or action == "transfer"
                shift = corrected if action == "transfer" else own
                source = entry.get("source") or ""
                notes.extend((key, group, action, entry["start"], entry["stop"], shift, source))
            if fetched:  # the types of what came in (gone, often, when the log is read)
                _bounded_update(self._key_types, ((d.key, d.type) for d in ts.dependencies))
        except Exception as exc:
            self._fail(exc)

    def sample(self) -> None:
        """One memory sample (the event loop, every ``dt``)."""
        if self.off:
            return
        try:
            if len(self._memory) >= MAX_ROWS:
                return
            w = self.worker
            process = int(w.monitor.get_process_memory())
            data = w.data
            spilled_memory, spilled_disk = getattr(data, "spilled_total", (0, 0))
            metrics = getattr(data, "cumulative_metrics", None) or {}
            slow = getattr(data, "slow", None)
            self._memory.append(
                (
                    time() + self._shifts()[1],
                    process,
                    max(0, int(w.state.nbytes) - int(spilled_memory)),
                    int(spilled_disk),
                    len(slow) if slow is not None else 0,
                    int(metrics.get(("disk-write", "count"), 0)),
                    int(metrics.get(("disk-write", "bytes"), 0)),
                    int(metrics.get(("disk-read", "count"), 0)),
                    int(metrics.get(("disk-read", "bytes"), 0)),
                )
            )
        except Exception as exc:
            self._fail(exc)

    # ------------------------------------------------------------ draining
    def drain(self) -> dict[str, Any] | None:
        """What is new since the previous drain (None: nothing)."""
        part: dict[str, Any] = {}
        if not self.off:
            try:
                self._drain_into(part)
            except Exception as exc:
                self._fail(exc)
                part = {}
        if self.error is not None and not self._error_sent:
            part["error"] = self.error
            self._error_sent = True
        if self._lost != self._lost_sent:
            part["lost"] = {k: n - self._lost_sent[k] for k, n in self._lost.items()}
            self._lost_sent = dict(self._lost)
        if part and not self._limit_sent:
            limit = getattr(getattr(self.worker, "memory_manager", None), "memory_limit", None)
            part["limit"] = int(limit or 0)
            self._limit_sent = True
        return part or None

    def _drain_into(self, part: dict[str, Any]) -> None:
        transfers = self._transfers()
        if transfers["start"]:
            part["transfers"] = transfers
        notes, self._notes = self._notes, []
        if notes:
            part["actions"] = self._actions(notes)
        samples, self._memory = self._memory, []
        if samples:
            columns = zip(*samples, strict=True)
            part["memory"] = {f: list(c) for f, c in zip(MEMORY_FIELDS, columns, strict=True)}

    def _actions(self, notes: list[Any]) -> dict[str, list[Any]]:
        rows: dict[str, list[Any]] = {f: [] for f in ACTION_FIELDS}
        sizes = self._sizes
        for key, group, action, start, stop, shift, source in zip(*[iter(notes)] * 7, strict=True):
            rows["key"].append(key_label(key))
            rows["group"].append(group)
            rows["action"].append(action)
            rows["start"].append(start + shift)
            rows["stop"].append(stop + shift)
            rows["peer"].append(str(source))
            rows["bytes"].append(sizes.get(start, -1) if action == "transfer" else -1)
        return rows

    def _transfers(self) -> dict[str, list[Any]]:
        rows: dict[str, list[Any]] = {f: [] for f in TRANSFER_FIELDS}
        if self._incoming is None or self._outgoing is None:
            return rows
        corrected, _ = self._shifts()
        for direction, reader in (("incoming", self._incoming), ("outgoing", self._outgoing)):
            entries, missed = reader.new()
            self._lost["transfers"] += missed
            for e in entries:
                total = int(e.get("total") or 0)
                if direction == "incoming":
                    self._remember(e["start"], total)
                keys = e.get("keys") or {}
                compressed = e.get("compressed")
                rows["direction"].append(direction)
                rows["start"].append(e["start"] + corrected)
                rows["stop"].append(e["stop"] + corrected)
                rows["peer"].append(str(e.get("who") or ""))
                rows["bytes"].append(total)
                rows["compressed"].append(int(compressed) if compressed is not None else -1)
                rows["keys"].append(len(keys))
                rows["type"].append(self._type_of(keys))
        return rows

    def _remember(self, start: float, total: int) -> None:
        _bounded_update(self._sizes, ((start, total),))

    def _type_of(self, keys: Mapping[Any, Any]) -> str:
        """Type name of the largest value of a transfer (``""``: not known any more)."""
        if not keys:
            return ""
        key = max(keys, key=lambda k: keys[k] or 0)
        typ = getattr(self.worker.state.tasks.get(key), "type", None)
        if typ is None:
            typ = self._key_types.get(key)
        if typ is None:
            return ""
        name = self._typenames.get(typ)
        if name is None:
            name = self._typenames[typ] = typename(typ)
        return name


def _bounded_update(table: dict[Any, Any], items: Any) -> None:
    """``table.update(items)``, forgetting the oldest half beyond :data:`MAX_SIZES`."""
    table.update(items)
    if len(table) > MAX_SIZES:
        for old in list(table)[: len(table) - MAX_SIZES // 2]:
            del table[old]


def drain_all(tables: Mapping[str, WorkerTables]) -> dict[str, Any] | None:
    """``{address: part}`` of the workers with something new (None: none has)."""
    out = {}
    for address, table in list(tables.items()):
        part = table.drain()
        if part:
            out[address] = part
    return out or None
