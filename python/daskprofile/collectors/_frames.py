"""Reading the stacks of other threads, safely on every Python we support.

:func:`read` takes ``sys._current_frames()`` and walks each asked-for thread's stack in one
C-level pass (``itertools``, ``operator`` and ``getattr``; no bytecode runs in it), so the
sampler keeps the GIL and each stack is read at one moment, not frame by frame while the
thread runs on.

On Python 3.11 it also holds automatic garbage collection off while it reads. 3.11 makes a
frame object the first time another thread's frame is read. That allocation can start a
collection *inside* ``sys._current_frames()`` or ``frame.f_back``. If the collection runs
Python code (finalizers, ``gc.callbacks`` such as distributed's GC diagnosis), the GIL can
pass on, and two things go wrong:

* ``sys._current_frames()`` holds the runtime's thread-list lock; a second thread calling
  it then waits for that lock holding the GIL: the process deadlocks (CPython issue
  #106883, not fixed in 3.11). Seen here: an in-process ``LocalCluster`` hung with our
  sampler in distributed's GC callback and the event loop in distributed's profiler.
* the thread whose frame was being wrapped can return from it meanwhile; the new frame
  object then points at reused stack memory, and ``f_back`` hands back any object (seen
  here as a ``cell``).

Python 3.10 makes no frame objects here, and from 3.12 collections start only between
bytecodes, never inside these C calls.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from collections.abc import Callable, Iterable
from functools import partial
from itertools import accumulate, chain, repeat, takewhile
from operator import attrgetter, is_not
from types import CodeType, FrameType
from typing import Any

__all__ = ["Walk", "read", "walk"]

#: ``(code, line)`` of a thread's frames, innermost first
Walk = list[tuple[CodeType, int | None]]

_F_BACKS = repeat("f_back")
_NOT_NONE = partial(is_not, None)
_CODE_AND_LINE = attrgetter("f_code", "f_lineno")
_GETATTR: Callable[[Any, Any], Any] = getattr


def walk(frame: FrameType) -> Walk:
    """``(code, line)`` of ``frame`` and its callers, innermost first, in one C-level pass.

    ``frame, frame.f_back, frame.f_back.f_back, ...`` up to ``None``; raises AttributeError
    if the chain holds something that is not a frame.
    """
    return list(
        map(_CODE_AND_LINE, takewhile(_NOT_NONE, accumulate(chain((frame,), _F_BACKS), _GETATTR)))
    )


class _CollectionHold:
    """Automatic collection off while any thread reads stacks: the first reader turns it
    off (if it was on), the last one back on. Two samplers share a process (the kernel's
    and an in-process ``LocalCluster``'s): one turning it back on while the other still
    reads would let a collection start inside the other's read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers = 0
        self._was_on = False

    def __enter__(self) -> None:
        with self._lock:
            if self._readers == 0:
                self._was_on = gc.isenabled()
                if self._was_on:
                    gc.disable()
            self._readers += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._readers -= 1
            if self._readers == 0 and self._was_on:
                gc.enable()

    def after_fork_in_child(self) -> None:
        """A forked child has none of the reading threads: end their hold there."""
        self._lock = threading.Lock()
        if self._readers and self._was_on:
            gc.enable()
        self._readers = 0


_hold: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
if sys.version_info[:2] == (3, 11):
    _hold = _CollectionHold()
    os.register_at_fork(after_in_child=_hold.after_fork_in_child)


def read(idents: Iterable[int]) -> dict[int, Walk | None]:
    """The stacks of the threads ``idents`` that have one (``None``: it could not be read).

    Automatic collection is held off while reading on Python 3.11 (see the module's
    docstring), and switched back on only if it was on. Other threads run in that window
    only where the GIL passes on between two stacks (the walks themselves run no bytecode)
    or while another sampler reads; a ``gc.disable()`` one of them made just there would be
    undone.
    """
    with _hold:
        return _read(idents)


def _read(idents: Iterable[int]) -> dict[int, Walk | None]:
    """:func:`read` without the hold."""
    frames = sys._current_frames()
    out: dict[int, Walk | None] = {}
    for ident in idents:
        frame = frames.get(ident)
        if frame is None:
            continue
        try:
            out[ident] = walk(frame)
        except AttributeError:  # CPython handed back something that is not a frame
            out[ident] = None
    del frames
    return out
