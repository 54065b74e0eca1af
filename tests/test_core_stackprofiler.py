"""StackProfiler drop-in: a thin wrapper over the stack collector, wired to the hook."""

from __future__ import annotations

import time

import dask

from daskprofile import StackProfiler


def spin(x: int) -> int:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.2:
        pass
    return x


def test_stack_profiler_trees_per_group() -> None:
    with StackProfiler(interval=0.005) as sprof:
        dask.compute(*[dask.delayed(spin)(i) for i in range(2)], scheduler="threads")
    assert "spin" in sprof.results
    assert sprof.results["spin"]["count"] > 5
    lines = sprof.hot_lines(spin)
    assert lines
    assert lines[0][0].endswith("test_core_stackprofiler.py")
