"""The what-if replay where tasks slow each other down: the slowdown measured per group
(:mod:`daskprofile.findings.contention`) and the replay that stretches tasks by the
concurrency it simulates (:func:`daskprofile.findings.simulate.shared_schedule`)."""

from __future__ import annotations

import heapq
import threading
import time
from typing import Any

import dask
import numpy as np
import pytest
from dask import delayed

import daskprofile
from daskprofile import profile
from daskprofile.collectors.graph import empty_computes
from daskprofile.findings import _facts, contention, parallel, simulate


def no_edges(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n + 1, np.int64), np.empty(0, np.int64)


def recorded(start: list[float], stop: list[float], worker: list[int], names: list[str],
             group: list[int]) -> daskprofile.Run:  # fmt: skip
    """A finished threads run of the given task rows, without edges, one compute."""
    n = len(start)
    t1 = max(stop) + 0.001
    tasks = {
        "key": [""] * n,
        "group": np.asarray(group, np.uint32),
        "worker": np.asarray(worker, np.uint16),
        "submit": np.zeros(n),
        "start": np.asarray(start, np.float64),
        "stop": np.asarray(stop, np.float64),
        "error": np.zeros(n, np.uint16),
        "compute": np.ones(n, np.uint32),
        "span": np.zeros(n, np.uint16),
        "groups": names,
        "workers": [f"thread {i}" for i in range(max(worker) + 1)],
        "error_types": [None],
        "spans": [None],
        "dropped": 0,
    }
    computes = empty_computes() | {
        "id": np.array([1]), "call": np.array([0.0]), "submit": np.array([0.0]),
        "end": np.array([t1]), "scheduler": ["threads"], "idle": np.array([np.nan]),
        "cpus": 2, "memory_total": 1 << 30,
    }  # fmt: skip
    data = {
        "tasks": tasks,
        "edges": {"indptr": np.zeros(0, np.int64), "indices": np.zeros(0, np.int32)},
        "computes": computes,
        "resources": {"time": np.zeros(0), "cpu": np.zeros(0), "memory": np.zeros(0, np.int64),
                      "processes": np.zeros(0, np.int32)},
    }  # fmt: skip
    meta = {"t0": 0.0, "t1": t1, "finished": True, "schedulers": ["threads"], "computes": 1}
    return daskprofile.Run(meta, data)


