"""Memory retained per task by a finished profile, side by side with dask.diagnostics.

    PYTHONPATH=python python benchmarks/bench_memory.py [--tasks 20000]

For each setup the same graph is computed once to warm caches, then once under the
profiler with ``tracemalloc`` on; what stays allocated after the block (the profiler or
run kept alive, the result dropped) is divided by the number of tasks.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from operator import add
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import dask.diagnostics as dd
import dask.threaded

import daskprofile
from daskprofile.record import history as recorder


def graph(n: int, kind: str) -> tuple[dict[Any, Any], list[Any]]:
    """``n`` tasks: tuple keys ``('inc-<token>', i)`` or delayed-style ``'inc-<uuid>'``."""
    dsk: dict[Any, Any] = {}
    outs = []
    for g in range(max(1, n // 100)):
        token = f"{g:08x}00aa11bb22cc33dd44ee55"
        if kind == "tuple":
            parts: list[Any] = [(f"inc-{token}", i) for i in range(99)]
            out: Any = (f"total-{token}", 0)
        else:
            parts = [f"inc-{token[:8]}-{i:04x}-4ed7-84ec-5a9a4beb6998" for i in range(99)]
            out = f"total-{token[:8]}-0000-4ed7-84ec-5a9a4beb6998"
        for i, key in enumerate(parts):
            dsk[key] = (add, i, 1)
        dsk[out] = (sum, parts)
        outs.append(out)
    return dsk, outs


@contextlib.contextmanager
def dask_profiler(keep: list[Any]) -> Iterator[None]:
    with dd.Profiler() as p:
        yield
    keep.append(p)


@contextlib.contextmanager
def dask_four(keep: list[Any]) -> Iterator[None]:
    with (
        dd.Profiler() as p,
        dd.ResourceProfiler(dt=0.1) as r,
        dd.CacheProfiler() as c,
        dd.ProgressBar(out=io.StringIO()),
    ):
        yield
    keep.extend([p, r, c])


@contextlib.contextmanager
def ours(keep: list[Any]) -> Iterator[None]:
    with daskprofile.profile(dt=0.1) as run:
        yield
    keep.append(run)


@contextlib.contextmanager
def ours_tasks_only(keep: list[Any]) -> Iterator[None]:
    with daskprofile.profile(resources=False, cache=False, stacks=False) as run:
        yield
    keep.append(run)


SETUPS: dict[str, Callable[[list[Any]], contextlib.AbstractContextManager[None]]] = {
    "dask Profiler": dask_profiler,
    "dask's four": dask_four,
    "daskprofile tasks only": ours_tasks_only,
    "daskprofile (all on)": ours,
}


def retained(setup: Callable[[list[Any]], Any], dsk: dict[Any, Any], keys: list[Any]) -> int:
    keep: list[Any] = []
    with setup([]):  # warm up caches (key_split, pools, imports)
        dask.threaded.get(dsk, keys)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    with setup(keep):
        out = dask.threaded.get(dsk, keys)
    del out
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    keep.clear()
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=5_000)
    args = parser.parse_args()
    recorder.clear_history()
    for kind in ("tuple", "str"):
        dsk, keys = graph(args.tasks, kind)
        n = len(dsk)
        print(f"retained bytes/task after the block, {n:,} tasks, {kind} keys")
        figures = {name: retained(setup, dsk, keys) / n for name, setup in SETUPS.items()}
        recorder.clear_history()
        for name, b in figures.items():
            print(f"  {name:24s} {b:8.1f} B/task")
        ratio = figures["daskprofile (all on)"] / figures["dask's four"]
        print(f"  daskprofile (all on) / dask's four: {ratio:.3f}x (target <= 100 B/task)")


if __name__ == "__main__":
    main()
