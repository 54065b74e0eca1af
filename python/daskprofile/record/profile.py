"""``profile()``: record every dask compute of a ``with`` block into one Run.

::

    with daskprofile.profile(dt=0.1, interval=0.01) as run:
        x.compute()
    run.tasks, run.resources, run.cache, run.stacks, run.summary()

Every compute in the block is recorded: the sync, threads and processes schedulers in any
thread, and every ``distributed.Client`` of the process (one running when the block starts,
or one made inside it, as a script run by ``daskprofile run`` does). Arguments left
``None`` come from dask's config (``daskprofile.*``, see :mod:`daskprofile.options`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from .. import hooks
from ..meta import ended_by
from ..options import profile_options
from ..run import Run
from . import clusters
from .recording import Recording

__all__ = ["profile"]


class profile:
    """Profile every dask compute in a ``with`` block; ``as`` gives the live :class:`Run`.

    ``tasks``/``resources``/``cache``/``stacks`` switch collectors on or off; ``dt`` is the
    resource sampling period and ``interval`` the stack sampling period (seconds or
    strings like ``"5ms"``); ``max_records`` caps the rows kept per table (the oldest are
    dropped and counted in ``run.meta.dropped``); ``metric`` measures each result for the
    cache series (default: count). ``None`` means "from dask's config".

    On ``dask.distributed``: ``client`` is recorded from the start, and only that client;
    by default the default client is, if one runs, and every client of this process from
    its first compute (one made inside the block too);
    ``all_clients`` records the tasks of every client of those schedulers, not only this
    process's; ``flush`` is the seconds between batches streamed from the cluster.
    """

    def __init__(
        self,
        *,
        tasks: bool | None = None,
        resources: bool | None = None,
        cache: bool | None = None,
        stacks: bool | None = None,
        dt: float | str | None = None,
        interval: float | str | None = None,
        max_records: int | None = None,
        metric: Callable[[Any], float] | None = None,
        metric_name: str | None = None,
        client: Any = None,
        all_clients: bool = False,
        flush: float = 0.2,
    ) -> None:
        self.options = profile_options(
            tasks=tasks,
            resources=resources,
            cache=cache,
            stacks=stacks,
            dt=dt,
            interval=interval,
            max_records=max_records,
            metric=metric,
            metric_name=metric_name,
        )
        if not isinstance(flush, (int, float)) or isinstance(flush, bool) or flush <= 0:
            raise ValueError(f"flush must be a positive number of seconds, got {flush!r}")
        if not isinstance(all_clients, bool):
            raise TypeError(f"all_clients must be True or False, got {all_clients!r}")
        self.client = client
        self.all_clients = all_clients
        self.flush = float(flush)
        self.recording: Recording | None = None
        self.run: Run | None = None
        self._cluster: Any = None  # the block's ClusterSource, once distributed is in use
        self._watch: Callable[[Any, Any], None] | None = None
        self._cancel: Callable[[], None] = lambda: None
        self._scope: Any = None  # the token of hooks.enter_scope while the block is open

    def __enter__(self) -> Run:
        if self.run is not None:
            raise RuntimeError("a profile() block cannot be entered twice; create a new one")
        recording = self.recording = Recording(self.options)
        run = self.run = recording.start()
        if self.client is not None:
            self._wire_cluster()
        else:
            self._cancel = clusters.when_distributed(self._wire_cluster)
        for listener in recording.listeners:
            listener.scope = self  # computes started where this block is open (hooks)
            hooks.add_listener(listener)
        self._scope = hooks.enter_scope(self)
        return run

    def _wire_cluster(self) -> None:
        """Record clusters into this block's run (runs once distributed is imported): the
        client given or running now, and (unless one was given) every client's graphs."""
        recording = self.recording
        if recording is None or self._cluster is not None:
            return
        try:
            module = clusters.source_module()
            settings = module.ClusterSettings.of(
                self.options, flush=self.flush, all_clients=self.all_clients
            )
            source = self._cluster = module.ClusterSource(settings, recording.samplers.stacks)
            clusters.watch_module().add_close_listener(source.client_closing)
            client = self.client if self.client is not None else module.active_client()
            if client is not None:
                self._plug(source)
                source.add_client(client)
            if self.client is not None:
                return  # that client only

            def watch(client: Any, keys: Any) -> None:
                if hooks.in_scope(self):  # not a graph of another thread's block
                    source.expect(client, keys, self._plug(source))
                else:  # another block's, on a client this block may record too
                    source.foreign(client, keys)

            self._watch = watch
            clusters.watch_module().add_listener(watch)
        except Exception as exc:  # never fail the user's block
            recording.run.meta.errors.append({"collector": "distributed", "error": repr(exc)})

    def _plug(self, source: Any) -> Any:
        """The run's target on ``source``, plugged on first use (a block that imports
        distributed but computes locally keeps its local resources)."""
        assert self.recording is not None
        target = self.recording.plug(source)
        source.default = target
        return target

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """End the run with what it has, whatever ended the block (the user's exception
        goes on unchanged; a failure to tear down is recorded, never raised)."""
        recording = self.recording
        if recording is None:
            return
        if exc is not None:
            recording.run.meta.ended_by = ended_by(exc)
        for listener in recording.listeners:
            hooks.remove_listener(listener)
        hooks.exit_scope(self, self._scope)
        cluster, self._cluster = self._cluster, None
        try:
            self._unwatch(cluster)
        except Exception as error:  # a cluster gone mid-block: the run keeps what it had
            recording.run.meta.errors.append({"collector": "distributed", "error": repr(error)})
        finally:
            recording.finish()
            if cluster is not None:
                cluster.clear()

    def _unwatch(self, cluster: Any) -> None:
        """Stop watching clients; the cluster's last batches, then its plugins go."""
        self._cancel()
        watch, self._watch = self._watch, None
        if watch is not None:
            clusters.watch_module().remove_listener(watch)
        if cluster is not None:
            clusters.watch_module().remove_close_listener(cluster.client_closing)
            cluster.stop()

    def find(self, kind: type) -> Any:
        """This block's collector of type ``kind`` while it runs, else None."""
        recording = self.recording
        if recording is None:
            return None
        samplers = recording.samplers
        for collector in [*recording.listeners, samplers.resources, samplers.stacks]:
            if isinstance(collector, kind):
                return collector
        return None
