"""Findings about parallelism: ``critical-path``, ``idle``, ``overhead-bound``, ``what-if``.

All read the task rows and the dependency edges (:mod:`._facts`) and replay them
(:mod:`.simulate`). The per-task overhead is what workers waited between two tasks while
the next one was already ready, on average (dask handing a finished task's result back
and the next one out: two thread wake-ups and the scheduler's bookkeeping), else dask's
documented figure for the scheduler. The mean, not the median: on a busy machine the
typical gap stays ~0.1-0.3 ms while a few wake-ups take 2-20 ms, and those are time the
run lost too (a median under-estimated a 1-thread pool's wall time by 10-16%).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import contention, simulate
from ._facts import DEFAULT_OVERHEAD, Facts
from ._text import finding, pct, secs

__all__ = ["critical", "estimates", "idle", "overhead", "overhead_bound", "what_if_finding"]

#: findings below this share of the wall time are not reported
MIN_SHARE = 0.05
#: what-if replays task by task up to this many tasks, beyond it uses bounds
SIM_MAX = 20_000
#: worker counts of the what-if replay
WORKERS = (1, 2, 4, 8, 16, 32)
#: a group is overhead-bound when overhead is at least this share of its worker time
OVERHEAD_SHARE = 0.25
#: task duration aimed at when suggesting larger chunks (s), at most
TARGET_TASK = 0.1
#: relative slack of the bounds that skip replays: far above the rounding of a replay's
#: sums (~1e-16 per addition, ~1e-12 over 20,000 tasks), far below any figure reported
SLACK = 1e-9


# ------------------------------------------------------------------ shared figures
def overhead(f: Facts) -> float:
    """Per-task overhead (s): the mean gap on a worker before a task that was ready."""
    if "overhead" not in f.extra:
        f.extra["overhead"] = _overhead(f)
    value: float = f.extra["overhead"]
    return value


def _overhead(f: Facts) -> float:
    default = max((DEFAULT_OVERHEAD.get(s, 1e-4) for s in f.schedulers), default=1e-4)
    if f.n < 2:
        return default
    order = np.lexsort((f.start, f.worker))
    w, start, stop = f.worker[order], f.start[order], f.stop[order]
    same = w[1:] == w[:-1]
    gap = start[1:] - stop[:-1]
    was_ready = f.ready()[order][1:] <= stop[:-1] + 1e-9
    gaps = gap[same & was_ready & (gap >= 0)]
    return float(gaps.mean()) if len(gaps) >= 10 else default


def _compute_rows(f: Facts) -> list[np.ndarray]:
    """Row indices of each compute, in order of their first start."""
    if "compute_rows" not in f.extra:
        order = np.lexsort((f.start, f.compute))
        ids = f.compute[order]
        cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        parts = np.split(order, cuts) if len(order) else []
        parts.sort(key=lambda rows: float(f.start[rows[0]]))
        f.extra["compute_rows"] = parts
    rows: list[np.ndarray] = f.extra["compute_rows"]
    return rows


def _sub_graph(f: Facts, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the edges among ``rows``, renumbered 0..len(rows)-1."""
    m = len(rows)
    if not f.has_edges:
        return np.zeros(m + 1, np.int64), np.empty(0, np.int64)
    local = np.full(f.n, -1, np.int64)
    local[rows] = np.arange(m)
    counts = f.indptr[rows + 1] - f.indptr[rows]
    task = np.repeat(np.arange(m), counts)
    starts = np.repeat(f.indptr[rows], counts)
    offset = np.arange(len(task)) - np.repeat(np.cumsum(counts) - counts, counts)
    dep = local[f.indices[starts + offset]]
    keep = dep >= 0
    task, dep = task[keep], dep[keep]
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(task, minlength=m), out=indptr[1:])
    return indptr, dep[np.argsort(task, kind="stable")]


