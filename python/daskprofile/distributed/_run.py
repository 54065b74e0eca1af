"""Wiring a :class:`DistributedCollector` into a :class:`~daskprofile.run.Run`.

``attach`` makes the run's live tables read the cluster's data (merged with the local
collectors' tables when the block also computes locally); ``finish`` stops the collector
and writes what a finished run needs into ``run.meta``. ``profile`` is
``daskprofile.profile`` plus the cluster, usable on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..collectors.stacks import StackCollector
from ..options import ProfileOptions
from ..recorder import profile as _local_profile
from ..run import Run
from ._tables import merge_cache, merge_tasks
from .collector import DistributedCollector, active_client

__all__ = ["attach", "collector_for", "finish", "profile"]

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


class profile(_local_profile):
    """``daskprofile.profile()`` that also records what runs on a ``distributed`` cluster.

    ::

        with daskprofile.distributed.profile(client) as run:
            x.compute()
        run.tasks          # worker = "<worker address> thread <n>", times measured there

    ``client``: the ``distributed.Client`` (default: the default client; without one this
    is plain ``daskprofile.profile``). ``flush``: seconds between batches streamed from
    the cluster. ``all_clients``: record every client's tasks, not only this client's.
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
        super().__init__(**kwargs)
        self.client = client
        self.flush = flush
        self.all_clients = all_clients
        self.collector: DistributedCollector | None = None

    def _local(self, kind: type) -> Any:
        for listener in getattr(self, "_listeners", ()):
            if isinstance(listener, kind):
                return listener
        for _, sampler in getattr(self, "_samplers", ()):
            if isinstance(sampler, kind):
                return sampler
        return None

    def __enter__(self) -> Run:
        run = super().__enter__()
        if "distributed" in run.meta.get("schedulers", ()):
            return run  # the core recorder wired the cluster already
        from ..collectors.cache import CacheCollector
        from ..collectors.resources import ResourceCollector
        from ..collectors.tasks import TaskCollector

        local_stacks = self._local(StackCollector)
        collector = collector_for(
            self.options,
            self.client,
            stacks_into=local_stacks,
            flush=self.flush,
            all_clients=self.all_clients,
        )
        if collector is None:
            return run
        self.collector = collector
        collector.errors = []
        collector.start()
        if not collector.started:
            finish(collector, run)
            self.collector = None
            return run
        tasks, cache = self._local(TaskCollector), self._local(CacheCollector)
        resources = self._local(ResourceCollector)
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
        return run

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        collector, self.collector = self.collector, None
        if collector is not None and self.run is not None:
            try:
                finish(collector, self.run)
            except Exception as error:  # never fail the user's block
                self.run.meta["errors"].append({"collector": "distributed", "error": repr(error)})
        super().__exit__(exc_type, exc, tb)
