"""The cluster side of the progress bars: tasks done and to do in the graphs submitted to
``dask.distributed`` clients while a bar is on.

::

    progress = ClusterProgress(on_graph=bar_wakes_up, flush=0.1)
    progress.start()          # on entering the block: nothing imported until distributed is
    ...                       # x.compute() on a Client: on_graph() in the submitting thread
    progress.counts()         # ClusterCounts: per group done / total, graphs, pending, erred
    progress.settle()         # on leaving: wait (bounded) for the last batches
    progress.stop()           # plugins, listener and import hook removed

Both bars (the text one in :mod:`daskprofile.diagnostics`, the widget in
:mod:`daskprofile.jupyter.widgets`) use it the same way. Once ``distributed`` is imported
(:func:`~.clusters.when_distributed`), a watch listener hears of every graph before it
leaves; the first one creates a :class:`~daskprofile.distributed.source.ClusterSource`
with the scheduler plugin only (no cache, resources or stacks), and every graph is
announced for one target. The target's task collector only counts: the rows of finished
tasks per group and the graphs that had a failed task (nothing is kept per task); the
scheduler's tasks per group of each graph arrive as the target's totals, with the batches.

Any error switches the cluster part off with one warning: the user's compute never fails
because of a progress bar, and is never held up longer than announcing its graph takes.
"""

from __future__ import annotations

import operator
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from ..collectors.tasks import RemoteRows, TaskCollector
from ..run import Run
from . import clusters

__all__ = ["ClusterCounts", "ClusterProgress", "settle_timeout"]

#: the period of the cluster's batches, bounds included (seconds)
FLUSH_MIN, FLUSH_MAX = 0.05, 0.2


def flush_for(dt: float) -> float:
    """Seconds between the scheduler's batches for a bar redrawn every ``dt`` seconds."""
    return min(max(dt, FLUSH_MIN), FLUSH_MAX)


def settle_timeout(flush: float) -> float:
    """How long leaving a block waits for the last batches: two periods and a second."""
    return 2 * flush + 1.0


@dataclass(frozen=True)
class ClusterCounts:
    """Progress of cluster graphs at one moment.

    ``done``: tasks that ran and succeeded, per group (rows received); ``total``: tasks per
    group of the graphs whose first batch arrived; ``graphs``: graphs announced; ``pending``:
    graphs with tasks not finished yet; ``erred``: graphs in which a task failed.
    """

    done: Mapping[str, int] = field(default_factory=dict)
    total: Mapping[str, int] = field(default_factory=dict)
    graphs: int = 0
    pending: int = 0
    erred: int = 0

    @property
    def complete(self) -> bool:
        """Every graph announced has finished (and there was one)."""
        return self.graphs > 0 and self.pending == 0

    def groups(self) -> dict[str, tuple[int, int]]:
        """``{group: (done, total)}`` as shown: done never above total, and all done once
        the graphs finished without error (tasks already in memory when a graph arrived
        count in its total but never run)."""
        full = self.complete and not self.erred
        out = {}
        for group in self.total.keys() | self.done.keys():
            total = self.total.get(group, 0)
            done = self.done.get(group, 0)
            out[group] = (total if full else min(done, total) if total else done, total)
        return out

    def tasks(self) -> tuple[int, int]:
        """``(done, total)`` over every group, as shown (see :meth:`groups`)."""
        rows = self.groups().values()
        return sum(d for d, _ in rows), sum(t for _, t in rows)

    def since(self, base: ClusterCounts) -> ClusterCounts:
        """The tasks and failed graphs added since ``base``; ``graphs`` and ``pending`` stay
        as they are now (so :attr:`complete` still says whether every graph finished)."""
        return ClusterCounts(
            done=_minus(self.done, base.done),
            total=_minus(self.total, base.total),
            graphs=self.graphs,
            pending=self.pending,
            erred=self.erred - base.erred,
        )


def _minus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = {k: v - b.get(k, 0) for k, v in a.items()}
    return {k: v for k, v in out.items() if v}


class _GroupCounter(TaskCollector):
    """The target's task collector: counts rows per group and the graphs with a failed
    task, keeps none (a progress bar needs no row; the source only adds and shifts)."""

    name = "cluster-progress"

    def __init__(self) -> None:
        super().__init__()
        self.count_lock = threading.Lock()
        self.done: Counter[str] = Counter()
        self.erred: set[int] = set()
        self.rows = 0

    def add_rows(self, rows: RemoteRows) -> int:
        """Count the rows (a failed task is not done: as dask's ``finished``)."""
        with self.count_lock:
            first = self.rows
            self.rows += len(rows.group)
            if not any(rows.error):
                self.done.update(rows.group)
                return first
            failed = [e is not None for e in rows.error]
            self.done.update(compress(rows.group, map(operator.not_, failed)))
            self.erred.update(compress(rows.compute, failed))
        return first

    def shift(self, row: int, delta: float) -> None:
        """Clock corrections move rows in time: nothing to count."""

    def read(self) -> tuple[dict[str, int], int]:
        with self.count_lock:
            return dict(self.done), len(self.erred)