def _finish(f: Facts) -> np.ndarray:
    """Each row's finish on unbounded workers (recorded durations), cached."""
    if "finish" not in f.extra:
        order = np.argsort(f.start, kind="stable")
        if f.has_edges:
            f.extra["finish"] = simulate._finish_times(f.dur, f.indptr, f.indices, order)
        else:
            f.extra["finish"] = f.dur.copy()
    out: np.ndarray = f.extra["finish"]
    return out


def _union(starts: Sequence[float], stops: Sequence[float]) -> float:
    """Length of the union of intervals."""
    total, end = 0.0, -np.inf
    for a, b in sorted(zip(starts, stops, strict=True)):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


# ------------------------------------------------------------------ critical path
def critical(f: Facts) -> list[dict[str, Any]]:
    """``critical-path``: the longest chain against the wall time."""
    if not f.has_edges:
        return []
    length, chain = _chain(f)
    k = max(f.slots(), f.cpus)  # what more workers could spread the work over
    bound = float(f.dur.sum()) / k
    impact = length - bound
    if impact < MIN_SHARE * f.wall or len(chain) < 2:
        return []
    names = _chain_names(f, chain)
    share = length / f.wall
    evidence = {
        "path_s": length,
        "wall_s": f.wall,
        "path_tasks": len(chain),
        "work_s": float(f.dur.sum()),
        "workers": k,
        "groups": names,
    }
    message = (
        f"The longest chain of dependent tasks ({len(chain)} tasks: {_arrow(names)}) takes "
        f"{secs(length)}, {pct(share)} of the wall time {secs(f.wall)}; the work spread "
        f"over {k} workers would take {secs(bound)}."
    )
    if share >= 0.5:
        message += " More workers will not make it faster."
    suggestion = (
        "Shorten the tasks on the chain (they run one after another) or cut the chain: "
        "combine results with a tree reduction instead of a sequential fold, split long "
        "tasks into independent pieces."
    )
    row = finding("critical-path", _arrow(names), impact, f.wall, evidence, message, suggestion,
                  groups=_chain_groups(f, chain), rows=chain)  # fmt: skip
    return [row]


def _chain(f: Facts) -> tuple[float, list[int]]:
    """(length, rows) of the longest chain of one compute (the longest)."""
    finish = _finish(f)
    end = int(np.argmax(finish))
    chain = simulate._backtrack(end, finish, f.dur, f.indptr, f.indices)
    return float(finish[end]), chain


def _chain_names(f: Facts, chain: list[int]) -> list[str]:
    """The chain's groups in order, runs collapsed: ``["load", "inc (20)", "sum"]``."""
    out: list[tuple[str, int]] = []
    for row in chain:
        name = f.groups[int(f.group[row])]
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1] + 1)
        else:
            out.append((name, 1))
    return [name if n == 1 else f"{name} ({n})" for name, n in out]


def _chain_groups(f: Facts, chain: list[int]) -> list[str]:
    """The distinct groups of the chain's tasks, in the order the chain meets them."""
    return list(dict.fromkeys(f.groups[int(f.group[row])] for row in chain))


def _arrow(names: list[str], most: int = 5) -> str:
    shown = names if len(names) <= most else [*names[: most - 1], "...", names[-1]]
    return " -> ".join(shown)


