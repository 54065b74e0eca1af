"""Scheduler side of the cluster tables: workers joining and leaving, and tasks' actions
when the workers lack daskprofile.

The scheduler plugin holds one :class:`SchedulerTables` and adds what it drained to each
batch (``members``, ``actions``, ``tables_error``). Membership costs nothing per task:

* ``start``: the workers present when recording began (``event: "present"``, no time);
* ``joined`` (``SchedulerPlugin.add_worker``): name, host, pid, threads, memory limit;
* ``left`` (``SchedulerPlugin.remove_worker``, called after the scheduler moved the
  worker's tasks): the cause (``stimulus_id`` without its time), the reason the worker
  gave if it logged one while closing (``closing-worker`` in its topic), whether the
  scheduler expected it, and the keys it took: those it was running (``processing``), the
  results it held that must be computed again (``lost``), and those that failed with
  ``KilledWorker`` (``killed``), at most :data:`MAX_KEYS` each.

Actions (``enable_actions``, the fallback): ``transition`` is wrapped to note the
``startstops`` of tasks that leave ``processing`` with more than their ``compute``; disk
reads and writes stay in the worker's clock there (distributed corrects only transfers).
Errors switch these tables off and are sent once; nothing raises into the scheduler.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from typing import Any

from distributed.metrics import time

from ..keys import GroupIndex, key_label

__all__ = ["MAX_KEYS", "SchedulerTables", "enable_actions"]

#: keys listed per leaving worker and kind, at most
MAX_KEYS = 10_000
#: events of a topic looked through for the one of a leave
_RECENT = 50
#: tasks whose actions wait for the next batch, at most
MAX_NOTES = 200_000
#: states of a task that left processing having run
_DONE = frozenset({"memory", "erred"})


def _describe(ws: Any, address: str) -> dict[str, Any]:
    return {
        "address": address,
        "name": str(getattr(ws, "name", "")),
        "host": str(getattr(ws, "host", "")),
        "pid": int(getattr(ws, "pid", 0) or 0),
        "nthreads": int(getattr(ws, "nthreads", 0) or 0),
        "memory_limit": int(getattr(ws, "memory_limit", 0) or 0),
    }


def _recent(scheduler: Any, topic: str) -> list[Any]:
    """The latest events of ``topic`` in the scheduler's event log, newest first."""
    topics = getattr(getattr(scheduler, "_broker", None), "_topics", None)
    found = topics.get(topic) if isinstance(topics, dict) else None
    events = getattr(found, "events", None) or ()
    out = []
    for event in reversed(events):
        out.append(event[1])
        if len(out) >= _RECENT:
            break
    return out


def _is(msg: Any, action: str) -> bool:
    return isinstance(msg, dict) and msg.get("action") == action


def _labels(keys: Any) -> list[str]:
    return [key_label(k) for k in itertools.islice(keys or (), MAX_KEYS)]


