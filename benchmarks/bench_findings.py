"""Findings against measurements, in one process.

    PYTHONPATH=python python benchmarks/bench_findings.py [--big 1000000]

1. What-if: five workloads run on the threaded scheduler with ``num_workers=1`` and ``2``,
   ``--repeat`` times in turn; each run's replay (``run.what_if([1, 2])``) against the
   measured wall time of each worker count, from the 1-worker run and from the 2-worker
   run. One row per workload and worker count: the median ratio over the repeats (each
   estimate against the measurement of the same round) and their range; PASS when the
   median of both is within 15%.
2. Critical path of a known chain of sleeps against the chain's measured duration (5%).
3. Findings of a synthetic finished run of ``--big`` tasks (built through the Run API:
   running a million tasks here takes minutes), target <= 2 s; and the cost of recording
   the edges (converting dask's dependencies at the end of a 100k-task compute).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import dask
import numpy as np
from dask import delayed

import daskprofile
from daskprofile.collectors.graph import empty_computes


def nap(x: Any, t: float) -> Any:
    time.sleep(t)
    return x


def sort(i: int, n: int = 400_000) -> float:
    a = np.random.default_rng(i).random(n)
    return float(np.sort(a)[0])


def pair(a: Any, b: Any) -> Any:
    time.sleep(0.01)
    return a


def workloads() -> dict[str, Callable[[], list[Any]]]:
    rng = np.random.default_rng(0)
    return {
        "wide sleeps 40x20ms": lambda: [delayed(nap)(i, 0.02) for i in range(40)],
        "mixed 30x 5-60ms": lambda: [
            delayed(nap)(i, float(t)) for i, t in enumerate(rng.uniform(0.005, 0.06, 30))
        ],
        "tree reduction 32": lambda: [_tree([delayed(nap)(i, 0.02) for i in range(32)])],
        "numpy sort 16": lambda: [delayed(sort)(i) for i in range(16)],
        "short 400x1ms": lambda: [delayed(nap)(i, 0.001) for i in range(400)],
    }


def _tree(xs: list[Any]) -> Any:
    while len(xs) > 1:
        xs = [delayed(pair)(xs[i], xs[i + 1]) for i in range(0, len(xs), 2)]
    return xs[0]


def what_if_section(repeat: int) -> None:
    print(f"1. what-if estimate vs measured wall time (threads scheduler, {repeat} rounds)")
    print(f"  {'workload':22} {'workers':>7} {'measured':>9} {'est (1w run)':>12} {'ratio':>16} "
          f"{'est (2w run)':>12} {'ratio':>16}  target 15%")  # fmt: skip
    for name, make in workloads().items():
        walls: dict[int, list[float]] = {1: [], 2: []}
        est: dict[tuple[int, int], list[float]] = {(r, k): [] for r in (1, 2) for k in (1, 2)}
        for _ in range(repeat):
            for k in (1, 2):
                with daskprofile.profile() as run:
                    dask.compute(*make(), scheduler="threads", num_workers=k)
                walls[k].append(run.summary()["wall_time"])
                for target, e in zip((1, 2), run.what_if([1, 2]).wall_time, strict=True):
                    est[k, target].append(float(e))
        for k in (1, 2):
            measured = np.asarray(walls[k])
            cells, ok = [], True
            for recorded in (1, 2):
                estimate = np.asarray(est[recorded, k])
                ratio = estimate / measured
                mid = float(np.median(ratio))
                ok = ok and abs(mid - 1) <= 0.15
                cells.append(f"{np.median(estimate):11.3f}s {mid:5.2f} "
                             f"({ratio.min():.2f}-{ratio.max():.2f})")  # fmt: skip
            print(f"  {name:22} {k:7d} {np.median(measured):8.3f}s {cells[0]} {cells[1]}  "
                  f"{'PASS' if ok else 'FAIL'}")  # fmt: skip


def chain_section(n: int = 20, t: float = 0.03) -> None:
    x = delayed(nap)(0, t)
    for _ in range(n - 1):
        x = delayed(nap)(x, t)
    with daskprofile.profile() as run:
        t0 = time.perf_counter()
        x.compute(scheduler="threads", num_workers=2)
        measured = time.perf_counter() - t0
    rows = run.findings().query("kind == 'critical-path'")
    path = rows.evidence.iloc[0]["path_s"] if len(rows) else float("nan")
    print(f"2. critical path of a chain of {n} x {t * 1e3:.0f} ms sleeps")
    ok = abs(path / measured - 1) <= 0.05
    print(
        f"  measured compute() {measured:.3f} s, critical path {path:.3f} s, "
        f"ratio {path / measured:.3f} (target within 5%): {'PASS' if ok else 'FAIL'}"
    )


def synthetic(n: int) -> daskprofile.Run:
    """A finished run of ``n`` tasks: pairs of leaves reduced into ``n // 3`` sums, on 8
    threads, 1 ms per leaf and 0.5 ms per sum, in one compute."""
    leaves = n - n // 3
    sums = n - leaves
    dur = np.concatenate([np.full(leaves, 1e-3), np.full(sums, 5e-4)])
    k = 8
    start = np.zeros(n)
    start[:leaves] = np.arange(leaves) // k * 1.1e-3
    start[leaves:] = start[leaves - 1] + 2e-3 + np.arange(sums) // k * 6e-4
    task = np.repeat(np.arange(leaves, n), 2)
    dep = (np.arange(2 * sums)) % leaves
    order = np.argsort(task, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(task, minlength=n), out=indptr[1:])
    tasks = {
        "key": [""] * n,
        "group": np.where(np.arange(n) < leaves, 0, 1).astype(np.uint32),
        "worker": (np.arange(n) % k).astype(np.uint16),
        "submit": start.copy(),
        "start": start,
        "stop": start + dur,
        "error": np.zeros(n, np.uint16),
        "compute": np.ones(n, np.uint32),
        "span": np.zeros(n, np.uint16),
        "groups": ["load", "sum"],
        "workers": [f"thread {i}" for i in range(k)],
        "error_types": [None],
        "spans": [None],
        "dropped": 0,
    }
    t1 = float(tasks["stop"].max()) + 0.01
    computes = empty_computes() | {
        "id": np.array([1]), "call": np.array([-0.05]), "submit": np.array([-0.01]),
        "end": np.array([t1]), "scheduler": ["threads"], "idle": np.array([np.nan]),
        "cpus": 8, "memory_total": 16 << 30,
    }  # fmt: skip
    res_t = np.arange(0, t1, 0.1)
    data = {
        "tasks": tasks,
        "edges": {"indptr": indptr, "indices": dep[order].astype(np.int32)},
        "computes": computes,
        "resources": {
            "time": res_t,
            "cpu": np.full(len(res_t), 790.0),
            "memory": np.full(len(res_t), 1 << 30),
            "processes": np.ones(len(res_t), np.int32),
        },
    }
    meta = {"t0": 0.0, "t1": t1, "finished": True, "schedulers": ["threads"], "computes": 1}
    return daskprofile.Run(meta, data)


def big_section(n: int) -> None:
    run = synthetic(n)
    t = time.perf_counter()
    found = run.findings()
    took = time.perf_counter() - t
    verdict = "PASS" if took <= 2 else "FAIL"
    print(f"3. findings of a synthetic finished run of {n:,} tasks: {took:.2f} s "
          f"(target <= 2 s): {verdict}")  # fmt: skip
    print(f"  kinds: {', '.join(found.kind)}")
    edges_cost()


def edges_cost(n: int = 60_000) -> None:
    """What recording the edges costs at the end of a real compute of ``n`` tasks."""
    from daskprofile.collectors import graph

    calls: list[float] = []
    original = graph.GraphRecorder._convert

    def timed(self: Any, finished_only: bool) -> Any:
        t = time.perf_counter()
        out = original(self, finished_only)
        calls.append(time.perf_counter() - t)
        return out

    graph.GraphRecorder._convert = timed  # type: ignore[method-assign]
    try:
        import dask.array as da

        x = da.ones(n // 2, chunks=1).sum(split_every=2)  # n/2 chunks + a tree of n/2 sums
        with daskprofile.profile(stacks=False, cache=False) as run:
            t = time.perf_counter()
            x.compute(scheduler="threads", optimize_graph=False)
            compute = time.perf_counter() - t
    finally:
        graph.GraphRecorder._convert = original  # type: ignore[method-assign]
    e = run.raw("edges")
    print(f"  edges of a real {len(run.tasks):,}-task compute: converted in {sum(calls):.3f} s at "
          f"the run's end (compute {compute:.2f} s: {sum(calls) / compute:.1%}), "
          f"{e['indptr'].nbytes + e['indices'].nbytes} B kept")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each what-if run")
    ns = parser.parse_args()
    what_if_section(ns.repeat)
    chain_section()
    big_section(ns.big)


if __name__ == "__main__":
    main()