# ------------------------------------------------------------------ idle
def idle(f: Facts) -> list[dict[str, Any]]:
    """``idle``: worker time idle while tasks were ready vs with nothing ready."""
    if f.n == 0:
        return []
    ready = f.ready()
    waiting = starved = 0.0
    capacity = 0.0
    for rows in _compute_rows(f):
        k = f.slots() if f.is_cluster else max(1, len(np.unique(f.worker[rows])))
        w, s, span = _idle_split(ready[rows], f.start[rows], f.stop[rows], k)
        waiting, starved, capacity = waiting + w / k, starved + s / k, capacity + span
    out = []
    evidence = {
        "ready_idle_s": waiting,
        "nothing_ready_s": starved,
        "task_span_s": capacity,
        "ready_idle_share": waiting / f.wall,
        "nothing_ready_share": starved / f.wall,
    }
    if waiting >= MIN_SHARE * f.wall:
        message = (
            f"Workers sat idle for {secs(waiting)} ({pct(waiting / f.wall)} of the wall time) "
            f"while tasks were ready to run; {secs(starved)} ({pct(starved / f.wall)}) with "
            "nothing ready."
        )
        suggestion = (
            "The scheduler could not hand tasks out fast enough: make tasks larger (fewer, "
            "longer tasks) or use a scheduler with less per-task cost."
        )
        out.append(finding("idle", "scheduling", waiting, f.wall, evidence, message, suggestion))
    if starved >= MIN_SHARE * f.wall:
        message = (
            f"Workers sat idle for {secs(starved)} ({pct(starved / f.wall)} of the wall time) "
            f"with no task ready: not enough parallelism; {secs(waiting)} "
            f"({pct(waiting / f.wall)}) with tasks ready."
        )
        suggestion = (
            "Give the workers more independent tasks: smaller chunks along the chained "
            "dimension, more partitions, or compute several results in one dask.compute call."
        )
        out.append(finding("idle", "parallelism", starved, f.wall, evidence, message, suggestion))
    return out


def _idle_split(
    ready: np.ndarray, start: np.ndarray, stop: np.ndarray, k: int
) -> tuple[float, float, float]:
    """(worker-s idle with tasks ready, worker-s idle with none ready, span) over the
    tasks' span on ``k`` workers."""
    lo = float(start.min())
    ready = np.clip(ready, lo, start)
    times = np.concatenate([ready, start, start, stop])
    n = len(start)
    d_ready = np.concatenate([np.ones(n), -np.ones(n), np.zeros(2 * n)])
    d_run = np.concatenate([np.zeros(n), np.zeros(n), np.ones(n), -np.ones(n)])
    order = np.argsort(times, kind="stable")
    t = times[order]
    ready_n = np.cumsum(d_ready[order])[:-1]
    running = np.cumsum(d_run[order])[:-1]
    seg = np.diff(t)
    free = np.clip(k - running, 0, None)
    busy_ready = np.minimum(free, np.clip(ready_n, 0, None))
    return float(seg @ busy_ready), float(seg @ (free - busy_ready)), float(t[-1] - t[0])


# ------------------------------------------------------------------ overhead-bound
def overhead_bound(f: Facts) -> list[dict[str, Any]]:
    """``overhead-bound``: groups whose tasks are so short that overhead dominates."""
    if f.n == 0:
        return []
    o = overhead(f)
    k = f.slots()
    dur = f.dur
    out = []
    counts = np.bincount(f.group, minlength=len(f.groups))
    total = np.bincount(f.group, weights=dur, minlength=len(f.groups))
    for g in np.flatnonzero(counts).tolist():
        n = int(counts[g])
        spent = n * o
        share = spent / (spent + total[g]) if spent + total[g] > 0 else 0.0
        if share < OVERHEAD_SHARE or n < 10:
            continue
        median = float(np.median(dur[f.group == g]))
        target = min(TARGET_TASK, max(100 * o, 10 * median, 1e-3))
        factor = max(2, int(np.ceil(target / max(median, 1e-7))))
        factor = min(factor, n)
        impact = spent * (1 - 1 / factor) / k if not _serial(f) else spent * (1 - 1 / factor)
        if impact < MIN_SHARE * f.wall:
            continue
        name = f.groups[g]
        evidence = {
            "tasks": n,
            "median_task_s": median,
            "overhead_per_task_s": o,
            "overhead_share": share,
            "chunk_factor": factor,
        }
        message = (
            f"{n:,} tasks of {name!r} last {secs(median)} each (median) while each task costs "
            f"about {secs(o)} of scheduling: overhead is {pct(share)} of their time."
        )
        suggestion = (
            f"Make each task about {factor}x larger (tasks of ~{secs(median * factor)}, "
            f"{n:,} -> ~{max(1, n // factor):,} tasks): larger chunks (dask.array "
            "chunks=/rechunk, more rows per partition, batching calls per delayed task)."
        )
        out.append(
            finding(
                "overhead-bound", name, impact, f.wall, evidence, message, suggestion, groups=[name]
            )
        )
    return out