def turns_run(alone: tuple[float, ...] = (0.01,) * 4, pairs: int = 4, w: float = 0.01
              ) -> daskprofile.Run:  # fmt: skip
    """Tasks lasting ``alone`` one after another, then ``pairs`` pairs started together on
    two threads that each took ``2 w``: two tasks at once took turns (beta 1)."""
    ends = np.cumsum(alone).tolist()
    start, stop = [e - a for e, a in zip(ends, alone, strict=True)], ends
    t = ends[-1] if ends else 0.0
    start += [t + (i // 2) * 2 * w for i in range(2 * pairs)]
    stop += [s + 2 * w for s in start[len(alone) :]]
    worker = [0] * len(alone) + [i % 2 for i in range(2 * pairs)]
    return recorded(start, stop, worker, ["work"], [0] * len(start))


def test_levels_split_each_task_by_how_many_ran_at_once() -> None:
    # a: 0-4, b: 1-3, c: 2-6  -> 1 task: 0-1, 4-6; 2 tasks: 1-2, 3-4; 3 tasks: 2-3
    t = contention.levels(np.array([0.0, 1.0, 2.0]), np.array([4.0, 3.0, 6.0]))
    assert t.shape == (3, 3)
    assert t.tolist() == [[1.0, 2.0, 1.0], [0.0, 1.0, 1.0], [2.0, 1.0, 1.0]]
    assert np.allclose(t.sum(axis=1), [4.0, 2.0, 4.0])


def test_solve_finds_the_slowdown_that_explains_the_recorded_time() -> None:
    # tasks of work 1 spent 1.5 s beside one other task: s(2) = 1.5, beta 0.5; one held up
    # for 9 s does not move the median
    t = np.column_stack([np.zeros(10), np.full(10, 1.5)])
    t[3, 1] = 9.0
    assert contention.solve(t, 1.0) == pytest.approx(0.5, abs=1e-9)
    assert contention.solve(t, 2.0) == 0.0  # took no longer than alone: no slowdown
    assert contention.solve(t, 0.5) == 1.0  # more than taking turns explains: capped
    mixed = np.array([[0.5, 1.0], [0.5, 1.0], [0.5, 1.0]])  # half alone: work 0.5 + 1 / s
    assert contention.solve(mixed, 1.0) == pytest.approx(1.0, abs=1e-9)


def test_shared_schedule_stretches_tasks_by_the_concurrency_it_simulates() -> None:
    work, prio = np.ones(2), np.arange(2)

    def makespan(beta: float, k: int, after: float = 0.0) -> float:
        sharing = simulate.Sharing(np.zeros(2, np.int64), np.array([beta]), after)
        return simulate.shared_schedule(work, no_edges(2), prio, k, sharing)

    assert makespan(0.0, 2) == pytest.approx(1.0)
    assert makespan(0.5, 2) == pytest.approx(1.5)
    assert makespan(1.0, 2) == pytest.approx(2.0)  # taking turns: no gain from 2 workers
    assert makespan(1.0, 1) == pytest.approx(2.0)
    assert makespan(0.0, 1, after=0.25) == pytest.approx(2.5)


def test_shared_schedule_without_slowdown_is_the_list_schedule() -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        task = [i for i in range(1, n) for _ in range(int(rng.integers(0, 3)))]
        dep = [int(rng.integers(0, i)) for i in task]
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(np.asarray(task, np.int64), minlength=n), out=indptr[1:])
        indices = np.asarray(dep, np.int64)[np.argsort(np.asarray(task), kind="stable")]
        dur, prio = rng.uniform(0, 1, n), rng.permutation(n)
        k, after = int(rng.integers(1, 4)), float(rng.uniform(0, 0.1))
        sharing = simulate.Sharing(np.zeros(n, np.int64), np.zeros(1), after)
        assert simulate.shared_schedule(dur, (indptr, indices), prio, k, sharing) == (
            pytest.approx(simulate.list_schedule(dur + after, indptr, indices, prio, k))
        )


def test_a_run_whose_tasks_took_turns_replays_them_alone_at_their_alone_time() -> None:
    run = turns_run()
    f = _facts.facts(run)
    assert contention.betas(f).tolist() == pytest.approx([1.0])
    assert contention.work(f) == pytest.approx(np.full(12, 0.01))
    one, two = run.what_if([1, 2]).wall_time
    o = parallel.overhead(f)  # per-task hand-over (too few gaps here: dask's figure)
    assert one == pytest.approx(0.12 + 12 * o + 0.001, abs=1e-9)  # 12 tasks of 10 ms alone
    assert 0.12 + 0.001 < two <= one  # two workers gain nothing from tasks taking turns
    old_one = float(f.dur.sum()) + 12 * o + 0.001  # recorded durations back to back
    assert old_one - one == pytest.approx(0.08, abs=1e-9)


def test_no_slowdown_is_measured_without_enough_alone_tasks_or_when_they_disagree() -> None:
    assert not contention.betas(_facts.facts(turns_run(alone=(0.01, 0.01)))).any()
    # alone tasks of 10, 20, 10, 30 ms: not one size, so their median is no task's work
    uneven = turns_run(alone=(0.01, 0.02, 0.01, 0.03))
    assert not contention.betas(_facts.facts(uneven)).any()
    (one,) = uneven.what_if([1]).wall_time
    o = parallel.overhead(_facts.facts(uneven))
    assert one == pytest.approx(0.07 + 8 * 0.02 + 12 * o + 0.001, abs=1e-9)  # as recorded


def test_a_lock_shared_by_the_tasks_is_measured_on_a_real_threads_run() -> None:
    """Tasks that do their work under one lock take turns on two threads: the run measures
    it (four of them ran alone first) and replays them on one thread at their time alone;
    the same tasks without the lock (sleeps side by side) show little slowdown: none on a
    quiet machine, up to 0.22 seen in 1 run of 60 on this loaded one (overlapped sleeps wake
    later when the other thread competes for the same free core: a measured slowdown)."""
    lock = threading.Lock()

    def work(x: int, shared: bool) -> int:
        if shared:
            with lock:
                time.sleep(0.02)
        else:
            time.sleep(0.02)
        return x

    def record(shared: bool) -> daskprofile.Run:
        with profile() as run:
            x = delayed(work, name="work")(0, shared)
            for _ in range(3):
                x = delayed(work)(x, shared)
            x.compute(scheduler="threads", num_workers=2)  # a chain: one at a time
            tasks = [delayed(work)(i, shared) for i in range(8)]
            dask.compute(*tasks, scheduler="threads", num_workers=2)
        return run

    taking_turns = _facts.facts(record(shared=True))
    print(
        contention.betas(taking_turns), taking_turns.dur.sum(), contention.work(taking_turns).sum()
    )
    assert taking_turns.groups == ["work"]
    (beta,) = contention.betas(taking_turns)
    assert beta >= 0.7
    recorded_time = float(taking_turns.dur.sum())
    alone_time = float(contention.work(taking_turns).sum())
    assert alone_time < 0.8 * recorded_time
    assert alone_time >= 12 * 0.02 * 0.95  # never less than the sleeps themselves
    side_by_side = _facts.facts(record(shared=False))
    assert contention.betas(side_by_side).max() < 0.5


# ------------------------------------------------------------------ replays skipped
def reference_list_schedule(dur: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                            priority: np.ndarray, k: int) -> float:  # fmt: skip
    """The list schedule as first written (one loop, the dependents found per call): the
    prepared and the edgeless replays must give its makespan to the last bit."""
    n = len(dur)
    rev_ptr, rev_idx = simulate.dependents(indptr, indices, n)
    waiting = np.diff(indptr).tolist()
    rp, ri, d, prio = rev_ptr.tolist(), rev_idx.tolist(), dur.tolist(), priority.tolist()
    ready = [(prio[r], r) for r in range(n) if not waiting[r]]
    heapq.heapify(ready)
    running: list[tuple[float, int]] = []
    now, free = 0.0, k
    while ready or running:
        while free and ready:
            _, r = heapq.heappop(ready)
            heapq.heappush(running, (now + d[r], r))
            free -= 1
        now, r = heapq.heappop(running)
        free += 1
        for c in ri[rp[r] : rp[r + 1]]:
            waiting[c] -= 1
            if not waiting[c]:
                heapq.heappush(ready, (prio[c], c))
    return now


def random_dag(rng: np.random.Generator, n: int, width: float) -> tuple[np.ndarray, np.ndarray]:
    """A CSR of ``n`` rows, each waiting for up to 3 of the 30 rows before it, or for none
    (chance ``width``)."""
    deps = [[] if i == 0 or rng.random() < width else
            sorted(set(rng.integers(max(0, i - 30), i, int(rng.integers(1, 4))).tolist()))
            for i in range(n)]  # fmt: skip
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum([len(d) for d in deps], out=indptr[1:])
    return indptr, np.asarray([j for d in deps for j in d], np.int64)


def test_replays_match_the_first_list_schedule_and_stop_changing_once_none_waited() -> None:
    rng = np.random.default_rng(11)
    for trial in range(60):
        n = int(rng.integers(1, 120))
        indptr, indices = random_dag(rng, n, width=1.0 if trial % 3 == 0 else 0.3)
        dur = rng.exponential(0.01, n) * (rng.random(n) < 0.9)  # some of 0 s: ties
        prio = rng.permutation(n)
        g = simulate.Graph(indptr, indices, prio)
        cls = rng.integers(0, 2, n).tolist()
        betas = rng.uniform(0, 1, 2).tolist()
        unbounded = shared_unbounded = None  # the makespans where first no task waited
        for k in (1, 2, 3, 5, 8, 200):
            ref = reference_list_schedule(dur, indptr, indices, prio, k)
            assert simulate.list_schedule(dur, indptr, indices, prio, k) == ref
            makespan, waited = simulate.replay(g, dur.tolist(), k)
            assert makespan == ref
            if unbounded is not None:
                assert makespan == unbounded
            elif not waited:
                unbounded = makespan
            shared, waited = simulate.shared_replay(g, dur.tolist(), k, cls, betas, after=1e-3)
            if shared_unbounded is not None:
                assert shared == shared_unbounded
            elif not waited:
                shared_unbounded = shared
        assert unbounded is not None  # 200 workers: no task waits
        assert shared_unbounded is not None


def graph_run(rng: np.random.Generator, threads: int, computes: int, alone: int,
              slow: float, between: float) -> daskprofile.Run:  # fmt: skip
    """A finished threads run of ``computes`` random graphs (20-200 tasks, 3 groups), as a
    greedy schedule on ``threads`` would have recorded them: ``alone`` tasks of group 0
    one after another first (that the others wait for), group 0's tasks ``1 + slow * (c -
    1)`` times longer when started among ``c`` (a slowdown the run measures), up to 0.4
    ms between a task's worker being free and its start, ``between`` s between computes."""
    start, stop, worker, group, compute, edges = [], [], [], [], [], []
    t = 0.0
    for cid in range(1, computes + 1):
        m = int(rng.integers(20, 201))
        indptr, indices = random_dag(rng, m, width=float(rng.choice([0.05, 0.3, 0.9])))
        deps = [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(m)]
        grp = rng.integers(0, 3, m)
        for i in range(min(alone, m)):
            deps[i], grp[i] = ([i - 1] if i else []), 0
        for i in range(alone, m):
            deps[i] = deps[i] or ([alone - 1] if alone else [])
        work = np.where(grp == 0, rng.uniform(0.009, 0.011, m), rng.exponential(0.01, m))
        waiting = [len(d) for d in deps]
        after: list[list[int]] = [[] for _ in range(m)]
        for i, d in enumerate(deps):
            for j in d:
                after[j].append(i)
        ready = [i for i in range(m) if not waiting[i]]
        free, running = list(range(threads)), []
        st, sp, wk = [0.0] * m, [0.0] * m, [0] * m
        now = t
        while ready or running:
            while free and ready:
                i, w = heapq.heappop(ready), free.pop()
                stretch = 1 + slow * len(running) if grp[i] == 0 else 1.0
                st[i] = now + rng.uniform(0, 4e-4)
                sp[i], wk[i] = st[i] + work[i] * stretch, w
                heapq.heappush(running, (sp[i], i, w))
            now, i, w = heapq.heappop(running)
            free.append(w)
            for c in after[i]:
                waiting[c] -= 1
                if not waiting[c]:
                    heapq.heappush(ready, c)
        base = len(start)
        edges += [(base + i, base + j) for i, d in enumerate(deps) for j in d]
        start, stop, worker = start + st, stop + sp, worker + wk
        group, compute = group + grp.tolist(), compute + [cid] * m
        t = max(sp) + between
    n = len(start)
    edges.sort()
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount([e[0] for e in edges], minlength=n), out=indptr[1:])
    run = recorded(start, stop, worker, ["a", "b", "c"], group)
    data = {name: run.raw(name) for name in ("tasks", "computes", "resources")}
    data["tasks"] = dict(data["tasks"], compute=np.asarray(compute, np.uint32),
                         workers=[f"thread {i}" for i in range(threads)])  # fmt: skip
    ids = np.arange(1, computes + 1)
    of = np.asarray(compute)
    first = np.asarray([min(np.asarray(start)[of == i]) for i in ids])
    last = np.asarray([max(np.asarray(stop)[of == i]) for i in ids])
    data["computes"] = dict(data["computes"], id=ids, call=first, submit=first, end=last,
                            scheduler=["threads"] * computes,
                            idle=np.full(computes, np.nan))  # fmt: skip
    data["edges"] = {"indptr": indptr, "indices": np.asarray([e[1] for e in edges], np.int32)}
    meta = {"t0": 0.0, "t1": max(stop) + 0.001, "finished": True, "schedulers": ["threads"],
            "computes": computes}  # fmt: skip
    return daskprofile.Run(meta, data)


