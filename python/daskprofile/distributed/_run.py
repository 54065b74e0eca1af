"""Wiring a :class:`DistributedCollector` into a :class:`~daskprofile.run.Run`.

``attach`` makes the run's live tables read the cluster's data (merged with the local
collectors' tables when the block also computes locally); ``finish`` stops the collector
and writes what a finished run needs into ``run.meta``. ``profile`` is
``daskprofile.profile`` plus the cluster, usable on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..collectors.stacks import StackCollector
from ..options import ProfileOptions
from ..recorder import profile as _local_profile
from ..run import Run
from ._tables import merge_cache, merge_tasks
from .collector import DistributedCollector, active_client

__all__ = ["attach", "collector_for", "finish", "profile", "unwire", "wire"]

Source = Callable[[], Any]


def collector_for(
    options: ProfileOptions,
    client: Any = None,
    stacks_into: StackCollector | None = None,
    **kwargs: Any,
) -> DistributedCollector | None:
    """An unstarted collector for ``client`` (default: the default client), or None.

    None when no client is given and none is running: the recorder calls this at the start
    of every ``profile()`` block, and it costs nothing when distributed is not in use.
    """
    client = client if client is not None else active_client()
    if client is None:
        return None
    return DistributedCollector(
        client,
        tasks=options.tasks,
        cache=options.cache,
        resources=options.resources,
        stacks=options.stacks,
        dt=options.dt,
        interval=options.interval,
        max_records=options.max_records,
        stacks_into=stacks_into,
        **kwargs,
    )


def _prefer_cluster(cluster: Source, local: Source | None) -> Source:
    def resources() -> Any:
        table = cluster()
        if len(table["time"]) or local is None:
            return table
        return local()

    return resources


def _merged(merge: Callable[[Any, Any], Any], local: Source, cluster: Source) -> Source:
    return lambda: merge(local(), cluster())


def attach(
    collector: DistributedCollector,
    run: Run,
    tasks: Source | None = None,
    cache: Source | None = None,
    resources: Source | None = None,
) -> None:
    """Make ``run``'s live tables include the cluster's data.

    ``tasks``/``cache``/``resources`` are the local collectors' snapshot functions, if
    any: tasks and cache rows are merged; resources are the cluster's while it has samples
    (local worker processes are the kernel's descendants, counted by the local sampler
    too), the local ones otherwise. Stacks go straight into the collector's
    ``StackCollector``: pass the local one as ``stacks_into`` to share it.
    """
    o = collector.options
    if o["tasks"]:
        source = collector.tasks_snapshot
        run.attach("tasks", source if tasks is None else _merged(merge_tasks, tasks, source))
    if o["cache"]:
        source = collector.cache_snapshot
        run.attach("cache", source if cache is None else _merged(merge_cache, cache, source))
    if o["resources"]:
        run.attach("resources", _prefer_cluster(collector.resources_snapshot, resources))
    if o["stacks"]:
        run.attach("stacks", collector.stacks.trees)
        run.attach("stack_history", collector.stacks.history)
    meta = run.meta
    if "distributed" not in meta.setdefault("schedulers", []):
        meta["schedulers"].append("distributed")
    seen = [0]

    def on_batch(c: DistributedCollector) -> None:
        new, seen[0] = c.computes - seen[0], c.computes
        if new:
            meta["computes"] = int(meta.get("computes", 0) or 0) + new

    collector.on_batch = on_batch


def finish(collector: DistributedCollector, run: Run) -> None:
    """Stop ``collector`` and record its description, counts and errors in ``run.meta``."""
    collector.stop()
    meta = run.meta
    meta["distributed"] = collector.info(run.t0)
    errors = meta.setdefault("errors", [])
    for error in collector.errors:
        if error not in errors:
            errors.append(error)


def wire(recorder: _local_profile, run: Run, client: Any = None) -> DistributedCollector | None:
    """Start recording ``client``'s cluster (default: the default client) into ``run``.

    ``recorder`` is the ``profile()`` block whose local collectors the cluster's rows are
    merged with. Returns the started collector (give it to :func:`unwire`), or None when no
    client is running or the plugins could not be installed (then noted in ``run.meta``).
    """
    from ..collectors.cache import CacheCollector
    from ..collectors.resources import ResourceCollector
    from ..collectors.tasks import TaskCollector

    local_stacks = recorder.find(StackCollector)
    collector = collector_for(
        recorder.options,
        client,
        stacks_into=local_stacks,
        flush=recorder.cluster_flush,
        all_clients=recorder.cluster_all_clients,
    )
    if collector is None:
        return None
    collector.errors = []
    collector.start()
    if not collector.started:
        finish(collector, run)
        return None
    tasks, cache = recorder.find(TaskCollector), recorder.find(CacheCollector)
    resources = recorder.find(ResourceCollector)
    attach(
        collector,
        run,
        tasks=tasks.snapshot if tasks is not None else None,
        cache=cache.snapshot if cache is not None else None,
        resources=resources.snapshot if resources is not None else None,
    )
    if local_stacks is not None:  # the workers' samples are merged into the local one
        run.attach("stacks", local_stacks.trees)
        run.attach("stack_history", local_stacks.history)
    return collector


def unwire(collector: DistributedCollector, run: Run) -> None:
    """Stop ``collector`` (never raises: a failure is recorded in ``run.meta``)."""
    try:
        finish(collector, run)
    except Exception as error:  # never fail the user's block
        run.meta["errors"].append({"collector": "distributed", "error": repr(error)})


class profile(_local_profile):
    """``daskprofile.profile()`` for an explicit ``distributed`` client.

    ::

        with daskprofile.distributed.profile(client) as run:
            x.compute()
        run.tasks          # worker = "<worker address> thread <n>", times measured there

    ``daskprofile.profile()`` already records the default client's cluster; this adds
    ``client`` (another client), ``flush`` (seconds between batches streamed from the
    cluster) and ``all_clients`` (record every client's tasks, not only this client's).
    Other arguments are ``daskprofile.profile``'s.
    """

    def __init__(
        self,
        client: Any = None,
        *,
        flush: float = 0.2,
        all_clients: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(client=client, **kwargs)
        if not isinstance(flush, (int, float)) or isinstance(flush, bool) or flush <= 0:
            raise ValueError(f"flush must be a positive number of seconds, got {flush!r}")
        self.cluster_flush = float(flush)
        self.cluster_all_clients = bool(all_clients)