def _serial(f: Facts) -> bool:
    """Whether one thread schedules every task (dask's local schedulers)."""
    return not f.is_cluster


# ------------------------------------------------------------------ what-if
def estimates(f: Facts, workers: Sequence[int]) -> tuple[list[float], str]:
    """Estimated wall time with each number of workers, and the method used.

    Replayed task by task (up to :data:`SIM_MAX` tasks), each task lasts its recorded
    duration plus the per-task :func:`overhead`; where the run measured that a group's tasks
    slow down while others run (:mod:`.contention`), its tasks last their time alone,
    stretched by as many tasks as run at once in the replay. Beyond, Graham's bounds.
    """
    replays = _Replays(f)
    return [replays.estimate(k) for k in workers], replays.method


class _Replays:
    """The replays of a run's computes on any numbers of workers (:class:`_Compute`), the
    estimates they sum to, and bounds of those not replayed."""

    def __init__(self, f: Facts) -> None:
        self.f = f
        rows = _compute_rows(f)
        self.rows = rows
        self.outside = max(
            0.0,
            f.wall
            - _union([float(f.start[r].min()) for r in rows],
                     [float(f.stop[r].max()) for r in rows]),
        )  # fmt: skip
        self.method = "simulated" if f.n <= SIM_MAX else "bounds"
        self.computes: list[_Compute] = []
        if self.method == "simulated":
            after = overhead(f)
            betas = contention.betas(f)
            # what a task takes at full speed: its work alone (then the hand-over), where
            # the run measured a slowdown, else its recorded duration and the hand-over
            time = contention.work(f) if betas.any() else f.dur + after
            self.computes = [_Compute(f, r, time, betas, after) for r in rows]

    def estimate(self, k: int) -> float:
        """The estimated wall time on ``k`` workers."""
        if self.method == "bounds":
            dur = self.f.dur + overhead(self.f)
            finish = _finish(self.f)
            return self.outside + sum(
                simulate.bounds_estimate(float(dur[r].sum()), float(finish[r].max()), k)
                for r in self.rows
            )
        return self.outside + sum(c.replay(k) for c in self.computes)

    def known(self, k: int) -> bool:
        """Whether :meth:`estimate` of ``k`` needs no replay."""
        return all(c.value(k) is not None for c in self.computes)

    @property
    def bounded(self) -> bool:
        """Whether :meth:`lower` and :meth:`upper` bound :meth:`estimate`."""
        return self.method == "simulated" and all(c.topological for c in self.computes)

    def lower(self, k: int) -> float:
        """At most :meth:`estimate` of ``k`` (up to rounding; needs :attr:`bounded`)."""
        return self.outside + sum(c.lower(k) for c in self.computes)

    def upper(self, k: int) -> float:
        """At least :meth:`estimate` of ``k`` (up to rounding; needs :attr:`bounded`)."""
        return self.outside + sum(c.upper(k) for c in self.computes)