class SchedulerTables:
    """Membership and fallback actions of one scheduler plugin (see the module)."""

    def __init__(self) -> None:
        self.members: list[dict[str, Any]] = []
        self.notes: list[tuple[Hashable, Any, Any]] | None = None  # None: not recorded
        self.dropped = 0
        self.error: str | None = None
        self._error_sent = False
        self.off = False
        self._groups = GroupIndex()

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = f"scheduler plugin tables: {exc!r}"
        self.off = True
        self.members, self.notes = [], None

    # ------------------------------------------------------------ membership
    def start(self, scheduler: Any) -> None:
        """The workers present now."""
        try:
            for address, ws in list(scheduler.workers.items()):
                self.members.append({"event": "present", "time": None, **_describe(ws, address)})
        except Exception as exc:
            self._fail(exc)

    def joined(self, scheduler: Any, address: str) -> None:
        if self.off:
            return
        try:
            ws = scheduler.workers.get(address)
            self.members.append({"event": "joined", "time": time(), **_describe(ws, address)})
        except Exception as exc:
            self._fail(exc)

    def left(self, scheduler: Any, address: str, stimulus_id: str | None) -> None:
        if self.off:
            return
        try:
            self.members.append(self._leave(scheduler, address, str(stimulus_id or "")))
        except Exception as exc:
            self._fail(exc)

    def _leave(self, scheduler: Any, address: str, stimulus_id: str) -> dict[str, Any]:
        removed: dict[str, Any] = {}
        for msg in _recent(scheduler, "all"):
            if _is(msg, "remove-worker") and msg.get("worker") == address:
                removed = msg
                break
        reason = None
        for msg in _recent(scheduler, address):
            if _is(msg, "closing-worker"):
                reason = str(msg.get("reason") or "closing")
                break
        processing = list(removed.get("processing-tasks") or ())
        tasks = scheduler.tasks
        killed = [k for k in processing if getattr(tasks.get(k), "state", None) == "erred"]
        failed = set(killed)
        return {
            "event": "left",
            "time": time(),
            "address": address,
            "cause": stimulus_id.rsplit("-", 1)[0] if stimulus_id[-1:].isdigit() else stimulus_id,
            "reason": reason,
            "expected": removed.get("expected"),
            "processing": _labels(k for k in processing if k not in failed),
            "lost": _labels(removed.get("lost-computed-tasks")),
            "killed": _labels(killed),
        }

    # ------------------------------------------------------------ actions (fallback)
    def note(self, key: Hashable, worker: Any, startstops: Any) -> None:
        notes = self.notes
        if notes is None:
            return
        if len(notes) >= MAX_NOTES:
            self.dropped += 1
            return
        notes.append((key, worker, startstops))

    def _actions(self, scheduler: Any) -> dict[str, list[Any]] | None:
        notes = self.notes
        if not notes:
            return None
        self.notes = []
        rows: dict[str, list[Any]] = {
            f: [] for f in ("key", "group", "worker", "action", "start", "stop", "peer", "bytes")
        }
        groups, tasks = self._groups, scheduler.tasks
        for key, worker, startstops in notes:
            group = groups.groups[groups.index(key, getattr(tasks.get(key), "run_spec", None))]
            label = key_label(key)
            for entry in startstops:
                action = entry.get("action")
                if action == "compute":
                    continue
                for field, value in (
                    ("key", label),
                    ("group", group),
                    ("worker", str(worker or "")),
                    ("action", str(action)),
                    ("start", float(entry["start"])),
                    ("stop", float(entry["stop"])),
                    ("peer", str(entry.get("source") or "")),
                    ("bytes", -1),
                ):
                    rows[field].append(value)
        return rows if rows["key"] else None

    # ------------------------------------------------------------ batches
    def drain(self, scheduler: Any) -> dict[str, Any] | None:
        """What goes into the next batch (None: nothing new)."""
        out: dict[str, Any] = {}
        try:
            if self.members:
                out["members"], self.members = self.members, []
            actions = self._actions(scheduler) if scheduler is not None else None
            if actions:
                out["actions"] = actions
        except Exception as exc:
            self._fail(exc)
        if self.error is not None and not self._error_sent:
            out["tables_error"] = self.error
            self._error_sent = True
        return out or None


def enable_actions(dask_scheduler: Any, name: str) -> bool:
    """(``run_on_scheduler``) Record tasks' actions on the scheduler plugin ``name``: its
    ``transition`` is wrapped to note the ``startstops`` of tasks that leave ``processing``
    with more than their ``compute``. False if the plugin is not there or switched off."""
    probe = dask_scheduler.plugins.get(name)
    tables = getattr(probe, "tables", None)
    if not isinstance(tables, SchedulerTables) or tables.off or "transition" in vars(probe):
        return False
    tables.notes = []
    inner = type(probe).transition
    note = tables.note

    def transition(key: Hashable, start: str, finish: str, *args: Any, **kw: Any) -> None:
        if start == "processing" and finish in _DONE:
            startstops = kw.get("startstops")
            if startstops is not None and len(startstops) > 1:
                note(key, kw.get("worker"), startstops)
        inner(probe, key, start, finish, *args, **kw)

    probe.__dict__["transition"] = transition
    return True
