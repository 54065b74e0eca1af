"""Worker side: the task rows of one worker, measured where the tasks run.

When every worker runs daskprofile's plugin, task rows are made here instead of on the
scheduler (whose plugin then only numbers graphs: :mod:`._scheduler_graphs`), so the
scheduler spends nothing per task. The worker plugin's ``transition`` hook calls
:meth:`TaskRows.arrived` when a task comes to be computed here (``waiting``),
:meth:`TaskRows.executing` when it starts and :meth:`TaskRows.done` when it leaves
``executing`` (or ``long-running``) for ``memory`` or ``error``: one flat ``extend`` of what
the row needs, read while the worker has it at hand. Everything else (labels, groups, the
columns) is done per batch, in :meth:`TaskRows.drain`, on the worker's event loop.

Times are in the scheduler's clock as distributed gives them (``startstops`` carry the
worker's ``scheduler_delay``); on the client's host, where the clocks are one, the delay
distributed added is taken off again, exactly, per task. ``submit`` is when the task
reached this worker. Failed tasks carry their exception and traceback texts (cut).
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
#: a task noted flat: key, arrival, compute start, stop, error type (None: it succeeded),
#: thread ident, run_spec
_NOTE = 7
#: task rows kept between two drains, at most (more are counted as dropped)
MAX_ROWS = 500_000
#: failed tasks whose texts one drain carries, at most
MAX_TEXTS = 1_000
#: arrivals noted before those of tasks the worker no longer has are looked for
PRUNE_MIN = 10_000
#: seconds by which a task's start may follow the worker's ``start_time`` (the hand-over to
#: its thread) before the delay noted at ``executing`` is taken to have changed since
DELAY_SLACK = 0.002
#: seconds within which a row made is sent: a worker killed (SIGKILL, the OOM killer)
#: takes the rows it had not sent with it; a worker that closes sends them first. The
#: client's cost of a batch is mostly per batch (~0.4 ms): 0.15 s rather than 0.05 s cut
#: its handler from 26 to 17 us/task of kernel CPU on a 2-worker map (thread_time)
SOON = 0.15


class TaskRows:
    """Task rows of one worker (see the module). ``same_host``: the client shares our clock."""

    def __init__(self, worker: Any, same_host: bool, groups: GroupIndex) -> None:
        self.worker = worker
        self.address = str(worker.address)
        self.same_host = same_host
        self.groups = groups  # shared by the process's workers (one naming of groups)
        self._arrived: dict[Any, float] = {}
        self._delay: dict[Any, float] = {}  # delay distributed added to a running task
        self._notes: list[Any] = []
        self._texts: dict[str, list[str]] = {}
        self._threads: dict[Any, int] = {}  # thread ident -> its number on this worker
        self.dropped = 0
        self._prune_at = PRUNE_MIN
        #: sends the process's next message (the plugin's flush): rows go out within
        #: :data:`SOON` s of the first one made since the last message
        self.send: Any = None
        self._soon = False

    # ------------------------------------------------------------ the transition hook
    def arrived(self, key: Any) -> None:
        """``key`` came to be computed here (the worker's clock made the scheduler's)."""
        delay = 0.0 if self.same_host else self.worker.scheduler_delay
        self._arrived[key] = time() + delay

    def executing(self, key: Any) -> None:
        """``key`` starts: what distributed adds to its times (taken off on our host)."""
        if self.same_host:
            self._delay[key] = self.worker.scheduler_delay

    def forget(self, key: Any) -> None:
        """``key`` left without running here (released, stolen, cancelled)."""
        self._arrived.pop(key, None)
        self._delay.pop(key, None)

    def done(self, ts: Any, finish: str) -> float:
        """``ts`` left ``executing`` for ``finish`` (``memory`` or ``error``); returns its
        compute's seconds (0.0: it did not run), for the stack sampler's pacing."""
        key = ts.key
        submit = self._arrived.pop(key, None)
        shift = self._delay.pop(key, None)
        begin = end = None
        for entry in reversed(ts.startstops):
            if entry["action"] == "compute":
                shift = _delay_used(entry["start"], ts, shift) if self.same_host else 0.0
                begin, end = entry["start"] - shift, entry["stop"] - shift
                break
        if begin is None or end is None:  # failed before it ran (its task not read): now
            begin = end = time() + (0.0 if self.same_host else self.worker.scheduler_delay)
        ran = end - begin
        if submit is not None and submit > begin:
            submit = begin  # it came first: distributed's delay changed meanwhile (ms)
        error = None
        if finish == "error":
            error = exception_name(ts.exception_text)
            if len(self._texts) < MAX_TEXTS:
                text, trace = ts.exception_text, ts.traceback_text
                self._texts[key_label(key)] = [
                    cut(text if isinstance(text, str) else "", MESSAGE_CHARS),
                    cut(trace if isinstance(trace, str) else "", TRACEBACK_CHARS),
                ]
        notes = self._notes
        if len(notes) >= _NOTE * MAX_ROWS:
            self.dropped += 1
            return ran
        thread = self.worker.threads.get(key)
        notes.extend((key, submit, begin, end, error, thread, ts.run_spec))
        if not self._soon and self.send is not None:  # sent soon, not at the next flush
            self._soon = True
            self.worker.loop.call_later(SOON, self._send)
        return ran

    def _send(self) -> None:
        self._soon = False
        if self.send is not None and self._notes:
            self.send()

    # ------------------------------------------------------------ batches
    def drain(self) -> dict[str, list[Any]] | None:
        """The rows noted since the previous drain (None: none); group ids are the shared
        :class:`GroupIndex`'s (its names travel with the message)."""
        if len(self._arrived) > self._prune_at:
            self.prune()
        notes, self._notes = self._notes, []
        if not notes:
            return None
        keys = notes[0::_NOTE]
        index, threads = self.groups.index, self._threads
        rows: dict[str, list[Any]] = {
            "key": [key_label(k) for k in keys],
            "group": [index(k, spec) for k, spec in zip(keys, notes[6::_NOTE], strict=True)],
            "thread": [threads.setdefault(t, len(threads)) for t in notes[5::_NOTE]],
            "submit": notes[1::_NOTE],
            "start": notes[2::_NOTE],
            "stop": notes[3::_NOTE],
            "error": notes[4::_NOTE],
        }
        return rows

    def texts(self) -> dict[str, list[str]]:
        """Failed tasks' ``[exception, traceback]`` texts by key label, since the last call."""
        texts, self._texts = self._texts, {}
        return texts

    def prune(self) -> None:
        """Forget arrivals of tasks the worker no longer has (they never ran here); runs
        when the arrivals doubled since the last time: O(1) per task."""
        tasks = self.worker.state.tasks
        for table in (self._arrived, self._delay):
            for key in [k for k in table if k not in tasks]:
                del table[key]
        self._prune_at = max(PRUNE_MIN, 2 * len(self._arrived))


def _delay_used(start: float, ts: Any, noted: float | None) -> float:
    """The delay distributed added to a task's times: the one noted when it started
    executing, unless the worker's estimate changed before the task was handed to its
    thread (a heartbeat came in between): then what its start says against the worker's
    own ``start_time`` (later by the hand-over only, well under a millisecond)."""
    began = getattr(ts, "start_time", None)
    if not isinstance(began, float):
        return noted or 0.0
    seen = start - began
    return noted if noted is not None and abs(seen - noted) < DELAY_SLACK else seen
