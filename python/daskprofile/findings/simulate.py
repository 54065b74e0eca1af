"""Replays of a recorded graph: its critical path and list scheduling on ``k`` workers.

Both read the dependency edges as a CSR over task rows (``indptr``, ``indices``: row ``i``
waited for rows ``indices[indptr[i]:indptr[i + 1]]``) and one duration per row.

* :func:`critical_path`: the longest chain by duration. Relaxed in whole-array steps
  (one per level of the graph) while the graph is shallow, else one row at a time in
  order of start, which is a topological order of a recorded run.
* :func:`list_schedule`: the makespan of greedy list scheduling on ``k`` identical
  workers, taking ready tasks in the order they were recorded to start (dask's own
  priorities, as the scheduler applied them). :class:`Graph` prepares a graph once for
  the replays (:func:`replay`) of many worker counts, which also say whether a ready row
  ever waited for a worker (if none did, more workers replay the same schedule).
* :func:`shared_schedule`: the same list scheduling where running together slows tasks
  down (:mod:`.contention`): each task's work advances at ``1 / s(c)`` while ``c`` tasks
  do work, ``s`` by the task's class; then a fixed time (the hand-over) holds its worker.
* :func:`bounds_estimate`: ``max(critical path, work / k)``, what very large runs get
  (Graham's bounds: the list schedule lies between it and work / k + critical path).
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Graph",
    "Sharing",
    "bounds_estimate",
    "critical_path",
    "dependents",
    "list_schedule",
    "replay",
    "shared_replay",
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


class Graph:
    """A graph prepared for replays with any number of workers: the dependents of each
    row, how many rows each waits for, and the order in which ready rows are taken
    (``priority``, lowest first; ties by row). Built once, replayed for every count."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, priority: np.ndarray) -> None:
        n = len(indptr) - 1
        self.n = n
        self.prio: list[int] = priority.tolist()
        self.edges = bool(indices.size)
        self.order: list[int] = []  # without edges: the rows in order of priority
        self.after: list[list[int]] = [[]] * n  # the rows that wait for each row
        self.waiting: list[int] = [0] * n  # how many rows each row waits for
        if not self.edges:
            self.order = np.argsort(priority, kind="stable").tolist()
            self.ready = [(p, r) for r, p in enumerate(self.prio)]
        else:
            rev_ptr, rev_idx = dependents(indptr, indices, n)
            rp, ri = rev_ptr.tolist(), rev_idx.tolist()
            self.after = [ri[rp[r] : rp[r + 1]] for r in range(n)]
            self.waiting = np.diff(indptr).tolist()
            self.ready = [(self.prio[r], r) for r in range(n) if not self.waiting[r]]
        heapq.heapify(self.ready)  # the rows ready at the start, by priority


def list_schedule(
    dur: np.ndarray, indptr: np.ndarray, indices: np.ndarray, priority: np.ndarray, k: int
) -> float:
    """Makespan of greedy list scheduling of the rows on ``k`` workers (ties: lowest
    ``priority`` first)."""
    return replay(Graph(indptr, indices, priority), dur.tolist(), k)[0]


def replay(g: Graph, dur: list[float], k: int) -> tuple[float, bool]:
    """(:func:`list_schedule` of ``g`` with durations ``dur``, whether a ready row ever
    waited for a worker). A replay where none waited ran every row as soon as it was ready
    (the critical path's schedule): with more workers it is the very same schedule."""
    if g.n == 0:
        return 0.0, False
    if not g.edges:
        return _independent(g, dur, k)
    waiting = g.waiting.copy()
    after, prio = g.after, g.prio
    ready = g.ready.copy()
    running: list[tuple[float, int]] = []
    now, free, waited = 0.0, k, False
    push, pop = heapq.heappush, heapq.heappop
    while ready or running:
        while free and ready:
            _, r = pop(ready)
            push(running, (now + dur[r], r))
            free -= 1
        if ready:
            waited = True
        if not running:
            break  # rows waiting on rows that never come (bad data)
        now, r = pop(running)
        free += 1
        for c in after[r]:
            waiting[c] -= 1
            if not waiting[c]:
                push(ready, (prio[c], c))
    return now, waited


