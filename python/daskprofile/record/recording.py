"""Recording: the one place where collectors become a :class:`~daskprofile.run.Run` and its
:class:`~.cursors.Cursors`.

A recording makes one run: its task and cache collectors (fresh per run), the resource
and stack samplers it reads (its own, started and stopped with it, or shared long-lived
ones it reads a time slice of), its progress totals, and the run's metadata. It announces
the run with its cursors when it starts and keeps it when it finishes
(:mod:`.history`), so every sink (the comm publisher, the history) gets the same readers.
A cluster is one more source: :meth:`Recording.plug` gives a
:class:`~daskprofile.distributed.source.ClusterSource` the run's collectors as a target.

Who decides which computes a recording sees is its client: ``profile()`` registers the
recording's listeners with the scheduler hook for a whole block; the panel's per-cell
recorder forwards each compute to the recording of its cell.
"""

from __future__ import annotations

import functools
import itertools
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import codemap
from ..collectors import StackWorkerHook, merge_stacks, optional
from ..collectors.base import Collector
from ..collectors.cache import CacheCollector
from ..collectors.graph import GraphRecorder
from ..collectors.tasks import TaskCollector
from ..hooks import Compute, Listener, TaskBatch
from ..keys import task_group
from ..meta import RunMeta
from ..options import ProfileOptions
from ..run import Run
from ..versions import versions
from . import history
from .cursors import (
    Cursors,
    Reader,
    action_rows,
    live_exceptions,
    live_grid,
    live_members,
    live_table,
    live_tasks,
    live_window,
    memory_rows,
    transfer_rows,
)

if TYPE_CHECKING:
    from ..distributed.source import ClusterSource, Target

__all__ = ["Recording", "Samplers"]

#: graphs kept for progress totals until a sink asks for them (then counted)
MAX_GRAPHS = 4

_ids = itertools.count(1)
_HOST = socket.gethostname()


@dataclass
class Samplers:
    """The time-sampled collectors a recording reads.

    ``shared=False``: the recording's own, started and stopped with it. ``shared=True``:
    long-lived ones (the panel's), of which each recording reads its time slice.
    """

    resources: Any = None  # collectors.resources.ResourceCollector
    stacks: Any = None  # collectors.stacks.StackCollector
    shared: bool = False

    @classmethod
    def for_options(cls, options: ProfileOptions, **stacks: Any) -> Samplers:
        """New samplers for what ``options`` switches on (modules that exist only)."""
        resources = optional("resources") if options.resources else None
        stack_module = optional("stacks") if options.stacks else None
        return cls(
            resources=resources.ResourceCollector(options.dt, max_samples=options.max_records)
            if resources is not None
            else None,
            stacks=stack_module.StackCollector(options.interval, **stacks)
            if stack_module is not None
            else None,
        )


class _Counter(Collector):
    """Counts computes and schedulers into ``run.meta``; keeps graphs for progress totals."""

    name = "meta"

    def __init__(self, recording: Recording) -> None:
        super().__init__()
        self.recording = recording

    def on_compute_start(self, compute: Compute) -> None:
        meta = self.recording.run.meta
        meta.computes += 1
        if compute.scheduler not in meta.schedulers:
            meta.schedulers.append(compute.scheduler)
        recording = self.recording
        if len(recording.graphs) >= MAX_GRAPHS:  # nobody reads progress: count, not keep
            recording.count_totals()
        with recording._totals_lock:
            recording.graphs.append(compute.dsk)

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        # a graph nobody counted yet is counted now: kept, it would hold the tasks (and any
        # data in them) alive after the compute, for as long as the block runs
        if self.recording.graphs:
            self.recording.count_totals()


class _StackFeed(Collector):
    """Asks the hook to track running tasks and brings worker-process samples home."""

    name = "stacks"
    track_running = True

    def __init__(self, sampler: Any) -> None:
        super().__init__()
        self.sampler = sampler
        self.worker_hooks = (StackWorkerHook(sampler.interval, sampler.cycle),)

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        merge_stacks(self.sampler, batch.extra, compute)


