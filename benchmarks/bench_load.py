"""A 1,000,000-task run with everything on, within its cap, side by side with dask's Profiler.

    PYTHONPATH=python python benchmarks/bench_load.py [--tasks 1000000] [--cap 2000000]

Each setup computes the same graph (threads scheduler, trivial tasks) once in a fresh
process (so peak RSS is its own): bare, dask's ``Profiler``, and ``daskprofile.profile()``
with tasks, resources, cache and stacks on and ``max_records=--cap`` (default: the
configured ``daskprofile.max-records``). Printed per setup: wall time, peak RSS growth over
the process before the compute, bytes retained per task once the result is dropped (RSS
after minus before, beyond what the bare compute leaves: the profiler or run kept), rows
kept/dropped; then the ratios to dask's Profiler. The panel's side of 1,000,000 tasks is
``ui-tests/test_live_bench.py``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
from operator import add
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))


def graph(n: int) -> tuple[dict[Any, Any], list[Any]]:
    """``n`` trivial tasks: groups of 99 additions and their sum."""
    dsk: dict[Any, Any] = {}
    outs = []
    for g in range(max(1, n // 100)):
        token = f"{g:08x}00aa11bb22cc33dd44ee55"
        parts = [(f"inc-{token}", i) for i in range(99)]
        for i, key in enumerate(parts):
            dsk[key] = (add, i, 1)
        out = (f"total-{token}", 0)
        dsk[out] = (sum, parts)
        outs.append(out)
    return dsk, outs


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def one(setup: str, n: int, cap: int | None) -> dict[str, Any]:
    """Run one setup in this process; figures as a dict."""
    import dask.threaded
    from dask.diagnostics.profile import Profiler

    import daskprofile

    dsk, outs = graph(n)
    dask.threaded.get(graph(1_000)[0], graph(1_000)[1])  # warm: pools, imports
    with daskprofile.profile(max_records=cap):
        dask.threaded.get(*graph(1_000))
    from daskprofile.record import history

    history.clear_history()
    gc.collect()
    before, peak0 = rss(), peak()
    kept: Any = None
    figures: dict[str, Any] = {"setup": setup}
    t = time.perf_counter()
    if setup == "bare":
        result = dask.threaded.get(dsk, outs)
    elif setup == "dask Profiler":
        with Profiler() as kept:  # type: ignore[no-untyped-call]
            result = dask.threaded.get(dsk, outs)
        figures["rows kept"] = len(kept.results)
    else:
        with daskprofile.profile(max_records=cap) as kept:
            result = dask.threaded.get(dsk, outs)
        tasks = kept.raw("tasks", keys=False)
        figures["rows kept"] = len(tasks["start"])
        figures["dropped"] = dict(kept.meta.dropped)
        figures["errors"] = list(kept.meta.errors)
    figures["time s"] = time.perf_counter() - t
    assert len(result) == len(outs)
    del result
    history.clear_history()
    gc.collect()
    figures["peak RSS growth MB"] = max(0, peak() - max(before, peak0)) / 1e6
    figures["retained B/task"] = (rss() - before) / len(dsk)
    figures["tasks"] = len(dsk)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--cap", type=int, default=None, help="max_records (default: config)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.tasks, args.cap)))
        return
    rows = []
    for setup in ("bare", "dask Profiler", "daskprofile (all on)"):
        cmd = [sys.executable, __file__, "--one", setup, "--tasks", str(args.tasks)]
        if args.cap is not None:
            cmd += ["--cap", str(args.cap)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    import daskprofile.options as options

    cap = args.cap if args.cap is not None else options.config("max-records")
    print(f"{rows[0]['tasks']:,} tasks, threads scheduler, daskprofile cap {cap:,} rows")
    ours, dasks, bare = rows[2], rows[1], rows[0]
    for r in rows:  # RSS the allocator keeps after any compute is bare's: counted beyond it
        r["retained B/task"] -= bare["retained B/task"]
    print(f"  {'setup':22s} {'time s':>8s} {'peak RSS +MB':>13s} {'kept B/task':>12s} rows kept")
    for r in rows:
        print(
            f"  {r['setup']:22s} {r['time s']:8.2f} {r['peak RSS growth MB']:13.1f} "
            f"{r['retained B/task']:12.1f} {r.get('rows kept', '-')}"
        )
    print(f"  daskprofile dropped: {ours['dropped']}; errors: {ours['errors']}")
    for name in ("time s", "peak RSS growth MB", "retained B/task"):
        ratio = ours[name] / dasks[name] if dasks[name] else float("nan")
        print(f"  daskprofile / dask Profiler, {name}: {ratio:.2f}x")
    over = (ours["time s"] - bare["time s"]) / ours["tasks"] * 1e6
    over_d = (dasks["time s"] - bare["time s"]) / dasks["tasks"] * 1e6
    print(f"  overhead over bare: daskprofile {over:.1f} us/task, dask Profiler {over_d:.1f}")


if __name__ == "__main__":
    main()