class _Compute:
    """One compute's graph, replayed on any numbers of workers (each at most once), and
    bounds of the replays not done.

    A replay on ``k`` workers that never left a ready task waiting for a worker ran every
    task as soon as it was ready: on more workers it is the very same schedule, to the last
    bit (not replayed again).

    Bounds, with ``hold`` the time each task holds its worker at least (its work at full
    speed, then the hand-over): on ``k`` workers the replay takes at least the longest
    chain of ``hold``, ``sum(hold) / k`` and, where tasks slow down, ``sum_g work_g *
    s_g(k) / k`` (a group's tasks progress at ``m_g / s_g(m)`` among ``m <= k`` at work,
    and ``s(m) / m`` only falls as ``m`` grows: at any moment ``sum_g rate_g * s_g(k) / k``
    is at most 1); at most ``sum(hold') / k`` plus the longest chain of ``hold'``
    (Graham: a greedy schedule leaves a worker free only while no task is ready, so while
    a task of some chain runs), ``hold'`` stretching each task by its slowdown among
    ``k``. The chains are exact only over a topological order: where the start order is
    none (bad data), :attr:`topological` is false and the bounds are not used.
    """

    def __init__(
        self, f: Facts, rows: np.ndarray, time: np.ndarray, betas: np.ndarray, after: float
    ) -> None:
        self.indptr, self.indices = _sub_graph(f, rows)
        self.order = np.argsort(f.start[rows], kind="stable")  # ready ones go in this order
        self.time = time[rows]
        self.after = after
        self.shared = bool(betas.any())
        ids, cls = np.unique(f.group[rows], return_inverse=True)
        self.cls, self.betas = cls.astype(np.int64), betas[ids]  # classes 0.. in order
        self.done: dict[int, float] = {}
        self.unbounded: int | None = None  # the fewest workers on which none waited
        self._graph: tuple[simulate.Graph, list[float], list[int], list[float]] | None = None
        self._chains: dict[int, tuple[float, float]] = {}

    def value(self, k: int) -> float | None:
        """The replay on ``k`` workers if known without replaying."""
        if k in self.done:
            return self.done[k]
        if self.unbounded is not None and k > self.unbounded:
            return self.done[self.unbounded]
        return None

    def replay(self, k: int) -> float:
        """Makespan of the replay on ``k`` workers."""
        value = self.value(k)
        if value is not None:
            return value
        if self._graph is None:  # prepared once for every count
            priority = np.empty(len(self.order), np.int64)
            priority[self.order] = np.arange(len(self.order))
            g = simulate.Graph(self.indptr, self.indices, priority)
            self._graph = (g, self.time.tolist(), self.cls.tolist(), self.betas.tolist())
        g, time, cls, betas = self._graph
        if self.shared:
            value, waited = simulate.shared_replay(g, time, k, cls, betas, after=self.after)
        else:
            value, waited = simulate.replay(g, time, k)
        self.done[k] = value
        if not waited and (self.unbounded is None or k < self.unbounded):
            self.unbounded = k
        return value

    @property
    def topological(self) -> bool:
        """Whether every task started after the tasks it waited for (in start order)."""
        if not self.indices.size:
            return True
        position = np.empty(len(self.order), np.int64)
        position[self.order] = np.arange(len(self.order))
        task = np.repeat(np.arange(len(self.order)), np.diff(self.indptr))
        return bool((position[self.indices] < position[task]).all())

    def lower(self, k: int) -> float:
        """At most the replay on ``k`` workers."""
        value = self.value(k)
        if value is not None:
            return value
        hold, chain = self._chain(1)
        if not self.shared:
            return max(chain, hold / k)
        work = np.bincount(self.cls, weights=self.time, minlength=len(self.betas))
        slow = float(work @ contention.slowdown(self.betas, k)) / k
        return max(chain, hold / k, slow)

    def upper(self, k: int) -> float:
        """At least the replay on ``k`` workers."""
        value = self.value(k)
        if value is not None:
            return value
        hold, chain = self._chain(k if self.shared else 1)
        return hold / k + chain

    def _chain(self, k: int) -> tuple[float, float]:
        """(sum, longest chain) of the times the tasks hold their workers: at full speed
        (``k`` 1: at least), or slowed down as among ``k`` at work (at most)."""
        if k not in self._chains:
            hold = self.time + self.after if self.shared else self.time
            if self.shared and k > 1:
                hold = self.time * contention.slowdown(self.betas, k)[self.cls] + self.after
            if not self.indices.size:
                chain = float(hold.max(initial=0.0))
            else:
                finish = simulate._finish_times(hold, self.indptr, self.indices, self.order)
                chain = float(finish.max())
            self._chains[k] = (float(hold.sum()), chain)
        return self._chains[k]


