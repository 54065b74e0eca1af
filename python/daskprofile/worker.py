"""State kept where tasks run: a worker thread of the kernel, or a worker process.

The task hook writes here when a task starts and stops; the stack sampler reads it to know
which task each sampled thread was running. Plain dict operations keep it safe under the
GIL without a lock on the hot path.
"""

from __future__ import annotations

from threading import get_ident

#: thread ident -> (key label, group) of the task that thread is running now
running: dict[int, tuple[str, str]] = {}


def task_started(key: str, group: str) -> None:
    """Note that the calling thread starts running task ``key`` of ``group``."""
    running[get_ident()] = (key, group)


def task_stopped() -> None:
    """Note that the calling thread finished its task."""
    running.pop(get_ident(), None)


def snapshot() -> dict[int, tuple[str, str]]:
    """A consistent copy of what runs where (copying a dict is atomic under the GIL)."""
    return running.copy()
