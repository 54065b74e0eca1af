"""Worker side: the task rows of one worker, measured where the tasks run.

When every worker runs daskprofile's plugin, task rows are made here instead of on the
scheduler (whose plugin then only numbers graphs: :mod:`._scheduler_graphs`), so the
scheduler spends nothing per task. The worker plugin's ``transition`` hook, called about
five times per task, does as little as it can, since each call lands on the worker's busy
event loop with cold caches (in a running cluster a few loads and a call cost microseconds,
not the tens of nanoseconds of a warm loop):

* a task that comes to be computed here (``waiting``): its arrival, one dict store
  (:attr:`TaskRows.arrivals`);
* a task that leaves ``executing`` (or ``long-running``) for ``memory`` or ``error``:
  :meth:`TaskRows.ran`, one flat ``extend`` of the task's state, its thread and
  distributed's clock correction of the moment (the worker forgets the thread, and a
  failed task's texts, once the task is released);
* every other transition: two string comparisons.

Everything else (reading ``startstops``, labels, groups, the columns, the actions of
:mod:`._worker_tables`) is done per batch, in :meth:`TaskRows.drain`, on the worker's event
loop.

Times are in the scheduler's clock as distributed gives them (``startstops`` carry the
worker's ``scheduler_delay``); on the client's host, where the clocks are one, the delay
distributed added is taken off again per task. ``submit`` is when the task reached this
worker. Failed tasks carry their exception and traceback texts (cut).
"""

from __future__ import annotations

from time import time
from typing import Any

from ..failures import MESSAGE_CHARS, TRACEBACK_CHARS, cut
from ..keys import GroupIndex, key_label
from ._common import exception_name

__all__ = ["ROW_FIELDS", "TaskRows"]

#: columns of a worker's ``rows`` (``group``: an id of the message's ``groups``; ``thread``:
#: a small number per worker, in the order its threads ran a task)
ROW_FIELDS = ("key", "group", "thread", "submit", "start", "stop", "error")
#: a task that ran, noted flat: key, its TaskState, thread ident, distributed's clock
#: correction when it finished
_NOTE = 4
_NO_ERROR = (None, 0.0)
#: task rows kept between two drains, at most (more are counted as dropped)
MAX_ROWS = 500_000
#: failed tasks whose texts one drain carries, at most
MAX_TEXTS = 1_000
#: arrivals noted before those of tasks the worker no longer has are looked for
PRUNE_MIN = 10_000
#: seconds by which a task's start may follow the worker's ``start_time`` (the hand-over to
#: its thread, well under a millisecond) before the clock correction noted when it finished
#: is taken to have changed while it ran (a heartbeat came in between): the correction is
#: then what its start says against that ``start_time``
DELAY_SLACK = 0.002
#: seconds within which a row made is sent on its own: a worker killed (SIGKILL, the OOM
#: killer) takes the rows it had not sent with it; a worker that closes sends them first.
#: The client's cost of a batch is mostly per batch (~0.4 ms): 0.15 s rather than 0.05 s
#: cut its handler from 26 to 17 us/task of kernel CPU on a 2-worker map (thread_time).
#: Only when the periodic messages (``flush``) are more than twice as far apart (the
#: panel's 0.5 s); ``profile()``'s 0.2 s messages carry the rows instead (sent on their own
#: as well, rows made ~40% of a worker's messages)
SOON = 0.15