class Recording:
    """One run in the making (see the module docstring).

    ``options``: what to collect; ``samplers``: the samplers to read (default: new ones
    for ``options``, owned by this recording); ``title``: the cell or script; ``auto``: a
    recording nobody asked for by name (the panel's).
    """

    def __init__(
        self,
        options: ProfileOptions,
        *,
        samplers: Samplers | None = None,
        title: str | None = None,
        auto: bool = False,
    ) -> None:
        self.options = options
        self.run = Run(_new_meta(options, title, auto))
        self.samplers = samplers if samplers is not None else Samplers.for_options(options)
        o = options
        self.tasks = TaskCollector(o.max_records) if o.tasks else None
        self.cache = CacheCollector(o.metric, o.max_records, t0=self.run.t0) if o.cache else None
        self.graphs: list[Mapping[Any, Any]] = []
        self.totals: dict[str, int] = {}
        #: dependency edges and compute times (what findings read)
        tasks = self.tasks
        self.graph = GraphRecorder(
            o.max_records, (lambda: tasks.columns.first) if tasks is not None else None
        )
        if tasks is not None:
            tasks.graph = self.graph
        self._totals_lock = threading.Lock()
        self.listeners: list[Listener] = [
            c for c in (_Counter(self), self.tasks, self.cache, self.graph) if c is not None
        ]
        if self.samplers.stacks is not None and not self.samplers.shared:
            self.listeners.append(_StackFeed(self.samplers.stacks))
        for listener in self.listeners:
            listener.errors = self.run.meta.errors  # type: ignore[attr-defined]
        self.cursors = Cursors(totals=self.count_totals)
        self.cluster: ClusterSource | None = None
        self.target: Target | None = None
        self._starters: list[threading.Thread] = []
        self._off: set[int] = set()  # listeners switched off by :meth:`forward`
        self._wire()

    def forward(self, listener: Any, method: str, *args: Any) -> None:
        """Call ``listener.<method>(*args)`` for this run (a client that forwards events
        itself, as the panel's recorder does). A listener that raises is switched off for
        the rest of this run, with its error in ``run.meta.errors`` and one warning; the
        others, and the next runs, go on."""
        if listener is None or id(listener) in self._off:
            return
        try:
            getattr(listener, method)(*args)
        except Exception as exc:
            self._off.add(id(listener))
            name = getattr(listener, "name", None) or type(listener).__name__
            self.run.meta.errors.append({"collector": name, "error": repr(exc)})
            warnings.warn(
                f"daskprofile: the {name} collector raised {exc!r} and is switched off "
                "for this run; the computation is not affected",
                RuntimeWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------ wiring
    def _wire(self) -> None:
        run, cursors = self.run, self.cursors
        if self.tasks is not None:
            run.attach("tasks", self.tasks.snapshot_compact)
            run.attach("exceptions", self.tasks.exceptions.snapshot)
            cursors.tasks = live_tasks(self.tasks)
            cursors.keys = self.tasks.keys_at
            cursors.exceptions = live_exceptions(self.tasks.exceptions)
        if self.cache is not None:
            run.attach("cache", self.cache.snapshot)
            cursors.cache = live_table(self.cache.since)
        self._wire_graph()
        resources, stacks = self.samplers.resources, self.samplers.stacks
        if resources is not None:
            self._wire_resources(resources)
        if stacks is not None:
            self._wire_stacks(stacks)

    def _wire_graph(self) -> None:
        """The run's ``edges`` (over the task rows it keeps) and ``computes`` tables."""
        graph, tasks = self.graph, self.tasks
        self.run.attach("computes", graph.computes)
        if tasks is not None:
            columns = tasks.columns
            self.run.attach("edges", lambda: graph.edges(columns.first, len(columns)))

    def _watch_graphs(self, on: bool) -> None:
        """While plugged into a cluster: keep its graphs and timed compute calls."""
        from ..hooks import add_call_listener, remove_call_listener
        from .clusters import watch_module

        watch = watch_module()
        if on:
            watch.add_graph_listener(self._on_graph)
            add_call_listener(self.graph.call)
        else:
            watch.remove_graph_listener(self._on_graph)
            remove_call_listener(self.graph.call)

    def _on_graph(self, client: Any, expr: Any, keys: Any) -> None:
        if not self.run.finished:  # (its edges come from the scheduler's plugin)
            # the files of its functions, for the samples of their pickled copies (bounded)
            codemap.learn(expr)

    def _wire_resources(self, sampler: Any) -> None:
        if not self.samplers.shared:
            self.run.attach("resources", sampler.snapshot)
            self.cursors.resources = live_table(sampler.since)
            return
        _, start = sampler.since(1 << 62)  # this run's samples start with the next one
        t0 = self.run.t0
        self.cursors.resources = live_table(sampler.since, start)
        self.run.attach("resources", lambda: _after(sampler.since(start)[0], t0))

    def _wire_stacks(self, sampler: Any) -> None:
        if not self.samplers.shared:
            self.run.attach("stacks", sampler.trees)
            self.run.attach("stack_history", sampler.history)
            self.cursors.stacks = sampler.history
            return
        run = self.run

        def slice_of(t_from: float | None) -> list[tuple[float, float, dict[str, Any]]]:
            out: list[tuple[float, float, dict[str, Any]]] = sampler.history(
                max(run.t0, t_from if t_from is not None else run.t0), _t1(run)
            )
            return out

        self.cursors.stacks = slice_of
        run.attach("stacks", lambda: sampler.trees(run.t0, _t1(run)))
        run.attach("stack_history", lambda: slice_of(None))

    # ------------------------------------------------------------ clusters
    def plug(self, source: ClusterSource) -> Target:
        """Record a cluster's computes for this run too: its rows go into this run's
        collectors; its worker processes' resources become the run's resources. Returns
        the target to name in ``source.expect`` (idempotent)."""
        if self.target is not None:
            return self.target
        from ..distributed.source import Target

        target = Target(self.run, self.tasks, self.cache, self.totals, arrived=self.cursors.arrived)
        self.target = target
        self.cluster = source
        source.open(target)
        self._watch_graphs(True)
        run = self.run
        self.cursors.processes = lambda: _readers(source.processes(target))
        self.cursors.resources = _cluster_resources(source, run)
        local_table = run.attached().get("resources")
        run.attach("resources", _prefer_cluster(source, run, local_table))
        _wire_cluster_tables(self.cursors, source.log, run)
        return target

    # ------------------------------------------------------------ lifecycle
    def start(self) -> Run:
        """Start the samplers this recording owns and announce the run; returns it."""
        if not self.samplers.shared:
            for name in ("resources", "stacks"):
                sampler = getattr(self.samplers, name)
                if sampler is None:
                    continue
                if getattr(sampler, "quick_start", True):
                    _guarded(self.run, name, sampler.start)
                else:  # a first sample that reads every process: overlap it with the block
                    self._starters.append(_start_in_background(self.run, name, sampler))
        history.started(self.run, self.cursors)
        return self.run

    def pending(self) -> int:
        """Cluster graphs of this run whose tasks have not all been recorded yet; then 1
        while the workers' last resource samples are on their way (for at most 2 flushes)."""
        cluster, target = self.cluster, self.target
        if cluster is None or target is None:
            return 0
        # then a moment for the workers' last resource samples (see samples_behind)
        return cluster.pending(target) or int(cluster.samples_behind(target))

    def finish(self) -> Run:
        """Stop what this recording owns, freeze the run and keep it; returns it."""
        run = self.run
        t1 = perf_counter()
        run.meta.t1 = t1
        for starter in self._starters:
            starter.join()
        dropped: dict[str, int] = {}
        if not self.samplers.shared:
            for name in ("resources", "stacks"):
                sampler = getattr(self.samplers, name)
                if sampler is not None:
                    dropped[name] = self._stop_sampler(name, sampler)
        self._finish_cluster()
        self.count_totals()
        run.finish(t1, dropped)
        history.finished(run)
        return run

    def _stop_sampler(self, name: str, sampler: Any) -> int:
        """Stop an owned sampler; its error is recorded; returns what it lost."""
        _guarded(self.run, name, sampler.stop)
        error = getattr(sampler, "error", None)
        if error:
            self.run.meta.errors.append({"collector": name, "error": str(error)})
        # samples that left the history, and stacks CPython handed back broken
        lost = [getattr(sampler, attr, 0) or 0 for attr in ("dropped", "unreadable")]
        return int(sum(lost))

    def _finish_cluster(self) -> None:
        cluster, target = self.cluster, self.target
        if cluster is None or target is None:
            return
        self._watch_graphs(False)
        meta = self.run.meta
        try:
            cluster.forget(target)
            info = cluster.describe(self.run.t0, target)
            if info is not None:
                meta.distributed = info
            for error in cluster.errors:
                if error not in meta.errors:
                    meta.errors.append(error)
        except Exception as exc:  # never fail the user's block
            meta.errors.append({"collector": "distributed", "error": repr(exc)})

    def count_totals(self) -> dict[str, int]:
        """Tasks per group in this run's graphs (counted on the caller's thread, then
        dropped), plus the cluster's."""
        with self._totals_lock:  # computes of several threads may end at once
            graphs, self.graphs = self.graphs, []
            for dsk in graphs:
                try:
                    _count_graph(dsk, self.totals)
                except Exception:  # a graph we cannot read: progress falls back to done counts
                    continue
            return self.totals


# ---------------------------------------------------------------- helpers


def _new_meta(options: ProfileOptions, title: str | None, auto: bool) -> RunMeta:
    tag = "p" if auto else ""
    return RunMeta(
        id=f"{os.getpid()}-{tag}{next(_ids)}-{int(time.time() * 1000)}",
        wall0=time.time(),
        t0=perf_counter(),
        host=_HOST,
        pid=os.getpid(),
        options=options.to_dict(),
        finished=False,
        auto=auto,
        title=title,
        versions=versions(),
    )


def _t1(run: Run) -> float | None:
    t1 = run.meta.t1
    return float(t1) if t1 is not None else None


def _after(cols: dict[str, np.ndarray], t0: float) -> dict[str, np.ndarray]:
    keep = np.asarray(cols["time"]) >= t0 - 1e-3
    return {k: np.asarray(v)[keep] for k, v in cols.items()}


def _count_graph(dsk: Mapping[Any, Any], totals: dict[str, int]) -> None:
    """Add ``dsk``'s tasks per group; one group lookup per key *name*, as the collector does."""
    counts: dict[Any, int] = {}
    first: dict[Any, Any] = {}
    for key in list(dsk):
        name = key[0] if type(key) is tuple and key else key
        n = counts.get(name)
        if n is None:
            first[name] = key
            counts[name] = 1
        else:
            counts[name] = n + 1
    for name, n in counts.items():
        key = first[name]
        group = task_group(key, dsk.get(key))
        totals[group] = totals.get(group, 0) + n


def _readers(since: Mapping[str, Callable[[int], Any]]) -> dict[str, Reader]:
    return {label: live_table(read) for label, read in since.items()}


def _cluster_resources(source: ClusterSource, run: Run) -> Reader:
    """The run's live resources once a cluster is plugged in: its worker processes summed
    on a grid from the run's start, the rows every process has reported (they no longer
    change); once the run is finished, the rows it keeps."""

    def totals() -> Mapping[str, Any]:
        if run.finished:
            return run.raw("resources")
        return source.resources(run.t0, _t1(run), complete=True)

    return live_grid(totals, run.t0, source.settings.dt)


def _wire_cluster_tables(cursors: Cursors, log: Any, run: Run) -> None:
    """Live readers of the run's window of a cluster's log (a ``ClusterLog``)."""
    t0 = run.t0

    def t1() -> float | None:
        return _t1(run)

    for name, time_column, rows in (
        ("actions", "start", action_rows),
        ("transfers", "start", transfer_rows),
        ("memory", "time", memory_rows),
    ):
        since = functools.partial(log.since, name)
        start = log.start(name, t0)
        reader = live_window(since, time_column, rows, t0=t0, t1=t1, start=start)
        setattr(cursors, name, reader)
    cursors.members = live_members(
        lambda: (log.roster.version, run.meta.t1), lambda: log.table("workers", t0, t1())
    )


def _prefer_cluster(
    source: ClusterSource, run: Run, local: Callable[[], Any] | None
) -> Callable[[], Any]:
    def resources() -> Any:
        table = source.resources(run.t0, _t1(run))
        if len(table["time"]) or local is None:
            return table
        return local()

    return resources


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
        run.meta.errors.append({"collector": name, "error": repr(exc)})
        warnings.warn(
            f"daskprofile: the {name} collector raised {exc!r} and is switched off",
            RuntimeWarning,
            stacklevel=3,
        )
