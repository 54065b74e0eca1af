"""Replays of a recorded graph: its critical path and list scheduling on ``k`` workers.

Both read the dependency edges as a CSR over task rows (``indptr``, ``indices``: row ``i``
waited for rows ``indices[indptr[i]:indptr[i + 1]]``) and one duration per row.

* :func:`critical_path`: the longest chain by duration. Relaxed in whole-array steps
  (one per level of the graph) while the graph is shallow, else one row at a time in
  order of start, which is a topological order of a recorded run.
* :func:`list_schedule`: the makespan of greedy list scheduling on ``k`` identical
  workers, taking ready tasks in the order they were recorded to start (dask's own
  priorities, as the scheduler applied them).
* :func:`shared_schedule`: the same list scheduling where running together slows tasks
  down (:mod:`.contention`): each task's work advances at ``1 / s(c)`` while ``c`` tasks
  do work, ``s`` by the task's class; then a fixed time (the hand-over) holds its worker.
* :func:`bounds_estimate`: ``max(critical path, work / k)``, what very large runs get
  (Graham's bounds: the list schedule lies between it and work / k + critical path).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

__all__ = [
    "bounds_estimate",
    "critical_path",
    "dependents",
    "list_schedule",
    "Sharing",
    "shared_schedule",
]

#: whole-array relaxation steps tried before going row by row
MAX_LEVELS = 48


def critical_path(
    dur: np.ndarray, indptr: np.ndarray, indices: np.ndarray, order: np.ndarray
) -> tuple[float, list[int]]:
    """(length in s, rows of the longest chain, first to last). ``order``: a topological
    order of the rows (recorded start order)."""
    n = len(dur)
    if n == 0:
        return 0.0, []
    finish = _finish_times(dur, indptr, indices, order)
    end = int(np.argmax(finish))
    return float(finish[end]), _backtrack(end, finish, dur, indptr, indices)


def _finish_times(
    dur: np.ndarray, indptr: np.ndarray, indices: np.ndarray, order: np.ndarray
) -> np.ndarray:
    """Each row's finish on an unbounded number of workers (longest path ending there)."""
    has = np.diff(indptr) > 0
    if not indices.size:
        return dur.astype(np.float64)
    starts = indptr[:-1][has]
    finish = dur.astype(np.float64)
    for _ in range(MAX_LEVELS):
        before = np.maximum.reduceat(finish[indices], starts)
        new = dur[has] + before
        if np.array_equal(new, finish[has]):
            return finish
        finish[has] = new
    return _finish_row_by_row(dur, indptr, indices, order)


def _finish_row_by_row(
    dur: np.ndarray, indptr: np.ndarray, indices: np.ndarray, order: np.ndarray
) -> np.ndarray:
    finish = [0.0] * len(dur)
    lo, idx, d = indptr.tolist(), indices.tolist(), dur.tolist()
    for r in order.tolist():
        a, b = lo[r], lo[r + 1]
        if a == b:
            finish[r] = d[r]
            continue
        finish[r] = d[r] + max([finish[j] for j in idx[a:b]])
    return np.asarray(finish)


def _backtrack(
    end: int, finish: np.ndarray, dur: np.ndarray, indptr: np.ndarray, indices: np.ndarray
) -> list[int]:
    chain = [end]
    row = end
    while indptr[row + 1] > indptr[row]:
        deps = indices[indptr[row] : indptr[row + 1]]
        row = int(deps[np.argmax(finish[deps])])
        chain.append(row)
        if len(chain) > len(dur):  # a cycle in bad data: stop
            break
    chain.reverse()
    return chain


