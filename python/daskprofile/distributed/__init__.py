"""dask.distributed support: the same profiling Run for computations on a cluster.

::

    with daskprofile.distributed.profile(client) as run:   # or the default client
        x.compute()
    run.tasks        # key, group, worker "<address> thread <n>", times measured on workers
    run.resources    # the cluster's worker processes (per process: run.meta["distributed"])
    run.stacks       # per task group, innermost frame kept
    run.cache        # bytes held in workers' memory per group

A scheduler plugin records tasks as they finish and a worker plugin samples stacks and
resources in each worker process; both stream batches to the client through distributed's
event log while the block runs, and both are removed when it ends.

Submodules are imported lazily: the scheduler and the workers import only the plugins.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._run import attach, collector_for, finish, profile
    from ._tables import merge_cache, merge_tasks
    from .collector import DistributedCollector, active_client, task_worker_address

_EXPORTS = {
    "DistributedCollector": "collector",
    "active_client": "collector",
    "task_worker_address": "collector",
    "attach": "_run",
    "collector_for": "_run",
    "finish": "_run",
    "profile": "_run",
    "merge_cache": "_tables",
    "merge_tasks": "_tables",
}

__all__ = [
    "DistributedCollector",
    "active_client",
    "attach",
    "collector_for",
    "finish",
    "merge_cache",
    "merge_tasks",
    "profile",
    "task_worker_address",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'daskprofile.distributed' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