def _independent(g: Graph, dur: list[float], k: int) -> tuple[float, bool]:
    """:func:`replay` of rows without edges: each row, in order, starts on the worker free
    first, at the time that worker's last row ended (the same additions as the general
    loop, so the same makespan to the last bit)."""
    d = [dur[r] for r in g.order]
    if k < 1:
        return 0.0, True
    if len(d) <= k:
        return max(d), False
    free = d[:k]
    heapq.heapify(free)
    replace = heapq.heapreplace
    for x in d[k:]:
        replace(free, free[0] + x)
    return max(free), True


@dataclass
class Sharing:
    """How rows slow down when they run together: row ``r`` belongs to class ``cls[r]``,
    whose rows take ``s(c) = min(c, 1 + betas[cls[r]] * (c - 1))`` times longer while ``c``
    rows do work at once; after its work a row holds its worker ``after`` s more."""

    cls: np.ndarray
    betas: np.ndarray
    after: float = 0.0


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
    if len(work) == 0:
        return 0.0
    ids, cls = np.unique(sharing.cls, return_inverse=True)
    g = Graph(dag[0], dag[1], priority)
    betas = np.asarray(sharing.betas)[ids]
    return shared_replay(g, work.tolist(), k, cls.tolist(), betas.tolist(), after=sharing.after)[0]


def shared_replay(
    g: Graph, work: list[float], k: int, cls: list[int], betas: list[float], *, after: float
) -> tuple[float, bool]:
    """(:func:`shared_schedule` of ``g``, whether a ready row ever waited for a worker, as
    :func:`replay`); ``cls``: each row's class, ``0 .. len(betas) - 1``.

    One clock of work done per class: every row of a class advances at the same rate at
    any moment, so a heap of the clock readings at which its rows finish suffices. The
    rates are looked up by how many rows do work (at most ``k``), the classes visited in
    order (ties go to the lowest), only those with rows at work.
    """
    n = len(work)
    if n == 0:
        return 0.0, False
    m = len(betas)
    rates = [  # per number of rows at work (at most k, at most n): each class's rate
        [1.0 / min(c, 1.0 + b * (c - 1)) if c else 0.0 for b in betas] for c in range(min(k, n) + 1)
    ]
    clock = [0.0] * m
    heaps: list[list[tuple[float, int]]] = [[] for _ in range(m)]
    waiting, after_of, prio, ready = g.waiting.copy(), g.after, g.prio, g.ready.copy()
    active: list[int] = []  # classes with rows at work, ascending
    holding: list[tuple[float, int]] = []  # (when the worker is free again, row)
    push, pop, insort = heapq.heappush, heapq.heappop, bisect.insort
    inf = float("inf")
    now, free, busy, waited = 0.0, k, 0, False
    while ready or busy or holding:
        while free and ready:
            r = pop(ready)[1]
            c = cls[r]
            heap = heaps[c]
            if not heap:
                insort(active, c)
            push(heap, (clock[c] + work[r], r))
            busy += 1
            free -= 1
        if ready:
            waited = True
        rate = rates[busy]
        if len(active) == 1:  # the common case, without the loop
            which = active[0]
            dt = (heaps[which][0][0] - clock[which]) / rate[which]
        else:
            dt, which = inf, -1
            for c in active:
                t = (heaps[c][0][0] - clock[c]) / rate[c]
                if t < dt:
                    dt, which = t, c
        dt = max(dt, 0.0)
        if holding:
            if holding[0][0] - now <= dt:
                dt, which = holding[0][0] - now, -1
        elif which < 0:
            break  # rows waiting on rows that never come (bad data)
        now += dt
        for c in active:
            clock[c] += dt * rate[c]
        if which >= 0:
            heap = heaps[which]
            push(holding, (now + after, pop(heap)[1]))
            if not heap:
                active.remove(which)
            busy -= 1
            continue
        r = pop(holding)[1]
        free += 1
        for c in after_of[r]:
            waiting[c] -= 1
            if not waiting[c]:
                push(ready, (prio[c], c))
    return now, waited


def bounds_estimate(work: float, path: float, k: int) -> float:
    """``max(critical path, work / k)``."""
    return max(path, work / max(k, 1))
