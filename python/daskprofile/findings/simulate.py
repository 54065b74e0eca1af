"""Replays of a recorded graph: its critical path and list scheduling on ``k`` workers.

Both read the dependency edges as a CSR over task rows (``indptr``, ``indices``: row ``i``
waited for rows ``indices[indptr[i]:indptr[i + 1]]``) and one duration per row.

* :func:`critical_path`: the longest chain by duration. Relaxed in whole-array steps
  (one per level of the graph) while the graph is shallow, else one row at a time in
  order of start, which is a topological order of a recorded run.
* :func:`list_schedule`: the makespan of greedy list scheduling on ``k`` identical
  workers, taking ready tasks in the order they were recorded to start (dask's own
  priorities, as the scheduler applied them).
* :func:`bounds_estimate`: ``max(critical path, work / k)``, what very large runs get
  (Graham's bounds: the list schedule lies between it and work / k + critical path).
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["bounds_estimate", "critical_path", "dependents", "list_schedule"]

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


def bounds_estimate(work: float, path: float, k: int) -> float:
    """``max(critical path, work / k)``."""
    return max(path, work / max(k, 1))