def dependents(indptr: np.ndarray, indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The reverse CSR: ``(rev_ptr, rev_idx)``, rows that waited for each row."""
    task = np.repeat(np.arange(n), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    rev_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=rev_ptr[1:])
    return rev_ptr, task[order]


def list_schedule(
    dur: np.ndarray, indptr: np.ndarray, indices: np.ndarray, priority: np.ndarray, k: int
) -> float:
    """Makespan of greedy list scheduling of the rows on ``k`` workers (ties: lowest
    ``priority`` first)."""
    n = len(dur)
    if n == 0:
        return 0.0
    rev_ptr, rev_idx = dependents(indptr, indices, n)
    waiting = np.diff(indptr).tolist()
    rp, ri, d, prio = rev_ptr.tolist(), rev_idx.tolist(), dur.tolist(), priority.tolist()
    ready = [(prio[r], r) for r in range(n) if not waiting[r]]
    heapq.heapify(ready)
    running: list[tuple[float, int]] = []
    now, free = 0.0, k
    push, pop = heapq.heappush, heapq.heappop
    while ready or running:
        while free and ready:
            _, r = pop(ready)
            push(running, (now + d[r], r))
            free -= 1
        if not running:
            break  # rows waiting on rows that never come (bad data)
        now, r = pop(running)
        free += 1
        for c in ri[rp[r] : rp[r + 1]]:
            waiting[c] -= 1
            if not waiting[c]:
                push(ready, (prio[c], c))
    return now


@dataclass
class Sharing:
    """How rows slow down when they run together: row ``r`` belongs to class ``cls[r]``,
    whose rows take ``s(c) = min(c, 1 + betas[cls[r]] * (c - 1))`` times longer while ``c``
    rows do work at once; after its work a row holds its worker ``after`` s more."""

    cls: np.ndarray
    betas: np.ndarray
    after: float = 0.0


class _Clocks:
    """One clock of work done per class: every row of a class advances at the same rate
    at any moment, so a heap of the clock readings at which its rows finish suffices."""

    def __init__(self, betas: np.ndarray) -> None:
        self.beta = [float(b) for b in betas]
        self.clock = [0.0] * len(self.beta)
        self.heaps: list[list[tuple[float, int]]] = [[] for _ in self.beta]
        self.busy = 0

    def start(self, c: int, r: int, work: float) -> None:
        heapq.heappush(self.heaps[c], (self.clock[c] + work, r))
        self.busy += 1

    def rates(self) -> list[float]:
        n = self.busy
        return [1.0 / min(n, 1.0 + b * (n - 1)) if n else 0.0 for b in self.beta]

    def next(self, rates: list[float]) -> tuple[float, int]:
        """(real time until the next row finishes its work, its class); inf, -1: none."""
        best, which = float("inf"), -1
        for c, heap in enumerate(self.heaps):
            if heap and (heap[0][0] - self.clock[c]) / rates[c] < best:
                best, which = (heap[0][0] - self.clock[c]) / rates[c], c
        return max(best, 0.0), which

    def advance(self, dt: float, rates: list[float]) -> None:
        for c, heap in enumerate(self.heaps):
            if heap:
                self.clock[c] += dt * rates[c]

    def finish(self, c: int) -> int:
        self.busy -= 1
        return heapq.heappop(self.heaps[c])[1]


def shared_schedule(
    work: np.ndarray, dag: tuple[np.ndarray, np.ndarray], priority: np.ndarray, k: int,
    sharing: Sharing,
) -> float:  # fmt: skip
    """Makespan of :func:`list_schedule` (``dag``: ``(indptr, indices)``) where rows
    running together slow down as ``sharing`` says (see :class:`Sharing`).

    Rows share their slowdown evenly (each runs at ``1 / s(c)``): equal rows started
    together finish together, and so hand their workers back together, where rows that
    took turns for a core would have hidden one hand-over behind the other's work. With
    hand-overs of half a task (a loaded machine) that put the replay of such a run on its
    own worker count up to ~8% above its wall time; with short hand-overs, ~1-2%.
    """
    n = len(work)
    if n == 0:
        return 0.0
    rev_ptr, rev_idx = dependents(*dag, n)
    waiting = np.diff(dag[0]).tolist()
    rp, ri, w, prio = rev_ptr.tolist(), rev_idx.tolist(), work.tolist(), priority.tolist()
    cls = sharing.cls.tolist()
    clocks = _Clocks(sharing.betas)
    holding: list[tuple[float, int]] = []  # (when the worker is free again, row)
    ready = [(prio[r], r) for r in range(n) if not waiting[r]]
    heapq.heapify(ready)
    push, pop = heapq.heappush, heapq.heappop
    now, free = 0.0, k
    while ready or clocks.busy or holding:
        while free and ready:
            r = pop(ready)[1]
            clocks.start(cls[r], r, w[r])
            free -= 1
        rates = clocks.rates()
        dt, which = clocks.next(rates)
        if holding and holding[0][0] - now <= dt:
            dt, which = holding[0][0] - now, -1
        if which < 0 and not holding:
            break  # rows waiting on rows that never come (bad data)
        now += dt
        clocks.advance(dt, rates)
        if which >= 0:
            push(holding, (now + sharing.after, clocks.finish(which)))
            continue
        r = pop(holding)[1]
        free += 1
        for c in ri[rp[r] : rp[r + 1]]:
            waiting[c] -= 1
            if not waiting[c]:
                push(ready, (prio[c], c))
    return now


def bounds_estimate(work: float, path: float, k: int) -> float:
    """``max(critical path, work / k)``."""
    return max(path, work / max(k, 1))