class TaskRows:
    """Task rows of one worker (see the module). ``same_host``: the client shares our clock."""

    def __init__(self, worker: Any, same_host: bool, groups: GroupIndex) -> None:
        self.worker = worker
        self.address = str(worker.address)
        self.same_host = same_host
        self.groups = groups  # shared by the process's workers (one naming of groups)
        #: key -> this worker's ``time()`` when it came to be computed here
        self.arrivals: dict[Any, float] = {}
        self._tasks: dict[Any, Any] = worker.state.tasks
        self._thread_of: dict[Any, int] = worker.state.threads
        self._notes: list[Any] = []
        self._texts: dict[str, list[str]] = {}
        #: key of a task that failed -> its exception's type, and when it was noted
        self._errors: dict[Any, tuple[str | None, float]] = {}
        self._threads: dict[Any, int] = {}  # thread ident -> its number on this worker
        self.dropped = 0
        self._prune_at = PRUNE_MIN
        #: this worker's actions (:class:`~._worker_tables.WorkerTables`), noted per batch
        self.tables: Any = None
        #: sends the process's next message (the plugin's flush): rows go out within
        #: :data:`SOON` s of the first one made since the last message
        self.send: Any = None
        self._soon = False

    # ------------------------------------------------------------ the transition hook
    def ran(self, key: Any, finish: str) -> None:
        """``key`` left ``executing`` for ``finish`` (``memory`` or ``error``)."""
        notes = self._notes
        if len(notes) >= _NOTE * MAX_ROWS:
            self.dropped += 1
            return
        ts = self._tasks.get(key)
        if ts is None:
            return
        notes += (key, ts, self._thread_of.get(key), self.worker.scheduler_delay)
        if finish == "error":  # (its texts are gone once it is released)
            self._failed(key, ts)
        if not self._soon and self.send is not None:  # sent soon, not at the next flush
            self._soon = True
            self.worker.loop.call_later(SOON, self._send)

    def _failed(self, key: Any, ts: Any) -> None:
        text = ts.exception_text
        self._errors[key] = (exception_name(text), time())
        if len(self._texts) < MAX_TEXTS:
            trace = ts.traceback_text
            self._texts[key_label(key)] = [
                cut(text if isinstance(text, str) else "", MESSAGE_CHARS),
                cut(trace if isinstance(trace, str) else "", TRACEBACK_CHARS),
            ]

    def _send(self) -> None:
        self._soon = False
        if self.send is not None and self._notes:
            self.send()

    # ------------------------------------------------------------ batches
    def drain(self, spent: list[float] | None = None) -> dict[str, list[Any]] | None:
        """The rows noted since the previous drain (None: none); group ids are the shared
        :class:`GroupIndex`'s (its names travel with the message). ``spent``: ``[seconds,
        tasks]`` to add the tasks' compute times to (the stack sampler's pacing)."""
        if len(self.arrivals) > self._prune_at:
            self.prune()
        notes, self._notes = self._notes, []
        if not notes:
            return None
        n = len(notes) // _NOTE
        keys, states = notes[0::_NOTE], notes[1::_NOTE]
        submit: list[float | None] = [None] * n
        start: list[float] = [0.0] * n
        stop: list[float] = [0.0] * n
        arrivals, same_host, tables = self.arrivals, self.same_host, self.tables
        errors, self._errors = self._errors, {}
        ran = 0.0
        for i, (key, ts, noted) in enumerate(zip(keys, states, notes[3::_NOTE], strict=True)):
            delay = noted
            startstops = ts.startstops
            entry = startstops[-1] if startstops else None
            if entry is None or entry["action"] != "compute":  # a disk write came after it
                entry = next((e for e in reversed(startstops) if e["action"] == "compute"), None)
            if entry is None:  # failed before it ran (its task not read): when it was noted
                at = errors[key][1] if key in errors else time()
                begin = end = at + (0.0 if same_host else delay)
            else:
                begin, end = entry["start"], entry["stop"]
                if same_host:  # the delay distributed added (see DELAY_SLACK), taken off
                    began = ts.start_time
                    if began is not None and abs(begin - began - delay) >= DELAY_SLACK:
                        delay = begin - began
                    begin -= delay
                    end -= delay
            ran += end - begin
            arrived = arrivals.pop(key, None)
            if arrived is not None:
                if not same_host:
                    arrived += delay
                submit[i] = arrived if arrived <= begin else begin  # (the clock moved: ms)
            start[i], stop[i] = begin, end
            if tables is not None and len(startstops) > 1:  # a transfer, a disk read, ...
                tables.note(ts, "memory")
        if spent is not None:
            spent[0] += ran
            spent[1] += n
        threads = self._threads
        return {
            "key": [key_label(k) for k in keys],
            "group": self.groups.indices(keys, lambda i: states[i].run_spec),
            "thread": [threads.setdefault(t, len(threads)) for t in notes[2::_NOTE]],
            "submit": submit,
            "start": start,
            "stop": stop,
            "error": [errors.get(k, _NO_ERROR)[0] for k in keys] if errors else [None] * n,
        }

    def texts(self) -> dict[str, list[str]]:
        """Failed tasks' ``[exception, traceback]`` texts by key label, since the last call."""
        texts, self._texts = self._texts, {}
        return texts

    def prune(self) -> None:
        """Forget arrivals of tasks the worker no longer has (stolen, cancelled, released
        before they ran here); runs when the arrivals doubled since the last time: O(1) per
        task."""
        tasks = self._tasks
        for key in [k for k in self.arrivals if k not in tasks]:
            del self.arrivals[key]
        self._prune_at = max(PRUNE_MIN, 2 * len(self.arrivals))
