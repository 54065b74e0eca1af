"""Overhead of daskprofile on a distributed LocalCluster, side by side with get_task_stream.

    .venv/bin/python benchmarks/bench_distributed.py [--tasks 2000] [--repeat 5] [--processes]

One process, one cluster (2 workers x 1 thread). Each measure is one compute of ``--tasks``
trivial tasks (``client.map(inc, ...)`` gathered):

* bare: no profiling;
* daskprofile tasks: ``daskprofile.profile(client=client, tasks=True, cache=False,
  resources=False, stacks=False)``;
* daskprofile all: tasks + cache + resources + stacks (the defaults);
* get_task_stream: distributed's own task-stream record (``with get_task_stream()``), the
  anchor. Its scheduler plugin is never removed once added, so it runs last.

Wall times (bare and daskprofile interleaved; min and median of ``--repeat``) depend on the
machine's load. The CPU section less so: it counts the CPU time (``thread_time``) spent in
the plugins' hooks - daskprofile's scheduler plugin (``transition`` and ``update_graph``, on
the path of every task, and ``flush``, the batches sent every 200 ms) vs distributed's
``TaskStreamPlugin`` (``transition`` only: it keeps each task's kwargs dict and converts
nothing on the scheduler), per task - plus the worker plugin's hook and the sampler
threads. Each wrapped call also costs the meter about two ``thread_time`` calls and the
scheduler's kwargs passed twice, more than the no-op it is calibrated on: a plugin that
does nothing, metered the same way on the scheduler and on the workers, shows that share
(subtracted from each). The CPU
figures are medians of ``--repeat`` rounds, the plugins taking turns. Also: the fixed cost
of an empty ``with`` block and the bytes the finished Run keeps per task.
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
from distributed import Client, LocalCluster, get_task_stream, protocol
from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

import daskprofile
from daskprofile import distributed as dd
from daskprofile.distributed._common import unpack

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
        "daskprofile tasks": lambda: daskprofile.profile(
            client=client, tasks=True, cache=False, resources=False, stacks=False
        ),
        "daskprofile all": lambda: daskprofile.profile(client=client),
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


class NoopPlugin(SchedulerPlugin):
    """Does nothing: what the meter costs per task, metered like the others."""

    name = "noop-bench"

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        pass


class NoopWorkerPlugin(WorkerPlugin):
    """Does nothing on the workers: what the meter costs per task there (a worker calls a
    plugin's ``transition`` about five times per task, the scheduler about three)."""

    name = "noop-bench-worker"

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        pass


def meter_noop_worker(dask_worker: Any) -> None:
    """(On a worker) wrap the no-op worker plugin's ``transition``."""
    plugin = dask_worker.plugins.get(NoopWorkerPlugin.name)
    if plugin is not None:
        meter = dask_worker._daskprofile_bench_meter = Meter()
        meter.wrap(plugin, "transition")


def meter_scheduler_plugin(scheduler: Any, prefix: str, hooks: tuple[str, ...] = HOOKS) -> Meter:
    """Wrap the ``hooks`` of the scheduler plugin whose name starts with ``prefix``."""
    meter = Meter()
    for name, plugin in list(scheduler.plugins.items()):
        if name.startswith(prefix):
            for hook in hooks:
                meter.wrap(plugin, hook)
    return meter


def meter_worker_plugin(dask_worker: Any) -> None:
    """(On a worker) wrap daskprofile's worker plugin: its ``transition`` hook and what its
    periodic flush does (the process's probe ``drain``: the task rows are made there, and
    ``encode``: the message packed to the bytes it travels as; one
    probe per process, shared by an in-process cluster's workers, metered once)."""
    for name, plugin in dask_worker.plugins.items():
        if name.startswith("daskprofile-"):
            meter = dask_worker._daskprofile_bench_meter = Meter()
            meter.wrap(plugin, "transition")
            probe = plugin.probe
            if probe is not None and "drain" not in probe.__dict__:
                drain = dask_worker._daskprofile_bench_drain = Meter()
                drain.wrap(probe, "drain")
                drain.wrap(probe, "encode")  # (packed to bytes: sent as they are)


def worker_costs(dask_worker: Any) -> dict[str, Any]:
    """(On a worker) hook CPU and the CPU of this process's daskprofile threads."""
    meter = dask_worker.__dict__.pop("_daskprofile_bench_meter", None) or Meter()
    drain = dask_worker.__dict__.pop("_daskprofile_bench_drain", None) or Meter()
    ids = {t.native_id for t in threading.enumerate() if t.name.startswith("daskprofile-")}
    threads = {t.id: t.user_time + t.system_time for t in psutil.Process().threads()}
    return {
        "hook": meter.cpu,
        "drain": drain.cpu,
        "pid": os.getpid(),
        "threads": sum(threads.get(i, 0) for i in ids),
    }


class Transport:
    """CPU the messages of a run cost the scheduler on their way to the client, measured by
    serializing them again here with distributed's protocol: a worker's message is read
    (``loads``) and written (``dumps``) by the scheduler, the scheduler's own written."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._push = dd.DistributedCollector._push

    def __enter__(self) -> Transport:
        original, messages = self._push, self.messages

        def push(collector: Any, msg: Any) -> None:
            messages.append(msg)
            original(collector, msg)

        dd.DistributedCollector._push = push  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        dd.DistributedCollector._push = self._push  # type: ignore[method-assign]

    def cpu(self) -> float:
        # (as they travel: packed bytes, read by the client only)
        scheduler = [unpack(m).get("src") == "scheduler" for m in self.messages]
        return serialization_cpu(
            [m for m, ours in zip(self.messages, scheduler, strict=True) if not ours],
            [m for m, ours in zip(self.messages, scheduler, strict=True) if ours],
        )


def serialization_cpu(through: list[Any], written: list[Any]) -> float:
    """CPU seconds to read and write each of ``through`` and write each of ``written``."""
    t = time.thread_time()
    for msg in through:
        protocol.loads(protocol.dumps(msg))
    for msg in written:
        protocol.dumps(msg)
    return time.thread_time() - t


def cpu_section(cluster: LocalCluster, client: Client, n: int, repeat: int) -> dict[str, float]:
    """CPU seconds per task in the hooks (medians of ``repeat`` rounds), and the samplers'
    CPU per second."""
    scheduler = cluster.scheduler
    with get_task_stream(client):  # adds distributed's plugin on first use (never removed)
        pass
    stream = scheduler.plugins["task-stream"]
    rounds: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, cost in one_round(scheduler, client, stream, n).items():
            rounds.setdefault(name, []).append(cost)
    return {name: statistics.median(costs) for name, costs in rounds.items()}


def one_round(scheduler: Any, client: Client, stream: Any, n: int) -> dict[str, float]:
    """One compute of ``n`` tasks under each plugin, one plugin at a time."""
    out: dict[str, float] = {}
    with Transport() as transport, daskprofile.profile(client=client) as run:
        path = meter_scheduler_plugin(scheduler, "daskprofile-", ("transition", "update_graph"))
        flush = meter_scheduler_plugin(scheduler, "daskprofile-", ("flush",))
        client.run(meter_worker_plugin)
        t = time.perf_counter()
        workload(client, n)
        elapsed = time.perf_counter() - t
        costs = client.run(worker_costs)
    assert len(run.tasks) == n, len(run.tasks)
    out["daskprofile transport"] = transport.cpu() / n
    by_pid = {c["pid"]: c["threads"] for c in costs.values()}
    out["daskprofile scheduler plugin"] = (path.cpu + flush.cpu) / n
    out["  on the task path"] = path.cpu / n
    out["  in flush (batches)"] = flush.cpu / n
    out["  worker: transition hook"] = sum(c["hook"] for c in costs.values()) / n
    out["  worker: its messages"] = sum(c["drain"] for c in costs.values()) / n
    out["daskprofile worker plugin"] = (
        out["  worker: transition hook"] + out["  worker: its messages"]
    )
    out["samplers cpu fraction"] = sum(by_pid.values()) / elapsed / max(1, len(by_pid))
    meter = Meter()
    meter.wrap(stream, "transition")
    with get_task_stream(client) as ts:
        workload(client, n)
        records = list(stream.buffer)[-n:]  # what get_task_stream's call sends back
    del stream.__dict__["transition"]
    assert len(ts.data) == n
    out["task stream plugin"] = meter.cpu / n
    out["task stream transport"] = serialization_cpu([], [records]) / n
    noop = NoopPlugin()
    scheduler.add_plugin(noop)
    meter = Meter()
    meter.wrap(noop, "transition")
    workload(client, n)
    scheduler.remove_plugin(name=noop.name)
    out["no-op plugin (the meter)"] = meter.cpu / n
    client.register_plugin(NoopWorkerPlugin(), name=NoopWorkerPlugin.name)
    client.run(meter_noop_worker)
    workload(client, n)
    costs = client.run(worker_costs)
    client.unregister_worker_plugin(NoopWorkerPlugin.name)
    out["no-op worker plugin (the meter)"] = sum(c["hook"] for c in costs.values()) / n
    return out


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
        with daskprofile.profile(client=client):
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
        cpu = cpu_section(cluster, client, n, args.repeat)  # adds the task stream plugin
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
    print(f"CPU in the hooks (thread_time), us/task, median of {args.repeat}")
    for name in (
        "daskprofile scheduler plugin",
        "  on the task path",
        "  in flush (batches)",
        "daskprofile worker plugin",
        "  worker: transition hook",
        "  worker: its messages",
        "task stream plugin",
        "no-op plugin (the meter)",
        "no-op worker plugin (the meter)",
    ):
        print(f"  {name:30}{cpu[name] * 1e6:8.2f}   {cpu[name] / anchor:5.2f}x task stream")
    meter = cpu["no-op plugin (the meter)"]
    worker_meter = cpu["no-op worker plugin (the meter)"]
    print("without the meter's own cost (the no-op plugins' figures taken off each hook path):")
    net_anchor = max(anchor - meter, 1e-12)
    net_sched = max(cpu["daskprofile scheduler plugin"] - meter, 0.0)
    net_worker = max(cpu["daskprofile worker plugin"] - worker_meter, 0.0)
    net_all = net_sched + net_worker
    print(f"  {'scheduler plugin':30}{net_sched * 1e6:8.2f}   {net_sched / net_anchor:5.2f}x")
    print(f"  {'worker plugin':30}{net_worker * 1e6:8.2f}   {net_worker / net_anchor:5.2f}x")
    print(f"  {'scheduler + worker plugins':30}{net_all * 1e6:8.2f}   {net_all / net_anchor:5.2f}x")
    print(f"  {'task stream plugin':30}{net_anchor * 1e6:8.2f}   1.00x")
    t_ours, t_ts = cpu["daskprofile transport"], cpu["task stream transport"]
    print("serialization through the scheduler (distributed's protocol), us/task:")
    print(f"  daskprofile's messages {t_ours * 1e6:6.2f}   task stream's records {t_ts * 1e6:6.2f}")
    share = cpu["samplers cpu fraction"]
    print(f"  samplers (stacks 10 ms + resources 100 ms): {share:.1%} of a core per process")
    print(f"fixed cost of one empty daskprofile.profile(client=...) block: {fixed * 1e3:.1f} ms")
    print(f"finished Run, tasks table: {run_bytes(last):.0f} B/task")


if __name__ == "__main__":
    main()
