"""State kept where tasks run: a worker thread of the kernel, or a worker process.

The task hook writes here when a task starts and stops; the stack sampler reads it to know
which task each sampled thread was running. The hook stores the raw key and task (one dict
set and one pop per task, no lock: safe under the GIL); turning them into a label and a
group is left to :func:`snapshot`, which the sampler calls a hundred times a second at most.
"""

from __future__ import annotations

from collections.abc import Hashable
from threading import get_ident
from typing import Any

from .keys import key_label, task_group

#: thread ident -> ``(key, task, ...)`` of the task that thread is running now (the task
#: hook may keep more after the key and the task: its submit and start times)
running: dict[int, tuple[Any, ...]] = {}

#: ``[seconds, tasks]`` of the tasks the task hook ran to the end in this process (once per
#: batch in the kernel's worker threads, not on the sync scheduler; once per task in a worker
#: process): how busy the task threads were between two stack samples
spent: list[float] = [0.0, 0.0]

#: key -> (label, group), memoised for the keys the sampler sees (bounded)
_described: dict[Hashable, tuple[str, str]] = {}
_DESCRIBED_MAX = 4096


def task_started(key: Hashable, task: Any = None) -> None:
    """Note that the calling thread starts running task ``key`` (``task``: its graph node,
    which names a fused task after the layers it runs)."""
    running[get_ident()] = (key, task)


def task_stopped() -> None:
    """Note that the calling thread finished its task."""
    running.pop(get_ident(), None)


def describe(key: Hashable, task: Any = None) -> tuple[str, str]:
    """``(key label, group)`` of a task, the names the task table uses."""
    try:
        found = _described.get(key)
    except TypeError:  # an unhashable key: not memoised
        return key_label(key), task_group(key, task)
    if found is None:
        found = (key_label(key), task_group(key, task))
        if len(_described) >= _DESCRIBED_MAX:
            _described.clear()
        _described[key] = found
    return found


def snapshot() -> dict[int, tuple[str, str]]:
    """What runs where now: thread ident -> ``(key label, group)``."""
    current = running.copy()  # copying a dict is atomic under the GIL
    return {ident: describe(entry[0], entry[1]) for ident, entry in current.items()}
