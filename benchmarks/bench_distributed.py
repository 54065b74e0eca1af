"""Overhead of daskprofile on a distributed LocalCluster, side by side with get_task_stream.

    .venv/bin/python benchmarks/bench_distributed.py [--tasks 2000] [--repeat 5] [--processes]

One process, one cluster (2 workers x 1 thread). Each measure is one compute of ``--tasks``
trivial tasks (``client.map(inc, ...)`` gathered):

* bare: no profiling;
* daskprofile tasks: ``daskprofile.distributed.profile(tasks=True, cache=False,
  resources=False, stacks=False)``;
* daskprofile all: tasks + cache + resources + stacks (the defaults);
* get_task_stream: distributed's own task-stream record (``with get_task_stream()``), the
  anchor. Its scheduler plugin is never removed once added, so it runs last.

Wall times (bare and daskprofile interleaved; min and median of ``--repeat``) depend on the
machine's load. The CPU section does not: it counts the CPU time (``thread_time``) spent in
the plugins' hooks - daskprofile's scheduler plugin vs distributed's ``TaskStreamPlugin``,
per task - plus the worker plugin's hook and the sampler threads. Also: the fixed cost of an
empty ``with`` block and the bytes the finished Run keeps per task.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import psutil
from distributed import Client, LocalCluster, get_task_stream

import daskprofile.distributed as dd

Variant = Callable[[], AbstractContextManager[Any]]
HOOKS = ("transition", "update_graph", "flush")


def inc(x: int) -> int:
    return x + 1


def workload(client: Client, n: int) -> float:
    """Seconds to compute ``n`` independent trivial tasks and gather them."""
    t = time.perf_counter()
    futures = client.map(inc, range(n), pure=False)
    client.gather(futures)
    elapsed = time.perf_counter() - t
    del futures
    return elapsed


def variants(client: Client) -> dict[str, Variant]:
    return {
        "bare": nullcontext,
        "daskprofile tasks": lambda: dd.profile(
            client, tasks=True, cache=False, resources=False, stacks=False
        ),
        "daskprofile all": lambda: dd.profile(client),
    }


# ---------------------------------------------------------------- CPU accounting
class Meter:
    """Thread CPU seconds spent in wrapped methods (the wrapper's own cost taken off)."""

    def __init__(self) -> None:
        self.raw = 0.0
        self.calls = 0

    @property
    def cpu(self) -> float:
        return max(0.0, self.raw - self.calls * _wrapper_cost())

    def wrap(self, obj: Any, name: str) -> None:
        inner = getattr(obj, name, None)
        if inner is None:
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.raw += time.thread_time() - t
                self.calls += 1

        setattr(obj, name, timed)


class _Noop:
    def hook(self, *args: Any, **kwargs: Any) -> None:
        pass


_calibration: list[float] = []


def _wrapper_cost() -> float:
    """CPU seconds one wrapped call of a no-op costs (the measurement's own cost)."""
    if not _calibration:
        meter, obj = Meter.__new__(Meter), _Noop()
        meter.raw, meter.calls = 0.0, 0
        meter.wrap(obj, "hook")
        for _ in range(20_000):
            obj.hook(1, 2, finish="memory")
        _calibration.append(meter.raw / meter.calls)
    return _calibration[0]


def meter_scheduler_plugin(scheduler: Any, prefix: str) -> Meter:
    """Wrap the hooks of the scheduler plugin whose name starts with ``prefix``."""
    meter = Meter()
    for name, plugin in list(scheduler.plugins.items()):
        if name.startswith(prefix):
            for hook in HOOKS:
                meter.wrap(plugin, hook)
    return meter


def meter_worker_plugin(dask_worker: Any) -> None:
    """(On a worker) wrap daskprofile's worker plugin ``transition`` hook."""
    for name, plugin in dask_worker.plugins.items():
        if name.startswith("daskprofile-"):
            meter = dask_worker._daskprofile_bench_meter = Meter()
            meter.wrap(plugin, "transition")


def worker_costs(dask_worker: Any) -> dict[str, Any]:
    """(On a worker) hook CPU and the CPU of this process's daskprofile threads."""
    meter = dask_worker.__dict__.pop("_daskprofile_bench_meter", None) or Meter()
    ids = {t.native_id for t in threading.enumerate() if t.name.startswith("daskprofile-")}
    threads = {t.id: t.user_time + t.system_time for t in psutil.Process().threads()}
    return {"hook": meter.cpu, "pid": os.getpid(), "threads": sum(threads.get(i, 0) for i in ids)}


def cpu_section(cluster: LocalCluster, client: Client, n: int) -> dict[str, float]:
    """CPU seconds per task in the hooks, and the samplers' CPU per second."""
    scheduler = cluster.scheduler
    with dd.profile(client) as run:
        meter = meter_scheduler_plugin(scheduler, "daskprofile-")
        client.run(meter_worker_plugin)
        t = time.perf_counter()
        workload(client, n)
        elapsed = time.perf_counter() - t
        costs = client.run(worker_costs)
    assert len(run.tasks) == n
    by_pid = {c["pid"]: c["threads"] for c in costs.values()}
    with get_task_stream(client):  # adds distributed's plugin on first use
        pass
    stream = meter_scheduler_plugin(scheduler, "task-stream")
    with get_task_stream(client) as ts:
        workload(client, n)
    assert len(ts.data) == n
    return {
        "daskprofile scheduler plugin": meter.cpu / n,
        "daskprofile worker plugin": sum(c["hook"] for c in costs.values()) / n,
        "task stream plugin": stream.cpu / n,
        "samplers cpu fraction": sum(by_pid.values()) / elapsed / max(1, len(by_pid)),
    }


def run_bytes(run: Any) -> float:
    """Bytes per task of the finished Run's task table (numpy columns + key strings)."""
    raw = run.raw("tasks")
    arrays = sum(v.nbytes for v in raw.values() if isinstance(v, np.ndarray))
    keys = sum(sys.getsizeof(k) for k in raw["key"])
    return (arrays + keys) / max(1, len(raw["key"]))


def fixed_cost(client: Client, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        with dd.profile(client):
            pass
        times.append(time.perf_counter() - t)
    return min(times)


# ---------------------------------------------------------------- main
def wall_section(client: Client, n: int, repeat: int) -> tuple[dict[str, list[float]], Any]:
    results: dict[str, list[float]] = {}
    last: Any = None
    for _ in range(repeat):
        for name, make in variants(client).items():
            with make() as ctx:
                results.setdefault(name, []).append(workload(client, n))
            if name == "daskprofile all":
                last = ctx
    return results, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--processes", action="store_true", help="worker processes")
    args = parser.parse_args()
    n = args.tasks
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=args.processes, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        workload(client, n)  # warm up
        results, last = wall_section(client, n, args.repeat)
        fixed = fixed_cost(client, args.repeat)
        cpu = cpu_section(cluster, client, n)  # adds the task stream plugin: after the rest
        for _ in range(args.repeat):
            with get_task_stream(client):
                results.setdefault("get_task_stream", []).append(workload(client, n))
    report(results, cpu, n, fixed, last, args)


def report(
    results: dict[str, list[float]],
    cpu: dict[str, float],
    n: int,
    fixed: float,
    last: Any,
    args: Any,
) -> None:
    kind = "processes" if args.processes else "in-process"
    print(f"LocalCluster 2 workers x 1 thread ({kind}), {n} tasks, {args.repeat} repeats")
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'wall':22}{'min s':>9}{'median s':>10}{'min us/task':>13}{'over us/task':>14}")
    bare = min(results["bare"])
    for name, times in results.items():
        t = min(times)
        over = (t - bare) / n * 1e6
        print(f"{name:22}{t:9.3f}{statistics.median(times):10.3f}{t / n * 1e6:13.1f}{over:14.1f}")
    anchor = cpu["task stream plugin"]
    print("CPU in the hooks (thread_time), us/task")
    for name in ("daskprofile scheduler plugin", "daskprofile worker plugin", "task stream plugin"):
        print(f"  {name:30}{cpu[name] * 1e6:8.2f}   {cpu[name] / anchor:5.2f}x task stream")
    share = cpu["samplers cpu fraction"]
    print(f"  samplers (stacks 10 ms + resources 100 ms): {share:.1%} of a core per process")
    print(f"fixed cost of one empty daskprofile.distributed.profile() block: {fixed * 1e3:.1f} ms")
    print(f"finished Run, tasks table: {run_bytes(last):.0f} B/task")


if __name__ == "__main__":
    main()