def full_what_if(f: _facts.Facts) -> tuple[list[int], list[float], int] | None:
    """(counts, estimates, the count reported) as the finding reads them when every count
    is replayed; None: no finding."""
    k = f.slots()
    counts = sorted({*parallel.WORKERS, k})
    est, _ = parallel.estimates(f, counts)
    base, best = est[counts.index(k)], int(np.argmin(est))
    if base <= 0 or counts[best] <= k:
        return None
    if f.wall * (1 - est[best] / base) < 2 * parallel.MIN_SHARE * f.wall:
        return None
    return counts, est, counts[best]


def same_as_full_replays(run: daskprofile.Run, replays: list[int]) -> bool:
    """Asserts the what-if finding of ``run`` is the one every replay gives (its evidence
    lists fewer counts, with the same estimates); whether there is one. ``replays``
    counts the finding's replays only."""
    calls = replays[0]
    f = _facts.facts(run)
    full = full_what_if(f)
    replays[0] = calls
    found = parallel.what_if_finding(_facts.facts(run))
    if full is None:
        assert found == []
        return False
    counts, est, best = full
    (row,) = found
    k = f.slots()
    base = est[counts.index(k)]
    assert row["impact_s"] == f.wall * (1 - est[counts.index(best)] / base)
    assert row["message"].startswith(f"Replayed on {best} workers instead of {k},")
    assert f"num_workers={best} " in row["suggestion"]
    shown = row["evidence"]["workers"]
    assert k in shown
    assert best in shown
    assert row["evidence"]["estimate_s"] == [round(est[counts.index(c)], 6) for c in shown]
    return True


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many replays (of one compute on one count) the code under test ran."""
    done = [0]
    for name in ("replay", "shared_replay"):
        original = getattr(simulate, name)

        def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            done[0] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(simulate, name, counted)
    return done


def test_the_what_if_finding_of_random_runs_is_the_one_every_replay_gives(
    replays: list[int],
) -> None:
    """Random graphs recorded on 1-8 threads, some with a measured slowdown, some with
    seconds between computes: skipping replays (lower bounds above the smallest estimate,
    no replay once none waited, no finding possible by the bounds) never changes the
    finding; and it does skip most replays."""
    rng = np.random.default_rng(5)
    found = shared = 0
    full = 0
    for _ in range(40):
        threads = int(rng.choice([1, 2, 3, 4, 8]))
        computes = int(rng.integers(1, 4))
        run = graph_run(rng, threads, computes, alone=int(rng.choice([0, 6])),
                        slow=float(rng.choice([0.0, 0.5, 1.0])),
                        between=float(rng.choice([0.0, 0.01, 1.0])))  # fmt: skip
        found += same_as_full_replays(run, replays)
        f = _facts.facts(run)
        shared += bool(contention.betas(f).any())
        full += len(parallel._compute_rows(f)) * len({*parallel.WORKERS, f.slots()})
    assert found >= 5  # both outcomes are checked
    assert 40 - found >= 5
    assert shared >= 5  # and the replay with slowdowns
    assert replays[0] < 0.6 * full
    # tasks far shorter than the time between computes: no count can save 10%, no replay
    replays[0] = 0
    assert not same_as_full_replays(graph_run(rng, 2, 2, 0, 0.0, between=100.0), replays)
    assert replays[0] == 0


def test_the_what_if_finding_of_recorded_runs_is_the_one_every_replay_gives(
    replays: list[int],
) -> None:
    def nap(x: int, t: float = 0.01) -> int:
        time.sleep(t)
        return x + 1

    with profile() as wide:  # more workers pay off
        dask.compute(*[delayed(nap)(i) for i in range(24)], scheduler="threads", num_workers=2)
    with profile() as gappy:  # no: the time between the computes dominates
        x = delayed(nap)(0)
        for _ in range(6):
            x = delayed(nap)(x)
        x.compute(scheduler="threads", num_workers=2)
        time.sleep(0.3)
        dask.compute(*[delayed(nap)(i) for i in range(6)], scheduler="threads", num_workers=3)
    assert same_as_full_replays(wide, replays)
    assert not same_as_full_replays(gappy, replays)


def test_the_bounds_hold_each_replay_of_random_runs() -> None:
    """What the skipped replays rest on: below each count's lower bound and above its upper
    bound there is no replay, with or without a slowdown, on one or many computes."""
    rng = np.random.default_rng(8)
    for _ in range(25):
        run = graph_run(rng, threads=int(rng.choice([1, 2, 4])), computes=int(rng.integers(1, 3)),
                        alone=int(rng.choice([0, 6])), slow=float(rng.choice([0.0, 1.0])),
                        between=0.0)  # fmt: skip
        f = _facts.facts(run)
        for k in (1, 2, 3, 4, 8, 32):
            fresh = parallel._Replays(f)  # bounds from the figures, not from a replay
            assert fresh.bounded
            lower, upper = fresh.lower(k), fresh.upper(k)
            replayed = fresh.estimate(k)
            assert lower <= replayed * (1 + 1e-12)
            assert replayed <= upper * (1 + 1e-12)
