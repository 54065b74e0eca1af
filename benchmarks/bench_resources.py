"""Resource sampler side by side with dask.diagnostics.ResourceProfiler, in one process.

Figures: fixed cost of a ``with`` block around a 1-task compute, stop latency at
``dt=1``, the sampler's own CPU per sample (and what an idle kernel is reported at), and
what each sees of a ``scheduler="processes"`` compute whose workers start mid-run.

    PYTHONPATH=python .venv/bin/python benchmarks/bench_resources.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import dask
import numpy as np
import psutil
from dask.diagnostics import ResourceProfiler

from daskprofile.collectors.resources import ResourceCollector


def inc(x: int) -> int:
    return x + 1


def hold(x: int) -> int:
    block = np.ones(50_000_000 // 8)  # 50 MB per worker, touched
    time.sleep(0.5)
    return x + int(block[0])


def ours(dt: float) -> ResourceCollector:
    return ResourceCollector(dt=dt)


def theirs(dt: float) -> ResourceProfiler:
    return ResourceProfiler(dt=dt)


MAKERS: dict[str, Callable[[float], AbstractContextManager[Any]]] = {
    "daskprofile": ours,
    "dask ResourceProfiler": theirs,
}


def fixed_cost(make: Callable[[float], AbstractContextManager[Any]], rounds: int = 7) -> float:
    """Median seconds of ``with sampler: compute(1 task)`` minus the bare compute."""
    task = dask.delayed(inc)(1)
    bare, wrapped = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        dask.compute(task, scheduler="threads")
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with make(0.1):
            dask.compute(task, scheduler="threads")
        wrapped.append(time.perf_counter() - t0)
    return statistics.median(wrapped) - statistics.median(bare)


def stop_latency(make: Callable[[float], AbstractContextManager[Any]], dt: float) -> float:
    """Seconds spent leaving the ``with`` block, 0.3 s after entering it."""
    sampler = make(dt)
    sampler.__enter__()
    time.sleep(0.3)
    t0 = time.perf_counter()
    sampler.__exit__(None, None, None)
    return time.perf_counter() - t0


def own_cost(seconds: float = 2.0, dt: float = 0.01) -> tuple[float, float, float]:
    """(sampler CPU ms per sample, % of a core it uses, mean CPU % reported while idle).

    The main thread sleeps, so the process's CPU over the run is the sampler's.
    """
    proc = psutil.Process()
    c0 = sum(proc.cpu_times()[:2])
    with ResourceCollector(dt=dt) as rc:
        time.sleep(seconds)
    used = sum(proc.cpu_times()[:2]) - c0
    cols = rc.snapshot()
    t = cols["time"]
    reported = float((cols["cpu"][1:] * np.diff(t)).sum() / (t[-1] - t[0]))
    return 1000 * used / len(t), 100 * used / seconds, reported


def processes_view(make: Callable[[float], AbstractContextManager[Any]]) -> tuple[int, float]:
    """(max processes, peak memory MB) seen during a 2-worker processes compute."""
    tasks = [dask.delayed(hold)(i) for i in range(4)]
    with make(0.05) as sampler:
        dask.compute(*tasks, scheduler="processes", num_workers=2, chunksize=1)
    if isinstance(sampler, ResourceCollector):
        cols = sampler.snapshot()
        return int(cols["processes"].max()), float(cols["memory"].max()) / 1e6
    mem = [r.mem for r in sampler.results]  # MB; dask does not record a process count
    return -1, max(mem) if mem else float("nan")


def main() -> None:
    print(f"{'':24} {'fixed cost':>11} {'stop dt=1':>10} {'max procs':>10} {'peak MB':>9}")
    for name, make in MAKERS.items():
        cost = fixed_cost(make)
        latency = stop_latency(make, 1.0)
        procs, peak = processes_view(make)
        procs_s = "n/a" if procs < 0 else str(procs)
        print(f"{name:24} {cost * 1e3:>9.1f}ms {latency * 1e3:>8.1f}ms {procs_s:>10} {peak:>9.0f}")
    per_sample, share, reported = own_cost()
    print(
        f"\ndaskprofile sampler at dt=10ms: {per_sample:.3f} ms CPU/sample "
        f"({share:.1f}% of a core); idle process reported at {reported:.2f}% CPU "
        "(its own cost is subtracted)"
    )


if __name__ == "__main__":
    main()
