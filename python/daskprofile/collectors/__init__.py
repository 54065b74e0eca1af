"""Collectors: write records, never raise into the computation.

Scheduler-driven collectors (``tasks``, ``cache``) are :class:`daskprofile.hooks.Listener`
objects; time-driven samplers (``resources``, ``stacks``) run their own thread. This
package module stays light: it is imported inside worker processes to unpickle
:class:`StackWorkerHook`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Hashable, Sequence
from types import ModuleType
from typing import Any


def optional(name: str) -> ModuleType | None:
    """``daskprofile.collectors.<name>`` if that module exists, else None."""
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.endswith(f"collectors.{name}"):
            return None
        raise


def merge_stacks(
    collector: Any, extras: Sequence[dict[str, Any] | None], compute: Any = None
) -> None:
    """Add to ``collector`` the stack samples worker processes sent back with tasks
    (``TaskBatch.extra``). ``compute`` (a ``hooks.Compute``): its graph teaches the
    kernel the files of code the workers ran as pickled copies (read only if needed)."""
    if not any(extras):  # tasks that ran in this process bring none: one C-level pass
        return
    graph = None if compute is None else (lambda: (compute.id, compute.dsk or compute.graph))
    for extra in extras:
        if extra is not None:
            payload = extra.get("stacks")
            if payload is not None:
                collector.merge_remote(payload, graph)


class StackWorkerHook:
    """Runs the stack sampler inside worker processes and ships its samples back.

    A :class:`daskprofile.hooks.WorkerHook`: shipped with each task; in a worker process
    (not the kernel) it makes sure a sampler runs while tasks run there, and after each
    task returns the samples drained since the previous task (``TaskEvent.extra["stacks"]``).
    """

    name = "stacks"
    remote_only = True  # in the kernel itself the kernel's sampler sees the tasks

    def __init__(self, interval: float, cycle: float, owner_pid: int | None = None) -> None:
        self.interval = interval
        self.cycle = cycle
        self.owner_pid = os.getpid() if owner_pid is None else owner_pid

    def __reduce__(self) -> tuple[Any, ...]:
        return (StackWorkerHook, (self.interval, self.cycle, self.owner_pid))

    def on_start(self, key: Hashable) -> None:
        if os.getpid() == self.owner_pid:
            return
        from .stacks import ensure_worker_sampler

        ensure_worker_sampler(self.interval, self.cycle, self.owner_pid)

    def on_stop(self) -> Any:
        if os.getpid() == self.owner_pid:
            return None
        from .stacks import drain_worker_samples

        return drain_worker_samples()