class ClusterProgress:
    """Counts the tasks of the cluster graphs submitted between :meth:`start` and
    :meth:`stop` (see the module docstring).

    ``on_graph()`` is called in the submitting thread after each graph was announced (keep
    it quick); ``flush`` is the seconds between the scheduler's batches.
    """

    def __init__(self, on_graph: Callable[[], None] | None = None, flush: float = 0.2) -> None:
        self.on_graph = on_graph
        self.flush = flush
        self.lock = threading.Lock()
        self.source: Any = None  # the ClusterSource, from the first graph on
        self.target: Any = None
        self.counter: _GroupCounter | None = None
        self.graphs = 0
        self.failed = False
        self.errors: list[str] = []
        self._cancel: Callable[[], None] = lambda: None
        self._listening = False
        self._on = False
        self._left = 0  # graphs still running when stopped (no batch comes for them)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Listen for graphs (once ``distributed`` is imported, now if it is)."""
        if self._on:
            return
        self._on, self._left = True, 0
        self.guard(self._wait_for_distributed)

    def _wait_for_distributed(self) -> None:
        self._cancel = clusters.when_distributed(self._listen_guarded)

    def _listen_guarded(self) -> None:  # (may run in the thread importing distributed)
        self.guard(self._listen)

    def _listen(self) -> None:
        with self.lock:
            if not self._on or self._listening or self.failed:
                return
            self._listening = True
        clusters.watch_module().add_listener(self._on_graph)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until every graph announced has finished (at most ``timeout`` seconds,
        default :func:`settle_timeout`); True if they have. Closed clients count as done."""
        source, target = self.source, self.target
        if source is None or target is None:
            return True
        deadline = time.monotonic() + (settle_timeout(self.flush) if timeout is None else timeout)
        while True:
            try:
                if source.pending(target) == 0:
                    return True
                source.drop_closed_clients()  # a client closed in the block sends nothing
            except Exception as exc:
                self._fail(exc)
                return False
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop listening and remove everything from the cluster (idempotent)."""
        with self.lock:
            source, target = self.source, self.target
            if self._on and source is not None and target is not None:
                self._left = source.pending(target)  # (stopping forgets which were left)
            self._on = False
            listening, self._listening = self._listening, False
            cancel, self._cancel = self._cancel, lambda: None
        self._quietly(cancel)
        if listening:
            self._quietly(lambda: clusters.watch_module().remove_listener(self._on_graph))
        if source is not None:
            self._quietly(source.stop)  # the last batches are applied first
            self._quietly(source.clear)  # the counts stay here

    # ------------------------------------------------------------ graphs
    def _on_graph(self, client: Any, keys: Iterable[Any]) -> None:
        """The watch's listener (submitting thread): announce the graph for our target."""
        if not self.guard(self._expect, client, keys):
            return
        on_graph = self.on_graph
        if on_graph is not None:
            self.guard(on_graph)

    def _expect(self, client: Any, keys: Iterable[Any]) -> None:
        with self.lock:  # (so that stop() cannot come between: no plugin left behind)
            if not self._on or self.failed:
                return
            source, target = self.source, self.target
            if source is None:
                source, target = self._make_source()
            source.expect(client, keys, target)
            if _recorded(source, client):  # (not if its plugins could not be installed)
                self.graphs += 1

    def _make_source(self) -> tuple[Any, Any]:
        """The source and target, on the first graph (caller holds the lock)."""
        module = clusters.source_module()
        settings = module.ClusterSettings(
            tasks=True, cache=False, resources=False, stacks=False, flush=self.flush
        )
        self.counter = _GroupCounter()
        run = Run({"id": "progress", "finished": False})
        self.target = module.Target(run, tasks=self.counter)
        self.source = module.ClusterSource(settings)
        return self.source, self.target

    # ------------------------------------------------------------ reading
    def counts(self) -> ClusterCounts:
        """The counts now (all zero before the first graph); once stopped, ``pending`` is
        the graphs that were still running then."""
        counter, target, source = self.counter, self.target, self.source
        if counter is None or target is None or source is None:
            return ClusterCounts()
        done, erred = counter.read()
        return ClusterCounts(
            done=done,
            total=dict(target.totals),
            graphs=self.graphs,
            pending=source.pending(target) if self._on else self._left,
            erred=erred,
        )

    @property
    def busy(self) -> bool:
        """Some graph announced has not finished yet (False once stopped: nothing more
        will be heard of it)."""
        source, target = self.source, self.target
        return self._on and source is not None and target is not None and source.pending(target) > 0

    # ------------------------------------------------------------ errors
    def guard(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn``; on an error switch the cluster part off. False if it failed."""
        try:
            fn(*args)
        except Exception as exc:
            self._fail(exc)
            return False
        return True

    def _fail(self, exc: BaseException) -> None:
        with self.lock:
            first = not self.failed
            self.failed = True
            self.errors.append(repr(exc))
            listening, self._listening = self._listening, False
        if listening:
            self._quietly(lambda: clusters.watch_module().remove_listener(self._on_graph))
        if first:
            warnings.warn(
                f"daskprofile: the progress bar stopped following the cluster ({exc!r}); "
                "the computation is not affected",
                RuntimeWarning,
                stacklevel=3,
            )

    def _quietly(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:
            self._fail(exc)


def _recorded(source: Any, client: Any) -> bool:
    """Whether ``source`` records ``client`` (its plugins are installed)."""
    entry = source.clients.get(str(getattr(client, "id", "")))
    return entry is not None and bool(getattr(entry, "live", True))
