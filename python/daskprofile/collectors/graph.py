"""Graph records: which task rows each task waited for, and when each compute was called.

What findings need beyond the task rows (:mod:`daskprofile.findings`): the dependency
edges between tasks (critical path, readiness, what-if replays) and, per compute, when
``dask.compute`` was called, when the scheduler got the graph and when it ended (time spent
outside tasks) and how many CPUs of the machine stayed idle meanwhile (``/proc/stat``).
Nothing is done per task while a compute runs: a local compute's
dependencies are dask's own (``state["dependencies"]``, which dask never changes once made),
kept by reference; the rows of its tasks are noted one batch at a time (a reference to the
batch's keys and its first row). A cluster graph's edges come from the scheduler, which
holds them anyway, as positions among the labels of its keys
(:meth:`GraphRecorder.cluster_edges`): no graph is materialized again in the kernel and
none is kept alive by the recording. All of it becomes compact arrays
when the run finishes: the edges as a CSR over the run's task rows (``indptr`` int64,
``indices`` int32: row ``i`` waited for rows ``indices[indptr[i]:indptr[i + 1]]``), about
4 B per edge and 8 B per task. Held graphs are converted early once they hold
``max_held`` tasks (at most :data:`MAX_HELD`; a run passes its ``max-records``), and edges
of rows the task table dropped are let go then, so memory stays bounded by the cap.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from itertools import chain, repeat
from time import perf_counter
from typing import Any

import numpy as np

from ..hooks import Call, Compute
from .base import Collector

__all__ = ["MAX_HELD", "GraphRecorder", "empty_computes", "empty_edges", "host_info"]

#: tasks of held graphs (keys kept by reference) before they are converted to arrays
MAX_HELD = 2_000_000
#: cluster graphs whose edges wait for the rows of their tasks, at most (older ones are
#: converted first)
MAX_GRAPHS = 64


def empty_edges() -> dict[str, np.ndarray]:
    """No edges known (an ``indptr`` of length 0: not recorded, unlike ``[0, ...]``)."""
    return {"indptr": np.empty(0, np.int64), "indices": np.empty(0, np.int32)}


def empty_computes() -> dict[str, Any]:
    """No compute known."""
    f8 = np.empty(0, np.float64)
    return {
        "id": np.empty(0, np.int64),
        "call": f8,
        "submit": f8,
        "end": f8,
        "scheduler": [],
        "idle": f8,
        **host_info(known=False),
    }


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_cpu() -> tuple[float, float] | None:
    """(perf_counter, idle CPU seconds of the whole machine) from ``/proc/stat`` (None
    elsewhere): whether other processes left CPUs free while a compute ran."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
        return perf_counter(), (int(fields[4]) + int(fields[5])) / _TICK
    except (OSError, ValueError, IndexError):
        return None


def _idle_cores(a: tuple[float, float] | None, b: tuple[float, float] | None) -> float:
    """Mean idle CPUs of the machine between two :func:`machine_cpu` readings (NaN: not
    known or too short to tell)."""
    if a is None or b is None or b[0] - a[0] < 0.05:
        return float("nan")
    return max(0.0, (b[1] - a[1]) / (b[0] - a[0]))


def host_info(known: bool = True) -> dict[str, int]:
    """CPUs and memory of this machine (0: not known)."""
    if not known:
        return {"cpus": 0, "memory_total": 0}
    try:
        import psutil

        memory = int(psutil.virtual_memory().total)
    except Exception:
        memory = 0
    return {"cpus": int(os.cpu_count() or 0), "memory_total": memory}


class _Held:
    """A local compute and the batches of its rows: ``(keys, first absolute row)``."""

    __slots__ = ("batches", "compute", "cpu_end", "cpu_start", "tasks")

    def __init__(self, compute: Compute) -> None:
        self.compute = compute
        self.batches: list[tuple[tuple[Hashable, ...], int]] = []
        self.tasks = 0
        self.cpu_start = self.cpu_end = machine_cpu()


