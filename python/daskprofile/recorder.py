"""``profile()``: wires collectors -> Run -> sinks (in-memory history, subscribers).

::

    with daskprofile.profile(dt=0.1, interval=0.01) as run:
        x.compute()
    run.tasks, run.resources, run.cache, run.stacks, run.summary()

Every compute in the block (sync, threads or processes scheduler; any thread) is recorded.
Arguments left ``None`` come from dask's config (``daskprofile.*``, see ``options``).
Finished runs are kept in a bounded history (``daskprofile.history`` runs); subscribers
(e.g. the comm publisher) are told when a run starts and ends.
"""

from __future__ import annotations

import itertools
import os
import socket
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from time import perf_counter
from types import TracebackType
from typing import Any

from . import hooks
from .collectors import StackWorkerHook, merge_stacks, optional
from .collectors.base import Collector
from .collectors.cache import CacheCollector
from .collectors.tasks import TaskCollector
from .hooks import Compute, TaskBatch
from .options import ProfileOptions, history_size, profile_options
from .run import Run

__all__ = [
    "add_live",
    "clear_history",
    "finish_live",
    "history",
    "live_runs",
    "profile",
    "subscribe",
]

RunCallback = Callable[[Run], None]

_lock = threading.Lock()
_history: deque[Run] = deque()
_live: list[Run] = []
_subscribers: list[tuple[RunCallback | None, RunCallback | None]] = []
_ids = itertools.count(1)
_HOST = socket.gethostname()


# ---------------------------------------------------------------- history + subscriptions
def history() -> list[Run]:
    """Finished runs kept in memory, oldest first (at most ``daskprofile.history``)."""
    with _lock:
        return list(_history)


def live_runs() -> list[Run]:
    """Runs whose block is still running."""
    with _lock:
        return list(_live)


def clear_history() -> None:
    """Forget the finished runs."""
    with _lock:
        _history.clear()


def subscribe(
    on_start: RunCallback | None = None, on_end: RunCallback | None = None
) -> Callable[[], None]:
    """Call ``on_start(run)`` when a run starts, ``on_end(run)`` when it has finished.

    Callbacks run in the thread that enters/leaves the ``profile()`` block and must be
    quick (hand work to a thread). An exception is reported as a warning, never raised.
    Returns a function that unsubscribes. Replay what exists with :func:`history` and
    :func:`live_runs`.
    """
    entry = (on_start, on_end)
    with _lock:
        _subscribers.append(entry)

    def unsubscribe() -> None:
        with _lock:
            if entry in _subscribers:
                _subscribers.remove(entry)

    return unsubscribe


def _notify(index: int, run: Run) -> None:
    with _lock:
        callbacks = [entry[index] for entry in _subscribers]
    for callback in callbacks:
        if callback is None:
            continue
        try:
            callback(run)
        except Exception as exc:
            warnings.warn(
                f"daskprofile: run subscriber raised {exc!r}", RuntimeWarning, stacklevel=3
            )


def add_live(run: Run) -> None:
    """Announce a run recorded by another component (magics, distributed): it is listed
    in :func:`live_runs` and subscribers' ``on_start`` is called."""
    with _lock:
        if run not in _live:
            _live.append(run)
    _notify(0, run)


def finish_live(run: Run) -> None:
    """A run announced with :func:`add_live` has finished (``run.finish()`` called): keep
    it in the history and call subscribers' ``on_end``."""
    _keep(run)
    _notify(1, run)


def _keep(run: Run) -> None:
    size = history_size()
    with _lock:
        if run in _live:
            _live.remove(run)
        _history.append(run)
        while len(_history) > size:
            _history.popleft()


# ---------------------------------------------------------------- listeners of a run
class _Meta(Collector):
    """Counts computes and schedulers into ``run.meta``."""

    name = "meta"

    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run

    def on_compute_start(self, compute: Compute) -> None:
        meta = self.run.meta
        meta["computes"] = meta.get("computes", 0) + 1
        if compute.scheduler not in meta["schedulers"]:
            meta["schedulers"].append(compute.scheduler)


class _StackFeed(Collector):
    """Asks the hook to track running tasks and brings worker-process samples home."""

    name = "stacks"
    track_running = True

    def __init__(self, collector: Any, interval: float, cycle: float) -> None:
        super().__init__()
        self.collector = collector
        self.worker_hooks = (StackWorkerHook(interval, cycle),)

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        merge_stacks(self.collector, batch.extra)


def _new_run(options: ProfileOptions) -> Run:
    return Run(
        {
            "id": f"{os.getpid()}-{next(_ids)}-{int(time.time() * 1000)}",
            "wall0": time.time(),
            "t0": perf_counter(),
            "t1": None,
            "host": _HOST,
            "pid": os.getpid(),
            "options": options.to_dict(),
            "schedulers": [],
            "computes": 0,
            "dropped": {},
            "errors": [],
            "finished": False,
        }
    )