def what_if_table(f: Facts, workers: Sequence[int]) -> dict[str, list[Any]]:
    """Columns of :func:`daskprofile.findings.what_if`."""
    est, method = estimates(f, workers)
    return {
        "workers": list(workers),
        "wall_time": est,
        "speedup": [f.wall / e if e > 0 else float("nan") for e in est],
        "method": [method] * len(est),
    }


def what_if_finding(f: Facts) -> list[dict[str, Any]]:
    """``what-if``: how much more workers would save, by replaying the graph.

    The estimates of :data:`WORKERS` and the recorded count ``k``: the first smallest is
    reported when it is above ``k`` and saves ``2 * MIN_SHARE`` of the wall time against
    ``k``'s. Only the estimates that decide it are replayed (:func:`_smallest`); the
    evidence lists those.
    """
    if f.n < 2:
        return []
    k = f.slots()
    counts = sorted({*WORKERS, k})
    replays = _Replays(f)
    found = _smallest(replays, counts, k)
    if found is None:
        return []
    est, best = found
    base = est[k]
    if base <= 0 or counts[best] <= k:
        return []
    gain = f.wall * (1 - est[counts[best]] / base)
    if gain < 2 * MIN_SHARE * f.wall:
        return []
    shown = sorted(est)
    evidence = {
        "workers": shown,
        "estimate_s": [est[c] for c in shown],
        "recorded_workers": k,
        "method": replays.method,
    }
    message = (
        f"Replayed on {counts[best]} workers instead of {k}, the recorded graph would take "
        f"about {secs(f.wall - gain)} instead of {secs(f.wall)} ({replays.method})."
    )
    suggestion = (
        f"More workers pay off: e.g. num_workers={counts[best]} or a cluster with "
        f"{counts[best]} threads in all; beyond that the estimate stops improving."
    )
    return [finding("what-if", "workers", gain, f.wall, evidence, message, suggestion)]


def _smallest(r: _Replays, counts: list[int], k: int) -> tuple[dict[int, float], int] | None:
    """The estimates the what-if finding needs, and the index in ``counts`` of the first
    smallest estimate of all ``counts``; None when no count above ``k`` can be reported.

    The same answer as replaying every count: the estimate of ``k`` (the finding's
    reference) and of the largest count (where the smallest usually is) are replayed, then
    each other count whose lower bound is not above the smallest so far (anything more
    cannot be the first smallest). No replay at all when even the lower bound of the
    counts above ``k`` cannot save the share against the upper bound of ``k``'s: the
    finding's test only grows with that estimate and shrinks with ``k``'s.

    Not a stop where the estimate stops improving (by < 1%, say): a list schedule can
    still improve a little further on (and, Graham's anomalies, fewer workers can be
    faster), so the count reported and its saving could change. The bounds skip as much
    on the runs measured, and leave the finding as every replay gives it.
    """
    least = 2 * MIN_SHARE * r.f.wall

    def saves(estimate: float, base: float) -> bool:  # the finding's own test
        return r.f.wall * (1 - estimate / base) >= least

    above = [c for c in counts if c > k]
    if not above:
        return None
    bounded = r.bounded
    if bounded:
        upper = r.upper(k) * (1 + SLACK)
        lowest = min(r.lower(c) for c in above) * (1 - SLACK)
        if upper > 0 and not saves(lowest, upper):
            return None
    base = r.estimate(k)
    if base <= 0:
        return None
    if bounded and not saves(min(r.lower(c) for c in above) * (1 - SLACK), base):
        return None
    est = {k: base}
    best, at = base, counts.index(k)
    for c in [above[-1], *(c for c in counts if c != k and c != above[-1])]:
        if bounded and not r.known(c) and r.lower(c) * (1 - SLACK) > best:
            continue
        e = est[c] = r.estimate(c)
        i = counts.index(c)
        if e < best or (e == best and i < at):
            best, at = e, i
    return est, at
