"""Findings against measurements, in one process.

    PYTHONPATH=python python benchmarks/bench_findings.py [--big 1000000]
    PYTHONPATH=python python benchmarks/bench_findings.py --sections what-if --repeat 7

1. What-if: five workloads run on the threaded scheduler with ``num_workers=1`` and ``2``,
   after one warm-up run of each, ``--repeat`` rounds (each round alternates which worker
   count runs first, so a drift in the machine's load hits both alike). Each run's replay
   (``run.what_if([1, 2])``) is compared with the *median of the measured* wall times of
   each worker count over the rounds, from the 1-worker runs and from the 2-worker runs:
   the median estimate against the median measurement, PASS when both are within 15%.
   Why medians and not one measurement: on this 2-vCPU machine a single wall time of the
   same workload spreads by more than 15% on its own (the ``spread`` column: the slowest
   and fastest run against the median; 0.4-3.5x for the 60-400 ms numpy sorts while other
   processes load the machine), so no estimate can be within 15% of one measurement; the
   median of several is the figure an estimate can be held to. The load average is
   printed with the table, and ``idle``: the machine's idle CPUs during the measured
   computes (recorded by daskprofile); the figures mean little when it is near 0.
   ``--verbose`` prints every run's estimate against the median measurement, and the
   slowdown under concurrency each run measured (:mod:`daskprofile.findings.contention`:
   beta 0 none, 1 tasks taking turns; a 1-worker run cannot measure it).
2. Critical path of a known chain of sleeps against the chain's measured duration (5%).
3. Findings of a synthetic finished run of ``--big`` tasks (built through the Run API:
   running a million tasks here takes minutes), target <= 2 s; and the cost of recording
   the edges (converting dask's dependencies at the end of a 100k-task compute).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import dask
import numpy as np
from dask import delayed

import daskprofile
from daskprofile.collectors.graph import empty_computes
from daskprofile.findings import _facts, contention


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
    """Each builds the same graph at every call (the mixed sleeps draw the same durations:
    a 1-worker run and a 2-worker run must run the same tasks to be compared)."""
    mixed = np.random.default_rng(0).uniform(0.005, 0.06, 30)
    return {
        "wide sleeps 40x20ms": lambda: [delayed(nap)(i, 0.02) for i in range(40)],
        "mixed 30x 5-60ms": lambda: [delayed(nap)(i, float(t)) for i, t in enumerate(mixed)],
        "tree reduction 32": lambda: [_tree([delayed(nap)(i, 0.02) for i in range(32)])],
        "numpy sort 16": lambda: [delayed(sort)(i) for i in range(16)],
        "short 400x1ms": lambda: [delayed(nap)(i, 0.001) for i in range(400)],
    }


def _tree(xs: list[Any]) -> Any:
    while len(xs) > 1:
        xs = [delayed(pair)(xs[i], xs[i + 1]) for i in range(0, len(xs), 2)]
    return xs[0]


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


@dataclass
class Runs:
    """What the runs on one worker count gave: wall times, the machine's idle CPUs during
    each compute, and each run's estimates for 1 and 2 workers."""

    wall: list[float] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)
    estimate: dict[int, list[float]] = field(default_factory=lambda: {1: [], 2: []})
    beta: list[float] = field(default_factory=list)

    def add(self, make: Callable[[], list[Any]], k: int) -> None:
        """Run the workload once on ``k`` threads, profiled."""
        with daskprofile.profile() as run:
            dask.compute(*make(), scheduler="threads", num_workers=k)
        self.wall.append(run.summary()["wall_time"])
        idle = run.raw("computes")["idle"]  # NaN where no resource sample fell in a compute
        self.idle.append(float(np.nanmean(idle)) if np.isfinite(idle).any() else np.nan)
        self.beta.append(float(contention.betas(_facts.facts(run)).max(initial=0.0)))
        for target, e in zip((1, 2), run.what_if([1, 2]).wall_time, strict=True):
            self.estimate[target].append(float(e))


def what_if_section(repeat: int, verbose: bool = False) -> None:
    print(f"1. what-if estimate vs the median measured wall time (threads scheduler, "
          f"{repeat} rounds after a warm-up; {os.cpu_count()} CPUs, {_load()})")  # fmt: skip
    head = f"{'est (1w run)':>12} {'ratio':>5} {'est (2w run)':>12} {'ratio':>5}"
    print(f"  {'workload':22} {'workers':>7} {'measured':>8} {'spread':>9} {'idle':>4} {head}  "
          "target 15%")  # fmt: skip
    for name, make in workloads().items():
        for k in (1, 2):
            Runs().add(make, k)  # warm-up: first calls, imports, thread pools
        runs = {1: Runs(), 2: Runs()}
        for i in range(repeat):
            for k in (1, 2) if i % 2 == 0 else (2, 1):  # alternate: a drift hits both alike
                runs[k].add(make, k)
        for k in (1, 2):
            print(_row(name, k, runs, verbose))
    print(f"  ({_load()}; idle: the machine's idle CPUs during the measured computes, median)")


def _row(name: str, k: int, runs: dict[int, Runs], verbose: bool) -> str:
    """One table row: the median measurement on ``k`` workers, its spread, and the median
    estimate of the runs recorded on each worker count against it."""
    walls = np.asarray(runs[k].wall)
    measured = float(np.median(walls))
    spread = f"{walls.min() / measured:.2f}-{walls.max() / measured:.2f}"
    cells, ok = [], True
    for recorded in (1, 2):
        estimate = np.asarray(runs[recorded].estimate[k])
        ratio = float(np.median(estimate)) / measured
        ok = ok and abs(ratio - 1) <= 0.15
        cells.append(f"{np.median(estimate):11.3f}s {ratio:5.2f}")
    idle = float(np.nanmedian(runs[k].idle)) if np.isfinite(runs[k].idle).any() else np.nan
    line = (f"  {name:22} {k:7d} {measured:7.3f}s {spread:>9} {idle:4.1f} {cells[0]} {cells[1]}  "
            f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    if verbose:
        for recorded in (1, 2):
            each = " ".join(f"{e / measured:.2f}" for e in runs[recorded].estimate[k])
            line += f"\n    each {recorded}w run's estimate / median measured: {each}"
        line += "\n    each measured / median: " + " ".join(f"{w / measured:.2f}" for w in walls)
        line += f"\n    slowdown measured in each {k}w run (beta, 0: none): " + " ".join(
            f"{b:.2f}" for b in runs[k].beta
        )
    return line


def chain_section(n: int = 20, t: float = 0.03) -> None:
    x = delayed(nap)(0, t)
    for _ in range(n - 1):
        x = delayed(nap)(x, t)
    # dask's first compute in a process imports distributed (~0.25 s): not the chain's time
    delayed(nap)(0, 0).compute(scheduler="threads")
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
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each what-if run")
    parser.add_argument("--verbose", action="store_true", help="every what-if run's ratio")
    parser.add_argument("--sections", default="what-if,chain,big",
                        help="comma-separated: what-if, chain, big")  # fmt: skip
    ns = parser.parse_args()
    sections = set(ns.sections.split(","))
    if unknown := sections - {"what-if", "chain", "big"}:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if "what-if" in sections:
        what_if_section(ns.repeat, ns.verbose)
    if "chain" in sections:
        chain_section()
    if "big" in sections:
        big_section(ns.big)


if __name__ == "__main__":
    main()
