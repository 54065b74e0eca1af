"""What the cluster tables (actions, transfers, memory, workers) cost on the workers, per task.

    .venv/bin/python benchmarks/bench_cluster_tables.py [--tasks 2000] [--repeat 5]

One LocalCluster of 2 worker processes x 1 thread. Each round profiles two workloads with
``daskprofile.profile(client=...)``, once with the cluster tables and once with them
switched off on the workers (the worker plugin as it was before them), taking turns:

* independent: ``--tasks`` trivial tasks (``client.map(inc, ...)``): no transfer, no disk:
  what the tables cost when nothing happens (one ``len`` per task in the hook);
* dependent: ``--tasks`` tasks each adding two results of the first map, one of them
  usually on the other worker: a transfer before most tasks (an action and a transfer-log
  entry each).

Measured on each worker with ``thread_time`` around the worker plugin's ``transition`` hook
(per task) and its ``flush`` (every 200 ms: drains the tables into the message), the
meter's own cost taken off (``bench_distributed.Meter``). Also: the rows recorded, the
bytes a finished run keeps per action and transfer row, and the hook alone on a stand-in
worker (ns per call, no cluster noise).

``--views``: only the pandas views' numeric work (no cluster): ``Run.memory``'s rolling
minimum over 1M samples of 50 workers in an hour and ``Run.bandwidth(by="time")`` over 200k
transfers, the former per-row / per-transfer Python loops (kept here) against the
vectorised ones in :mod:`daskprofile.cluster_views`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from distributed import Client, LocalCluster, wait

import daskprofile
from bench_distributed import Meter
from daskprofile import cluster_tables


def inc(x: int) -> int:
    return x + 1


def add(x: int, y: int) -> int:
    return x + y


def independent(client: Client, n: int) -> None:
    wait(client.map(inc, range(n), pure=False))


def dependent(client: Client, n: int) -> None:
    a = client.map(inc, range(n), pure=False)
    wait(a)
    half = n // 2
    wait([client.submit(add, a[i], a[(i + half) % n], pure=False) for i in range(n)])


# ---------------------------------------------------------------- on the workers
def meter_hooks(dask_worker: Any, tables: bool) -> None:
    """(On a worker) wrap the plugin's ``transition`` and ``flush``; without ``tables``,
    switch this worker's cluster tables off first."""
    for name, plugin in dask_worker.plugins.items():
        if not name.startswith("daskprofile-"):
            continue
        if not tables and plugin.tables is not None:
            plugin.tables.stop()
            plugin.probe.tables.pop(plugin.tables.address, None)
            plugin.tables = None
        meters = dask_worker._bench_meters = {"transition": Meter(), "flush": Meter()}
        for hook, meter in meters.items():
            meter.wrap(plugin, hook)
        plugin._callback.callback = plugin.flush  # the periodic flush runs the wrapped one


def hook_costs(dask_worker: Any) -> dict[str, float]:
    meters = dask_worker.__dict__.pop("_bench_meters", {})
    return {hook: meter.cpu for hook, meter in meters.items()}


# ---------------------------------------------------------------- the hook alone
def hook_alone(calls: int = 200_000) -> dict[str, float]:
    """ns per ``WorkerProbe.transition(key, "executing", "memory")`` of a task with only
    its compute, and of one fetched from a peer, with the tables and without (no cluster:
    a stand-in worker; the probe's own work included in both)."""
    from types import SimpleNamespace

    from daskprofile.distributed._worker import ProcessProbe, WorkerProbe
    from daskprofile.distributed._worker_tables import WorkerTables

    compute = {"action": "compute", "start": 1.0, "stop": 2.0}
    fetch = {"action": "transfer", "start": 0.5, "stop": 0.9, "source": "tcp://w:2"}
    dep = SimpleNamespace(key="x-1", type=int)
    tasks = {
        "plain": SimpleNamespace(key="plain", startstops=[compute], run_spec=None),
        "fetched": SimpleNamespace(
            key="fetched", startstops=[fetch, compute], run_spec=None, dependencies=[dep]
        ),
    }
    worker = SimpleNamespace(
        address="tcp://w:1", scheduler_delay=0.0, state=SimpleNamespace(tasks=tasks)
    )
    out: dict[str, float] = {}
    for with_tables in (True, False):
        plugin = WorkerProbe("bench", {"flush": 0.2})
        plugin.worker = worker
        plugin.probe = ProcessProbe("bench", {})
        settings = {"tasks": True, "resources": False}
        plugin.tables = WorkerTables(worker, settings, True) if with_tables else None
        for key in tasks:
            t = time.perf_counter()
            for _ in range(calls):
                plugin.transition(key, "executing", "memory")
            out[f"{key} {'tables' if with_tables else 'without'}"] = (
                (time.perf_counter() - t) / calls * 1e9
            )
            if plugin.tables is not None:
                plugin.tables._notes = []
    return out


# ---------------------------------------------------------------- the views
def _rolling_min_loop(time_: np.ndarray, group: np.ndarray, values: np.ndarray, w: float) -> Any:
    """``cluster_views._rolling_min`` before it was vectorised."""
    out = values.copy()
    for g in np.unique(group).tolist():
        rows = np.flatnonzero(group == g)
        rows = rows[np.argsort(time_[rows], kind="stable")]
        t, v = time_[rows], values[rows]
        lo = np.searchsorted(t, t - w, side="left")
        out[rows] = [v[a : b + 1].min() for a, b in zip(lo.tolist(), range(len(t)), strict=True)]
    return out


