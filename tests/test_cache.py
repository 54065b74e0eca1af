"""Cache collector and CacheProfiler: per-group series, releases found via dependencies."""

from __future__ import annotations

import random
import time
from operator import add
from typing import Any

import dask
import dask.multiprocessing
import numpy as np
import pytest
from dask.callbacks import Callback as DaskCallback

import daskprofile
from daskprofile import CacheProfiler


def chain_graph(n: int) -> dict[Any, Any]:
    dsk: dict[Any, Any] = {("a-abc12345", 0): (add, 0, 1)}
    for i in range(1, n):
        dsk[("a-abc12345", i)] = (add, ("a-abc12345", i - 1), 1)
    dsk["total-ff00ff00"] = (sum, [("a-abc12345", n - 1)])
    return dsk


def test_occupancy_series_per_group() -> None:
    dsk = chain_graph(5)
    with daskprofile.profile(resources=False, stacks=False) as run:
        assert dask.get(dsk, "total-ff00ff00") == 5
    cache = run.cache
    a = cache[cache["group"] == "a"]["metric"].tolist()
    # in a chain each 'a' result replaces the previous one (net change 0: no row)
    assert a == [1.0, 0.0]
    assert cache[cache["group"] == "total"]["metric"].tolist() == [1.0, 0.0]
    assert set(cache["group"]) == {"a", "total"}


def test_metric_and_rows_linear_in_tasks() -> None:
    dsk = chain_graph(200)
    with daskprofile.profile(resources=False, stacks=False, metric=lambda v: 10.0) as run:
        dask.get(dsk, "total-ff00ff00")
    cache = run.cache
    assert cache["metric"].max() == 10.0
    assert len(cache) <= 2 * len(dsk) + 2


def test_cache_profiler_results_like_dask() -> None:
    dsk = chain_graph(4)
    with CacheProfiler(metric=lambda v: 2, metric_name="two") as cprof:
        dask.threaded.get(dsk, "total-ff00ff00")
    assert cprof._metric_name == "two"
    results = cprof.results
    assert sorted(str(r.key) for r in results) == sorted(str(k) for k in dsk)
    assert all(r.metric == 2 for r in results)
    assert all(r.cache_time <= r.free_time for r in results)
    # the chain: each 'a' is freed when its successor is cached
    by_key = {r.key: r for r in results}
    for i in range(3):
        assert by_key[("a-abc12345", i)].free_time <= by_key[("a-abc12345", i + 1)].free_time


def test_cache_profiler_with_collections() -> None:
    da = __import__("dask.array", fromlist=["ones"])
    x = da.ones((40, 40), chunks=10)
    with CacheProfiler() as cprof:
        assert float((x + 1).sum().compute()) == 3200.0
    assert len(cprof.results) > 0
    assert np.isfinite([r.free_time for r in cprof.results]).all()


def test_occupancy_follows_dasks_cache_task_by_task() -> None:
    """The collector counts dependents down instead of reading dask's state per task; after
    every task its total must equal what dask's cache holds (outputs are never released)."""
    dsk: dict[Any, Any] = {("leaf-aa11bb22", i): (add, i, 1) for i in range(8)}
    for j in range(4):
        dsk[("pair-cc33dd44", j)] = (add, ("leaf-aa11bb22", 2 * j), ("leaf-aa11bb22", 2 * j + 1))
    dsk[("top-ee55ff66", 0)] = (sum, [("pair-cc33dd44", j) for j in range(4)])
    held: list[int] = []
    posttask = DaskCallback(posttask=lambda key, res, d, state, w: held.append(len(state["cache"])))
    with daskprofile.profile(resources=False, stacks=False) as run, posttask:
        out = dask.get(dsk, [("top-ee55ff66", 0), ("pair-cc33dd44", 0)])
    assert out == (36, 3)
    occupancy: dict[str, float] = {}
    totals: list[float] = []
    rows = run.cache
    for _, same_time in rows.groupby("time", sort=False):
        for row in same_time.itertuples():
            occupancy[row.group] = row.metric
        totals.append(sum(occupancy.values()))
    assert totals[:-1] == held
    assert totals[-1] == 0  # everything is let go when the compute ends
    assert max(held) < len(dsk)  # releases happened along the way


def _random_graph(seed: int) -> tuple[dict[Any, Any], list[Any]]:
    """A DAG of string and tuple keys, results with one or more dependents, two outputs (one
    of them also a dependency of the other)."""
    rng = random.Random(seed)
    keys: list[Any] = []
    dsk: dict[Any, Any] = {}
    for i in range(60):
        key: Any = f"s-{i:08x}{'ab' * 12}" if i % 3 == 0 else (f"t{i % 4}-ab12cd34", i)
        deps = rng.sample(keys, min(len(keys), rng.randint(1, 3)))
        dsk[key] = (_plus_one, *deps)
        keys.append(key)
    used = {dep for task in dsk.values() for dep in task[1:] if dep in dsk}
    dsk["total-ee11ff22"] = (_plus_one, *(k for k in keys if k not in used), keys[30])
    return dsk, ["total-ee11ff22", keys[30]]


def _plus_one(*xs: int) -> int:
    time.sleep(0.001)  # tasks 1 ms apart: each one's rows are told apart by their time
    return sum(xs) + 1


@pytest.mark.parametrize(
    ("seed", "metric", "scheduler"),
    [
        *((seed, metric, "sync") for seed in (1, 2, 3) for metric in (None, 2.5)),
        (1, None, "processes"),  # results come back in envelopes: no dependency counts
    ],
)
def test_occupancy_matches_dask_on_random_graphs(
    seed: int, metric: float | None, scheduler: str
) -> None:
    """String and tuple keys, shared dependencies, two outputs, a metric or not: after every
    task the occupancy summed over groups is what dask's cache holds."""
    dsk, outputs = _random_graph(seed)
    scale = 1.0 if metric is None else metric
    held: list[float] = []

    def posttask(key: Any, res: Any, d: Any, state: dict[str, Any], w: Any) -> None:
        held.append(scale * len(state["cache"]))

    options: dict[str, Any] = {"resources": False, "stacks": False}
    if metric is not None:
        options["metric"] = lambda value: metric
    with daskprofile.profile(**options) as run, DaskCallback(posttask=posttask):
        if scheduler == "sync":
            dask.get(dsk, outputs)
        else:  # one worker: tasks end in the order dask sees them
            dask.multiprocessing.get(dsk, outputs, num_workers=1, optimize_graph=False)
    # the occupancy summed over groups as of each task's end (its rows carry its stop time)
    rows = run.cache
    totals = []
    for stop in sorted(run.tasks["stop"]):
        upto = rows[rows["time"] <= stop + 2e-4]
        totals.append(upto.groupby("group")["metric"].last().sum())
    assert len(held) == len(run.tasks) == len(dsk)
    assert totals == held
    assert rows.groupby("group")["metric"].last().sum() == 0  # all let go at the end
    assert max(held) < len(dsk) * scale  # releases happened along the way
