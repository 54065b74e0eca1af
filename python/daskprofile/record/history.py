"""Runs being recorded and runs kept, and the sinks that follow them.

A recording announces its run with the run's :class:`~.cursors.Cursors` when it starts
(:func:`started`) and again when it has finished (:func:`finished`); finished runs are kept
in a bounded history (``daskprofile.history`` runs). Sinks (the comm publisher) subscribe
to both and replay what exists with :func:`live` and :func:`history`: every run reaches them
with the readers of its own recording, so no sink guesses which collectors stand behind it.
"""

from __future__ import annotations

import threading
import warnings
from collections import deque
from collections.abc import Callable

from ..options import history_size
from ..run import Run
from .cursors import Cursors

__all__ = [
    "clear_history",
    "finished",
    "history",
    "live",
    "live_runs",
    "started",
    "subscribe",
]

OnStart = Callable[[Run, Cursors], None]
OnEnd = Callable[[Run], None]

_lock = threading.Lock()
_history: deque[Run] = deque()
_live: dict[int, tuple[Run, Cursors]] = {}  # id(run) -> (run, cursors), in start order
_subscribers: list[tuple[OnStart | None, OnEnd | None]] = []


def history() -> list[Run]:
    """Finished runs kept in memory, oldest first (at most ``daskprofile.history``)."""
    with _lock:
        return list(_history)


def live() -> list[tuple[Run, Cursors]]:
    """Runs being recorded, with their cursors, oldest first."""
    with _lock:
        return list(_live.values())


def live_runs() -> list[Run]:
    """Runs being recorded, oldest first."""
    return [run for run, _ in live()]


def clear_history() -> None:
    """Forget the finished runs."""
    with _lock:
        _history.clear()


def subscribe(on_start: OnStart | None = None, on_end: OnEnd | None = None) -> Callable[[], None]:
    """Call ``on_start(run, cursors)`` when a run starts and ``on_end(run)`` once it has
    finished; returns a function that unsubscribes.

    Callbacks run in the thread that starts or ends the recording and must be quick (hand
    work to a thread); an exception is reported as a warning, never raised.
    """
    entry = (on_start, on_end)
    with _lock:
        _subscribers.append(entry)

    def unsubscribe() -> None:
        with _lock:
            if entry in _subscribers:
                _subscribers.remove(entry)

    return unsubscribe


def started(run: Run, cursors: Cursors) -> None:
    """A recording began ``run``: list it as live and tell the subscribers."""
    with _lock:
        _live[id(run)] = (run, cursors)
        callbacks = [start for start, _ in _subscribers if start is not None]
    for callback in callbacks:
        _call(callback, run, cursors)


def finished(run: Run) -> None:
    """``run`` has finished: keep it (the oldest beyond ``daskprofile.history`` go) and tell
    the subscribers."""
    size = history_size()
    with _lock:
        _live.pop(id(run), None)
        _history.append(run)
        while len(_history) > size:
            _history.popleft()
        callbacks = [end for _, end in _subscribers if end is not None]
    for callback in callbacks:
        _call(callback, run)


def _call(callback: Callable[..., None], *args: object) -> None:
    try:
        callback(*args)
    except Exception as exc:
        warnings.warn(f"daskprofile: run subscriber raised {exc!r}", RuntimeWarning, stacklevel=3)