class GraphRecorder(Collector):
    """Records dependency edges and compute times (see the module docstring)."""

    name = "graph"

    def __init__(
        self, max_held: int | None = MAX_HELD, kept_from: Callable[[], int] | None = None
    ) -> None:
        """``max_held``: None for no cap but :data:`MAX_HELD`; ``kept_from()``: the absolute
        index of the oldest task row still kept."""
        super().__init__()
        self.max_held = MAX_HELD if max_held is None else min(max_held, MAX_HELD)
        self.kept_from = kept_from
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        self._held_tasks = 0
        self._pairs: list[tuple[np.ndarray, np.ndarray]] = []  # (task rows, dependency rows)
        self._computes: list[tuple[int, float, float, float, str, float]] = []
        self._labels: list[tuple[list[str], int]] = []  # cluster rows: (key labels, first)
        #: cluster graphs' edges: (key labels, task positions, dependency positions)
        self._graphs: list[tuple[list[str], np.ndarray, np.ndarray]] = []
        self.host = host_info()

    # ------------------------------------------------------------ recording
    def on_compute_start(self, compute: Compute) -> None:
        with self._lock:
            self._held[compute.id] = _Held(compute)

    def rows(self, compute: Compute, keys: tuple[Hashable, ...], first: int) -> None:
        """The task collector wrote rows ``first..`` for ``keys`` of ``compute``."""
        with self._lock:
            held = self._held.get(compute.id)
            if held is None:
                return
            held.batches.append((keys, first))
            held.tasks += len(keys)
            held.cpu_end = machine_cpu()  # the last batch comes as the compute ends
            self._held_tasks += len(keys)
            over = self._held_tasks > self.max_held
        if over:
            self._convert(finished_only=True)

    def on_compute_end(self, compute: Compute, state: Any, failed: bool) -> None:
        """Over ``max_held``: convert now rather than keep dask's dependencies of a
        finished compute alive until the next compute's rows (or the run's end)."""
        with self._lock:
            over = self._held_tasks > self.max_held
        if over:
            self._convert(finished_only=True)

    def remote_rows(self, labels: list[str], first: int) -> None:
        """Rows ``first..`` were written for cluster tasks with key labels ``labels``."""
        with self._lock:
            self._labels.append((labels, first))

    def cluster_edges(self, labels: list[str], tasks: list[int], deps: list[int]) -> None:
        """A cluster graph's edges: task ``tasks[i]`` waited for ``deps[i]``, positions in
        ``labels`` (its keys' labels); made rows when the run finishes."""
        entry = (labels, np.asarray(tasks, np.int64), np.asarray(deps, np.int64))
        n = len(labels)
        for positions in entry[1:]:
            if positions.ndim != 1 or len(positions) != len(entry[1]):
                return  # not edges: not known
            if len(positions) and (positions.min() < 0 or positions.max() >= n):
                return
        with self._lock:
            self._graphs.append(entry)
            if len(self._graphs) <= MAX_GRAPHS:
                return
            oldest = self._graphs.pop(0)
        self._add_cluster_edges([oldest])

    def call(self, record: Call) -> None:
        """A timed ``dask.compute`` call returned; kept if it submitted cluster graphs."""
        if not record.submits:
            return
        end = record.t_return if record.t_return is not None else np.nan
        with self._lock:
            row = (0, record.t_call, record.submits[0], end, "distributed", np.nan)
            self._computes.append(row)

    # ------------------------------------------------------------ converting
    def _convert(self, finished_only: bool) -> None:
        with self._lock:
            ids = [i for i, h in self._held.items() if h.compute.t_end or not finished_only]
            taken = [self._held.pop(i) for i in ids]
            self._held_tasks -= sum(h.tasks for h in taken)
        for held in taken:
            self._note_compute(held.compute, _idle_cores(held.cpu_start, held.cpu_end))
            pairs = _local_pairs(held)
            if pairs is not None:
                with self._lock:
                    self._pairs.append(pairs)
        if taken and self.kept_from is not None:
            self._forget_before(self.kept_from())

    def _forget_before(self, first: int) -> None:
        """Let go of the edges that touch rows before ``first`` (dropped by the cap)."""
        with self._lock:
            kept = [_from_row(p, first) for p in self._pairs]
            self._pairs = [p for p in kept if len(p[0])]

    def _note_compute(self, compute: Compute, idle: float) -> None:
        call = compute.t_call if compute.t_call is not None else np.nan
        end = compute.t_end if compute.t_end is not None else perf_counter()
        row = (compute.id, call, compute.t_start, end, compute.scheduler, idle)
        with self._lock:
            self._computes.append(row)

    def _add_cluster_edges(self, graphs: list[tuple[list[str], np.ndarray, np.ndarray]]) -> None:
        with self._lock:
            labels = list(self._labels)
        if not labels or not graphs:
            return
        row_of: dict[str, int] = {}
        for names, first in labels:
            row_of.update(zip(names, range(first, first + len(names)), strict=False))
        for names, tasks, deps in graphs:
            rows = np.fromiter(map(row_of.get, names, repeat(-1)), np.int64, len(names))
            task_rows, dep_rows = rows[tasks], rows[deps]
            keep = (task_rows >= 0) & (dep_rows >= 0)
            with self._lock:
                self._pairs.append((task_rows[keep], dep_rows[keep]))

    # ------------------------------------------------------------ reading
    def edges(self, first: int, count: int) -> dict[str, np.ndarray]:
        """The edges between the ``count`` rows kept from absolute row ``first`` (CSR)."""
        self._convert(finished_only=False)
        with self._lock:
            graphs, self._graphs = self._graphs, []
        self._add_cluster_edges(graphs)
        with self._lock:
            pairs = list(self._pairs)
        return to_csr(pairs, first, count)

    def computes(self) -> dict[str, Any]:
        """One row per compute: id (the tasks' ``compute``; 0: a cluster graph), call,
        submit, end (perf_counter s; NaN: not known), scheduler; plus the host's CPUs and
        memory."""
        self._convert(finished_only=False)
        with self._lock:
            rows = sorted(self._computes, key=lambda r: r[2])
        return {
            "id": np.array([r[0] for r in rows], dtype=np.int64),
            "call": np.array([r[1] for r in rows], dtype=np.float64),
            "submit": np.array([r[2] for r in rows], dtype=np.float64),
            "end": np.array([r[3] for r in rows], dtype=np.float64),
            "scheduler": [r[4] for r in rows],
            "idle": np.array([r[5] for r in rows], dtype=np.float64),
            **self.host,
        }


