"""Soak: small profiled computes for a while; slopes of memory, threads and fds.

    PYTHONPATH=python python benchmarks/bench_soak.py [--minutes 60] [--every 30]

Three loops share the time: ``profile()`` blocks on the threads scheduler, the same
computes recorded by the panel's per-cell recorder (a connected panel's comm handlers and
a comm that counts what it is sent), and ``profile()`` blocks on a ``LocalCluster`` of 2
worker processes. Each loop samples every ``--every`` seconds the kernel's threads, fds,
RSS and traced memory (``tracemalloc``), and the workers' threads, fds and RSS
(``client.run``), then prints each series' least-squares slope per compute and per hour
beside its range. A slope that is not ~0 is growth; the CI version is
``tests/reliability/test_load.py``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import add
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import dask
import numpy as np
import psutil

import daskprofile
from daskprofile.jupyter import comm as dpcomm
from daskprofile.record import history


def graph(i: int, n: int = 100) -> tuple[dict[Any, Any], list[Any]]:
    """``n`` small tasks with fresh names (as collections make), in groups of 50."""
    dsk: dict[Any, Any] = {}
    outs = []
    for g in range(max(1, n // 50)):
        token = f"{i + 1_000_000:08x}{g:04x}aa11bb22cc"
        parts = [(f"inc-{token}", j) for j in range(49)]
        for j, key in enumerate(parts):
            dsk[key] = (add, j, 1)
        outs.append((f"total-{token}", 0))
        dsk[outs[-1]] = (sum, parts)
    return dsk, outs


def kernel() -> dict[str, float]:
    gc.collect()
    proc = psutil.Process()
    return {
        "threads": threading.active_count(),
        "fds": proc.num_fds(),
        "rss": proc.memory_info().rss,
        "traced": tracemalloc.get_traced_memory()[0],
    }


def worker() -> dict[str, float]:
    import gc
    import threading

    import psutil

    gc.collect()
    proc = psutil.Process()
    return {
        "threads": threading.active_count(),
        "fds": proc.num_fds(),
        "rss": proc.memory_info().rss,
    }


class Series:
    """Samples of one process: ``x`` computes done, values by name."""

    def __init__(self) -> None:
        self.x: list[int] = []
        self.values: dict[str, list[float]] = {}

    def add(self, x: int, sample: dict[str, float]) -> None:
        self.x.append(x)
        for name, value in sample.items():
            self.values.setdefault(name, []).append(value)

    def report(self, title: str, per_hour: float) -> None:
        if len(self.x) < 3:
            print(f"  {title}: too few samples")
            return
        for name, ys in self.values.items():
            slope = float(np.polyfit(self.x, ys, 1)[0])
            unit = "B" if name in ("rss", "traced") else ""
            print(
                f"  {title:18s} {name:8s} {slope:+12.2f} {unit}/compute "
                f"{slope * per_hour:+14.0f} {unit}/hour   range {min(ys):,.0f}..{max(ys):,.0f}"
            )


def loop(
    seconds: float, every: float, step: Callable[[int], None], sample: Callable[[int], None]
) -> int:
    """``step(i)`` until ``seconds`` pass; ``sample(i)`` every ``every`` seconds."""
    end = time.monotonic() + seconds
    next_sample = time.monotonic()
    i = 0
    while time.monotonic() < end:
        if time.monotonic() >= next_sample:
            sample(i)
            next_sample += every
        step(i)
        i += 1
    sample(i)
    return i


@contextmanager
def panel() -> Iterator[None]:
    """A connected panel: the real comm handlers, a comm that only counts."""

    class Comm:
        comm_id = "bench-soak"
        ends = 0
        close_cb: Any = None

        def send(self, data: dict[str, Any], buffers: Any = None) -> None:
            self.ends += data.get("type") == "run_end"

        def on_msg(self, cb: Any) -> None:
            pass

        def on_close(self, cb: Any) -> None:
            self.close_cb = cb

        def close(self) -> None:
            pass

    comm = Comm()
    meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
    dpcomm._on_open(comm, {"metadata": meta, "content": {"data": {"type": "hello"}}})
    try:
        yield
    finally:
        comm.close_cb({})
        dpcomm.shutdown()


def threads_step(i: int) -> None:
    dsk, outs = graph(i)
    with daskprofile.profile():
        dask.threaded.get(dsk, outs)


def panel_step(i: int) -> None:
    dsk, outs = graph(i)
    dask.threaded.get(dsk, outs)


def run_loop(
    name: str, seconds: float, every: float, step: Callable[[int], None], client: Any = None
) -> None:
    for i in range(30):  # warm: imports, pools, the kept history filled
        step(-1 - i)
    if client is not None:
        client.run(worker)
    own = Series()
    workers: dict[str, Series] = {}

    def sample(i: int) -> None:
        own.add(i, kernel())
        if client is not None:
            for address, values in client.run(worker).items():
                workers.setdefault(address, Series()).add(i, values)

    tracemalloc.start()
    t = time.monotonic()
    try:
        n = loop(seconds, every, step, sample)
    finally:
        tracemalloc.stop()
        history.clear_history()
    elapsed = time.monotonic() - t
    per_hour = n / elapsed * 3600
    print(f"{name}: {n:,} computes in {elapsed:.0f} s ({n / elapsed:.1f}/s)")
    own.report("kernel", per_hour)
    for address, series in workers.items():
        series.report(f"worker {address.rsplit(':', 1)[-1]}", per_hour)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--every", type=float, default=30, help="seconds between samples")
    args = parser.parse_args()
    share = args.minutes * 60 / 3
    print(f"soak, {args.minutes:g} min in 3 loops, slopes by least squares")
    run_loop("profile() blocks, threads scheduler", share, args.every, threads_step)
    with panel():
        run_loop("panel's per-cell recording, threads", share, args.every, panel_step)
    import distributed

    with (
        dask.config.set({"distributed.admin.low-level-log-length": 100}),
        distributed.LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=2, threads_per_worker=2, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,  # type: ignore[no-untyped-call]
    ):

        def cluster_step(i: int) -> None:
            dsk, outs = graph(i, 50)
            with daskprofile.profile(flush=0.05):
                client.get(dsk, outs)

        run_loop("profile() blocks, LocalCluster", share, args.every, cluster_step, client)


if __name__ == "__main__":
    main()
