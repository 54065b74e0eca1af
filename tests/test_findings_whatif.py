"""The what-if replay where tasks slow each other down: the slowdown measured per group
(:mod:`daskprofile.findings.contention`) and the replay that stretches tasks by the
concurrency it simulates (:func:`daskprofile.findings.simulate.shared_schedule`)."""

from __future__ import annotations

import threading
import time

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