def _spread_loop(edges: np.ndarray, start: np.ndarray, stop: np.ndarray, rate: np.ndarray) -> Any:
    """``cluster_views._over_time``'s loop before it was vectorised."""
    moved = np.zeros(len(edges) - 1)
    for a, b, r in zip(start.tolist(), stop.tolist(), rate.tolist(), strict=True):
        moved += np.clip(np.minimum(edges[1:], b) - np.maximum(edges[:-1], a), 0, None) * r
    return moved


def views(samples: int = 1_000_000, transfers: int = 200_000) -> None:
    """Print loop / vectorised seconds (best of 3) of the memory view's rolling minimum
    and of bandwidth over time (1 s bins), and check they agree."""
    from daskprofile import cluster_views

    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 3600, samples))
    group = rng.integers(0, 50, samples)
    values = rng.integers(0, 2**32, samples)
    start = rng.uniform(0, 3600, transfers)
    stop = start + rng.exponential(0.05, transfers)
    rate = rng.integers(0, 10**8, transfers) / (stop - start)
    edges = np.arange(0.0, stop.max() + 1.0, 1.0)
    cases = {
        f"memory rolling min, {samples:,} samples": (
            lambda: _rolling_min_loop(t, group, values, 30.0),
            lambda: cluster_views._rolling_min(t, group, values, 30.0),
        ),
        f"bandwidth over time, {transfers:,} transfers": (
            lambda: _spread_loop(edges, start, stop, rate),
            lambda: cluster_views.spread(edges, start, stop, rate),
        ),
    }
    print(f"{'views, s (best of 3)':44}{'loop':>9}{'numpy':>9}{'x':>7}")
    for name, (before, after) in cases.items():
        (old, want), (new, got) = _best(before), _best(after)
        assert np.allclose(got, want, rtol=1e-9, atol=1e-6 * float(np.max(want)))
        print(f"  {name:42}{old:9.3f}{new:9.3f}{old / new:7.0f}")


def _best(work: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Fewest seconds of ``repeat`` calls of ``work``, and what it returned."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = work()
        times.append(time.perf_counter() - t)
    return min(times), out


# ---------------------------------------------------------------- main
def one(client: Client, work: Callable[[Client, int], None], n: int, tables: bool) -> Any:
    with daskprofile.profile(client=client, stacks=False) as run:
        client.run(meter_hooks, tables=tables)
        work(client, n)
        costs = client.run(hook_costs)
    tasks = len(run.tasks)
    per_task = {
        hook: sum(c.get(hook, 0.0) for c in costs.values()) / tasks
        for hook in ("transition", "flush")
    }
    return per_task, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--views", action="store_true", help="only the views, no cluster")
    args = parser.parse_args()
    if args.views:
        views()
        return
    n = args.tasks
    workloads = {"independent": independent, "dependent": dependent}
    costs: dict[tuple[str, bool, str], list[float]] = {}
    last: dict[str, Any] = {}
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dependent(client, 200)  # warm up
        for _ in range(args.repeat):
            for name, work in workloads.items():
                for tables in (True, False):
                    per_task, run = one(client, work, n, tables)
                    for hook, cost in per_task.items():
                        costs.setdefault((name, tables, hook), []).append(cost)
                    if tables:
                        last[name] = run
    report(costs, last, n, args.repeat)
    alone = hook_alone()
    print("the hook alone (executing -> memory), ns/call: tables / without / added")
    for key in ("plain", "fetched"):
        on, off = alone[f"{key} tables"], alone[f"{key} without"]
        print(f"  {key:32}{on:9.0f}{off:9.0f}{on - off:9.0f}")


def report(
    costs: dict[tuple[str, bool, str], list[float]], last: dict[str, Any], n: int, repeat: int
) -> None:
    print(f"LocalCluster 2 worker processes x 1 thread, {n} tasks, medians of {repeat}")
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'worker plugin CPU, us/task':34}{'tables':>9}{'without':>9}{'added':>9}")
    for name in ("independent", "dependent"):
        for hook in ("transition", "flush"):
            on = statistics.median(costs[name, True, hook]) * 1e6
            off = statistics.median(costs[name, False, hook]) * 1e6
            print(f"  {name + ' ' + hook:32}{on:9.2f}{off:9.2f}{on - off:9.2f}")
    for name, run in last.items():
        rows = {t: len(run.raw(t)["start"]) for t in ("actions", "transfers")}
        print(
            f"{name}: {len(run.tasks)} tasks, {rows['actions']} actions, "
            f"{rows['transfers']} transfer rows, {len(run.memory)} memory samples"
        )
        for table, count in rows.items():
            if count:
                raw = run.raw(table)
                cols = {k: v for k, v in raw.items() if isinstance(v, (np.ndarray, bytes))}
                print(
                    f"  {table}: {cluster_tables.retained(cols) / count:.1f} B/row in columns, "
                    f"{cluster_tables.retained(raw) / count:.1f} B/row with the lookups"
                )


if __name__ == "__main__":
    main()