def _local_pairs(held: _Held) -> tuple[np.ndarray, np.ndarray] | None:
    """(task rows, dependency rows) of a local compute, from dask's dependencies."""
    deps = held.compute.dependencies
    if not deps or not held.batches:
        return None
    row_of: dict[Hashable, int] = {}
    for keys, first in held.batches:
        row_of.update(zip(keys, range(first, first + len(keys)), strict=False))
    return _pairs(row_of, deps)


def _pairs(
    row_of: Mapping[Any, int], deps: Mapping[Any, Iterable[Any]]
) -> tuple[np.ndarray, np.ndarray]:
    """(task rows, dependency rows) of ``deps`` (key -> dependency keys) where both ends
    have a row; C-level maps, no Python step per edge."""
    keys = list(deps)
    groups = list(deps.values())
    rows = np.fromiter(map(row_of.get, keys, repeat(-1)), np.int64, len(keys))
    counts = np.fromiter(map(_count, groups), np.int64, len(keys))
    flat = chain.from_iterable(groups)
    dep_rows = np.fromiter(map(row_of.get, flat, repeat(-1)), np.int64, int(counts.sum()))
    task_rows = np.repeat(rows, counts)
    keep = (task_rows >= 0) & (dep_rows >= 0)
    return task_rows[keep], dep_rows[keep]


def _from_row(pairs: tuple[np.ndarray, np.ndarray], first: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(task rows, dependency rows)`` pairs whose both ends are rows ``>= first``."""
    task, dep = pairs
    if not len(task) or (task.min() >= first and dep.min() >= first):
        return pairs
    keep = (task >= first) & (dep >= first)
    return task[keep], dep[keep]


def _count(items: Any) -> int:
    return len(items)


def to_csr(
    pairs: list[tuple[np.ndarray, np.ndarray]], first: int, count: int
) -> dict[str, np.ndarray]:
    """CSR (``indptr``, ``indices``) over ``count`` rows from absolute ``first`` of the
    ``(task rows, dependency rows)`` pairs, each edge once; edges to rows no longer kept are
    left out."""
    if pairs:
        task = np.concatenate([p[0] for p in pairs]) - first
        dep = np.concatenate([p[1] for p in pairs]) - first
    else:
        task = dep = np.empty(0, np.int64)
    keep = (task >= 0) & (task < count) & (dep >= 0) & (dep < count)
    # each edge once (a cluster graph that touches tasks of an earlier one names their
    # edges again), ordered by task, then dependency
    codes = np.unique(task[keep] * count + dep[keep])
    task, dep = codes // max(count, 1), codes % max(count, 1)
    indptr = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(task, minlength=count), out=indptr[1:])
    return {"indptr": indptr, "indices": dep.astype(np.int32)}
