"""How much a group's tasks slowed down while other tasks ran, measured in the run.

Tasks that share a machine share its cores, caches and memory bandwidth: two numpy sorts
at once on a 2-vCPU machine take from one to two sorts' time, depending on the moment and
on what else runs there. A duration recorded while another task ran then says little of
the same task alone: replayed on 1 worker, a run recorded on 2 came out up to 2x too long.

Measured, not assumed. Each task's time is split by how many tasks were running at once
(``c``, itself included). A task among ``c`` is taken to progress at ``1 / s(c)`` of its
speed alone, ``s(c) = min(c, 1 + beta * (c - 1))``: ``beta = 0`` is no slowdown, ``beta =
1`` is tasks that take turns (running together gains nothing). Per group, the tasks that
ran alone (at least :data:`ALONE_SHARE` of their time) give one task's work ``W``, their
median, when there are at least :data:`MIN_ALONE` of them and they agree within
:data:`MAX_SPREAD` (the sign that the group's tasks do about equal work). ``beta`` is then
the value for which the median task among those that overlapped (at least
:data:`OVERLAP_SHARE` of their time) did that work: ``sum_c T_i(c) / s(c) = W``. Medians, not
sums: one task held up by something else (a page fault storm, another process) moves a sum
but not a median.

The line ``1 + beta * (c - 1)`` is measured where the run had tasks running together (two
of them on 2 workers); for more tasks at once than the run had, it is extrapolated: a group
whose tasks took turns on 2 workers gains nothing from 8 in the replay either.

What it cannot see: a run on one worker has no overlap, so its groups keep ``beta = 0`` and
its replay on more workers assumes no slowdown (nothing in such a run measures it); a group
whose tasks all overlapped (no alone tasks) keeps ``beta = 0`` too. On a cluster, tasks on
other workers share no core and where each worker ran is not in the run: no slowdown there.
"""

from __future__ import annotations

import numpy as np

from ._facts import Facts

__all__ = ["betas", "levels", "slowdown", "solve", "work"]

#: a task ran alone when no other task ran for at least this share of its time
ALONE_SHARE = 0.9
#: a task overlapped when another task ran for at least this share of its time
OVERLAP_SHARE = 0.5
#: alone tasks (and overlapped tasks) a group needs before its slowdown is measured
MIN_ALONE = 3
#: the alone tasks' median absolute deviation, as a share of their median, at most
MAX_SPREAD = 0.2
#: below this, beta is noise: no slowdown
MIN_BETA = 0.05


def slowdown(beta: float | np.ndarray, c: np.ndarray | int) -> np.ndarray:
    """``s(c)``: how many times longer a task takes among ``c`` running tasks."""
    c = np.maximum(np.asarray(c, dtype=np.float64), 1.0)
    out: np.ndarray = np.minimum(c, 1.0 + np.asarray(beta) * (c - 1.0))
    return out


def levels(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """``T[i, c - 1]``: the time task ``i`` spent while ``c`` tasks ran (itself included)."""
    n = len(start)
    if n == 0:
        return np.zeros((0, 1))
    t, count = _sweep(start, stop)
    top = max(1, int(count.max(initial=1)))
    out = np.zeros((n, top))
    for c in range(1, top + 1):
        out[:, c - 1] = _level(start, stop, t, count, c)
    return out


def _sweep(start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the starts and stops in order, how many tasks ran after each but the last)."""
    n = len(start)
    times = np.concatenate([start, stop])
    step = np.concatenate([np.ones(n), -np.ones(n)])
    order = np.lexsort((step, times))  # at equal times, stops before starts
    return times[order], np.cumsum(step[order])[:-1]


def _level(
    start: np.ndarray, stop: np.ndarray, t: np.ndarray, count: np.ndarray, c: int
) -> np.ndarray:
    """Column ``c - 1`` of :func:`levels`, from :func:`_sweep`."""
    cum = np.concatenate([[0.0], np.cumsum(np.diff(t) * (count == c))])
    out: np.ndarray = np.interp(stop, t, cum) - np.interp(start, t, cum)
    return out


def betas(f: Facts) -> np.ndarray:
    """``beta`` of each group (0 where nothing measures it), cached."""
    if "betas" not in f.extra:
        f.extra["betas"] = _betas(f)
    out: np.ndarray = f.extra["betas"]
    return out


def work(f: Facts) -> np.ndarray:
    """Each task's time had it run alone: ``sum_c T(c) / s(c)`` with its group's beta,
    cached."""
    if "work" not in f.extra:
        b = betas(f)
        t = _levels(f) if b.any() else None
        if t is None:
            f.extra["work"] = f.dur
        else:
            c = np.arange(1, t.shape[1] + 1)
            f.extra["work"] = (t / slowdown(b[f.group][:, None], c[None, :])).sum(axis=1)
    out: np.ndarray = f.extra["work"]
    return out


def _levels(f: Facts) -> np.ndarray:
    if "levels" not in f.extra:
        f.extra["levels"] = levels(f.start, f.stop)
    out: np.ndarray = f.extra["levels"]
    return out


def _betas(f: Facts) -> np.ndarray:
    """Per group; :func:`levels` in full only once a group has enough alone and overlapped
    tasks of one size (most runs measure nothing, and pay for the time alone only)."""
    out = np.zeros(len(f.groups))
    if f.is_cluster or f.n < 2 * MIN_ALONE:
        return out
    t, count = _sweep(f.start, f.stop)
    if count.max(initial=1) < 2:
        return out
    by_itself = _level(f.start, f.stop, t, count, 1)
    dur = np.maximum(f.dur, 1e-12)
    alone = by_itself >= ALONE_SHARE * dur
    overlapped = by_itself <= (1 - OVERLAP_SHARE) * dur
    both = np.minimum(
        np.bincount(f.group[alone], minlength=len(f.groups)),
        np.bincount(f.group[overlapped], minlength=len(f.groups)),
    )
    for g in np.flatnonzero(both >= MIN_ALONE).tolist():
        rows = f.group == g
        one = f.dur[alone & rows]
        w = float(np.median(one))
        if w <= 0 or float(np.median(np.abs(one - w))) > MAX_SPREAD * w:
            continue
        beta = solve(_levels(f)[overlapped & rows], w)
        out[g] = beta if beta >= MIN_BETA else 0.0
    return out


def solve(t: np.ndarray, w: float, steps: int = 50) -> float:
    """The ``beta`` in [0, 1] for which the median row of ``t`` (time per concurrency
    level) comes to ``w`` of work alone; 0 when it took no longer than that, 1 when even
    tasks taking turns would not explain its time."""
    c = np.arange(1, t.shape[1] + 1)

    def alone(beta: float) -> float:
        return float(np.median((t / slowdown(beta, c)[None, :]).sum(axis=1)))

    if alone(0.0) <= w:
        return 0.0
    if alone(1.0) >= w:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if alone(mid) > w else (lo, mid)
    return (lo + hi) / 2
