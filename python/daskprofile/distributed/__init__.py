"""dask.distributed support: a cluster as one more source of every recording.

::

    with daskprofile.profile() as run:     # the default client, or profile(client=...)
        x.compute()
    run.tasks        # key, group, worker "<address> thread <n>", times measured on workers
    run.resources    # the cluster's worker processes (per process: run.meta.distributed)
    run.stacks       # per task group, innermost frame kept
    run.cache        # bytes held in workers' memory per group

A scheduler plugin records tasks as they finish and a worker plugin samples stacks and
resources in each worker process; both stream batches to the client through distributed's
event log, and both are removed when the recording ends. ``watch`` sees every client's
graphs as they are submitted; ``source`` routes what arrives into the recordings' runs.
Nothing here imports the recording layer (``daskprofile.record``) or ``jupyter/``.

Submodules are imported lazily: the scheduler and the workers import only the plugins.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .collector import DistributedCollector, active_client, task_worker_address
    from .source import ClusterSettings, ClusterSource

_EXPORTS = {
    "DistributedCollector": "collector",
    "active_client": "collector",
    "task_worker_address": "collector",
    "ClusterSettings": "source",
    "ClusterSource": "source",
}

__all__ = [
    "ClusterSettings",
    "ClusterSource",
    "DistributedCollector",
    "active_client",
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