class profile:
    """Profile every dask compute in a ``with`` block; ``as`` gives the live :class:`Run`.

    ``tasks``/``resources``/``cache``/``stacks`` switch collectors on or off; ``dt`` is the
    resource sampling period and ``interval`` the stack sampling period (seconds or
    strings like ``"5ms"``); ``max_records`` caps the rows kept per table (the oldest are
    dropped and counted in ``run.meta["dropped"]``); ``metric`` measures each result for the
    cache series (default: count). ``None`` means "from dask's config".

    With a ``distributed`` client running (``client=``, or the default client) the
    cluster's tasks, worker resources, stacks and memory are recorded into the same run.
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
        self.run: Run | None = None
        self._listeners: list[Any] = []
        self._samplers: list[tuple[str, Any]] = []
        self._starters: list[threading.Thread] = []
        self.client = client
        self.cluster_flush = 0.2
        self.cluster_all_clients = False
        self.collector: Any = None  # the cluster's, while the block runs on one

    # ------------------------------------------------------------ wiring
    def _wire_tasks(self, run: Run, o: ProfileOptions) -> None:
        if o.tasks:
            tasks = TaskCollector(o.max_records)
            self._listeners.append(tasks)
            run.attach("tasks", tasks.snapshot_compact)
        if o.cache:
            cache = CacheCollector(o.metric, o.max_records, t0=run.t0)
            self._listeners.append(cache)
            run.attach("cache", cache.snapshot)

    def _wire_resources(self, run: Run, o: ProfileOptions) -> None:
        module = optional("resources") if o.resources else None
        if module is None:
            return
        collector = module.ResourceCollector(o.dt, max_samples=o.max_records)
        self._samplers.append(("resources", collector))
        run.attach("resources", collector.snapshot)

    def _wire_stacks(self, run: Run, o: ProfileOptions) -> None:
        module = optional("stacks") if o.stacks else None
        if module is None:
            return
        collector = module.StackCollector(o.interval)
        self._samplers.append(("stacks", collector))
        self._listeners.append(_StackFeed(collector, o.interval, collector.cycle))
        run.attach("stacks", collector.trees)
        run.attach("stack_history", collector.history)

    def find(self, kind: type) -> Any:
        """This block's collector of type ``kind`` while it runs, else None."""
        for collector in [*self._listeners, *(sampler for _, sampler in self._samplers)]:
            if isinstance(collector, kind):
                return collector
        return None

    def _wire_cluster(self, run: Run) -> None:
        """Record ``client``'s cluster too (default: the default client, if running).

        Costs nothing when ``distributed`` was never imported and no client was given.
        """
        if self.client is None and "distributed" not in sys.modules:
            return

        def start() -> None:
            from .distributed._run import wire

            self.collector = wire(self, run, self.client)

        _guarded(run, "distributed", start)

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> Run:
        if self.run is not None:
            raise RuntimeError("a profile() block cannot be entered twice; create a new one")
        run = self.run = _new_run(self.options)
        self._listeners = [_Meta(run)]
        self._wire_tasks(run, self.options)
        self._wire_resources(run, self.options)
        self._wire_stacks(run, self.options)
        for listener in self._listeners:
            listener.errors = run.meta["errors"]
        for name, sampler in self._samplers:
            if getattr(sampler, "quick_start", True):
                _guarded(run, name, sampler.start)
            else:  # a first sample that reads every process: overlap it with the block
                self._starters.append(_start_in_background(run, name, sampler))
        self._wire_cluster(run)
        with _lock:
            _live.append(run)
        for listener in self._listeners:
            hooks.add_listener(listener)
        _notify(0, run)
        return run

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        run = self.run
        if run is None:
            return
        for listener in self._listeners:
            hooks.remove_listener(listener)
        collector, self.collector = self.collector, None
        if collector is not None:
            from .distributed._run import unwire

            unwire(collector, run)
        for starter in self._starters:
            starter.join()
        dropped: dict[str, int] = {}
        for name, sampler in self._samplers:
            _guarded(run, name, sampler.stop)
            error = getattr(sampler, "error", None)
            if error:
                run.meta["errors"].append({"collector": name, "error": str(error)})
            # samples that left the history, and stacks CPython handed back broken
            lost = [getattr(sampler, attr, 0) or 0 for attr in ("dropped", "unreadable")]
            dropped[name] = int(sum(lost))
        run.finish(perf_counter(), dropped)
        self._listeners, self._samplers, self._starters = [], [], []
        _keep(run)
        _notify(1, run)


def _start_in_background(run: Run, name: str, sampler: Any) -> threading.Thread:
    """Start a sampler from a short-lived thread: its first sample (listing the process
    tree takes milliseconds) then overlaps the block instead of delaying it."""

    def start() -> None:
        time.sleep(0)  # hand the GIL back: Thread.start() returns only once we let go
        _guarded(run, name, sampler.start)

    thread = threading.Thread(target=start, name=f"daskprofile-start-{name}")
    thread.daemon = True
    thread.start()
    return thread


def _guarded(run: Run, name: str, fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception as exc:
        run.meta["errors"].append({"collector": name, "error": repr(exc)})
        warnings.warn(
            f"daskprofile: the {name} collector raised {exc!r} and is switched off",
            RuntimeWarning,
            stacklevel=3,
        )
