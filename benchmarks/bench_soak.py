"""Soak: small profiled computes for a while; slopes of memory, threads and fds.

    PYTHONPATH=python python benchmarks/bench_soak.py [--minutes 60] [--every 30]

Five loops share the time equally: ``profile()`` blocks on the threads scheduler, the same
computes recorded by the panel's per-cell recorder (a connected panel's comm handlers and
a comm that counts what it is sent), their bare twin (the same computes with no
daskprofile), ``profile()`` blocks on a ``LocalCluster`` of 2 worker processes, and its
bare twin: the same computes on a fresh cluster of the same kind with no daskprofile.
Each loop samples every ``--every`` seconds the kernel's threads, fds, RSS, traced memory
(``tracemalloc``), pymalloc's blocks in use (``sys.getallocatedblocks()``) and objects
tracked by the gc, and the workers' threads, fds and RSS (``client.run``), then prints
each series' least-squares slope per compute and per hour beside its range, and for RSS
and blocks also the slope over the second half of the samples (growth that stops is
warm-up, not a leak). A slope that is not ~0 is growth; Python and dask keep caches and
distributed bounded histories of their own (the scheduler runs in the kernel), so what
counts is each profiled loop's slope minus its bare twin's, printed last. The CI version
is ``tests/reliability/test_load.py``.

``--trim`` calls glibc's ``malloc_trim(0)`` before each kernel RSS sample, so that RSS
counts memory in use rather than free memory the allocator kept; each loop's end prints
the RSS before and after one such trim either way.

Each loop runs in a fresh Python process of its own: RSS does not come down after a loop,
and process-wide caches (dask's ``key_split``, 100,000 keys) fill once, so loops run one
after the other in one process would not compare. ``--loops`` picks loops (the local
loops' bare twin runs with either). Every loop is traced alike, since tracemalloc's own
tables cost untraced memory; ``--no-trace`` leaves tracemalloc off (no traced series, no
``--lines``), so RSS has none of it.

``--lines N``: where the kernel's traced memory grows, by line (tracemalloc snapshots
half-way through each loop and at its end, compared by line: bytes per compute), the N
lines that grow most, and for the cluster the N that grow most more than in its bare twin.
``--rate R`` holds every loop to at most R computes a second: a profiled loop is slower
than its bare twin, so unpaced it makes fewer computes in the same time, and what grows
with time rather than with computes (distributed's time-bound histories) then reads as
more per compute; paced, both make the same computes in the same time. ``--log-length N``
sets ``distributed.admin.log-length`` (records each scheduler and worker keeps of its log,
10,000 by default) in every process the loops start.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import itertools
import os
import pickle
import re
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


#: ``--trim``: glibc's ``malloc_trim(0)`` before each RSS sample of the kernel (RSS then
#: counts memory in use, not free memory the allocator kept)
TRIM = False
#: ``--no-trace`` clears it: tracemalloc on during every loop
TRACE = True
#: ``--rate``: computes per second at most in each loop (0: as fast as they go)
RATE = 0.0
#: series whose slope over the second half of the samples is printed too
HALVES = ("rss", "blocks")


def kernel() -> dict[str, float]:
    gc.collect()
    if TRIM:
        malloc_trim()
    proc = psutil.Process()
    out: dict[str, float] = {
        "threads": threading.active_count(),
        "fds": proc.num_fds(),
        "rss": proc.memory_info().rss,
        "blocks": sys.getallocatedblocks(),
        "objects": len(gc.get_objects()),
    }
    if TRACE:
        out["traced"] = tracemalloc.get_traced_memory()[0]
    return out


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

    def slope(self, name: str, half: bool = False) -> float:
        """Least-squares growth of ``name`` per compute, over the second half of the samples
        if ``half`` (nan with fewer than 3 samples)."""
        start = len(self.x) // 2 if half else 0
        if len(self.x) - start < 3:
            return float("nan")
        return float(np.polyfit(self.x[start:], self.values[name][start:], 1)[0])

    def report(self, title: str, per_hour: float) -> None:
        if len(self.x) < 3:
            print(f"  {title}: too few samples")
            return
        for name, ys in self.values.items():
            slope = self.slope(name)
            unit = "B" if name in ("rss", "traced") else ""
            half = f"  2nd half {self.slope(name, True):+10.2f}" if name in HALVES else ""
            print(
                f"  {title:18s} {name:8s} {slope:+12.2f} {unit}/compute "
                f"{slope * per_hour:+14.0f} {unit}/hour   range {min(ys):,.0f}..{max(ys):,.0f}"
                + half
            )


@dataclass
class Soak:
    """What one loop measured: the kernel's series, each worker's (by address), the rate;
    with ``--lines``, the kernel's growth by line (bytes per compute)."""

    kernel: Series
    workers: list[Series]
    per_hour: float
    lines: dict[str, float]


#: tracemalloc's and this file's own allocations (samples, sizes by line) are not the loop's
_NOT_OURS = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]


class Lines:
    """Tracemalloc snapshots half-way through a loop and at its end: growth by line. Only
    each snapshot's bytes by line are kept: a snapshot held from half-way on (its traces,
    MBs of tuples) would be growth of the loop's RSS."""

    def __init__(self, seconds: float) -> None:
        self.half = time.monotonic() + seconds / 2
        self.snaps: list[tuple[int, dict[str, int]]] = []

    def sample(self, i: int, last: bool = False) -> None:
        if last or (not self.snaps and time.monotonic() >= self.half):
            snap = tracemalloc.take_snapshot().filter_traces(_NOT_OURS)
            sizes: dict[str, int] = {}
            for stat in snap.statistics("lineno"):
                frame = stat.traceback[0]
                name = f"{_short(frame.filename)}:{frame.lineno}"
                sizes[name] = sizes.get(name, 0) + stat.size
            self.snaps.append((i, sizes))

    def growth(self) -> dict[str, float]:
        """Bytes per compute by ``file:line`` between the two snapshots."""
        if len(self.snaps) < 2 or self.snaps[-1][0] <= self.snaps[0][0]:
            return {}
        (i0, old), (i1, new) = self.snaps[0], self.snaps[-1]
        return {k: (new.get(k, 0) - old.get(k, 0)) / (i1 - i0) for k in new.keys() | old.keys()}


def _short(filename: str) -> str:
    """``filename`` from its package on (the standard library's, site-packages', ours)."""
    for marker in ("site-packages/", "/python/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return re.sub(r".*/lib/python3\.\d+/", "", filename)


def print_lines(title: str, growth: dict[str, float], n: int) -> None:
    if not n or not growth:
        return
    print(f"  {title}: the {n} lines that grow most (traced B/compute)")
    for name, per in sorted(growth.items(), key=lambda kv: -kv[1])[:n]:
        print(f"    {per:+10.1f}  {name}")


def loop(
    seconds: float, every: float, step: Callable[[int], None], sample: Callable[[int], None]
) -> int:
    """``step(i)`` until ``seconds`` pass; ``sample(i)`` every ``every`` seconds; at most
    :data:`RATE` steps a second if set (the loop waits between steps to hold that pace)."""
    start = time.monotonic()
    end = start + seconds
    next_sample = start
    i = 0
    while time.monotonic() < end:
        if time.monotonic() >= next_sample:
            sample(i)
            next_sample += every
        step(i)
        i += 1
        if RATE:
            wait = start + i / RATE - time.monotonic()
            if wait > 0:
                time.sleep(wait)
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


def panel_ring() -> Any:
    """The ring buffer of the connected panel's shared resource sampler (None if off)."""
    hub = dpcomm.hub()
    session = getattr(hub, "session", None)
    sampler = getattr(getattr(session, "samplers", None), "resources", None)
    return getattr(sampler, "_ring", None)


def threads_step(i: int) -> None:
    dsk, outs = graph(i)
    with daskprofile.profile():
        dask.threaded.get(dsk, outs)


def bare_step(i: int) -> None:
    """A compute with no daskprofile (the panel records it if one is connected)."""
    dsk, outs = graph(i)
    dask.threaded.get(dsk, outs)


def malloc_trim() -> tuple[int, int] | None:
    """The kernel's RSS before and after glibc's ``malloc_trim(0)`` (None: not glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    gc.collect()
    proc = psutil.Process()
    before = proc.memory_info().rss
    libc.malloc_trim(0)
    return before, proc.memory_info().rss


def run_loop(
    name: str,
    seconds: float,
    every: float,
    step: Callable[[int], None],
    client: Any = None,
    lines: int = 0,
) -> Soak:
    own = Series()
    workers: dict[str, Series] = {}
    by_line = Lines(seconds)

    def sample(i: int) -> None:
        own.add(i, kernel())
        if lines and TRACE:
            by_line.sample(i)
        if client is not None:
            for address, values in client.run(worker).items():
                workers.setdefault(address, Series()).add(i, values)

    # traced from before the warm-up: the kept history fills with runs whose memory is
    # traced (runs made before tracing, replaced during the soak, would look like growth:
    # their frees are not seen, their successors' allocations are)
    if TRACE:
        tracemalloc.start()
    try:
        for i in range(30):  # warm: imports, pools, the kept history filled
            step(-1 - i)
        if client is not None:
            client.run(worker)
        t = time.monotonic()
        by_line.half = t + seconds / 2
        n = loop(seconds, every, step, sample)
        if lines and TRACE:
            by_line.sample(n, last=True)
    finally:
        tracemalloc.stop()
        history.clear_history()
    elapsed = time.monotonic() - t
    per_hour = n / elapsed * 3600
    print(f"{name}: {n:,} computes in {elapsed:.0f} s ({n / elapsed:.1f}/s)")
    trimmed = malloc_trim()
    if trimmed is not None:  # RSS growth that is free memory the allocator kept
        before, after = trimmed
        print(f"  kernel RSS {before / 2**20:,.1f} MiB, {after / 2**20:,.1f} MiB after malloc_trim")
    own.report("kernel", per_hour)
    for address, series in workers.items():
        series.report(f"worker {address.rsplit(':', 1)[-1]}", per_hour)
    growth = by_line.growth()
    print_lines("kernel", growth, lines)
    return Soak(own, [workers[a] for a in sorted(workers)], per_hour, growth)


def report_twin(title: str, ours: Soak, bare: Soak, lines: int = 0) -> None:
    """Per compute, the profiled loop's slopes minus its bare twin's, over all samples and
    (``2nd``) their second half (workers paired in address order; per hour at the
    profiled loop's rate)."""
    print(f"{title} minus bare (slopes per compute):")
    series = ["traced", "rss", "blocks"] if TRACE else ["rss", "blocks"]
    rows = [("kernel", name, ours.kernel, bare.kernel) for name in series]
    pairs = enumerate(zip(ours.workers, bare.workers, strict=True))
    rows += [(f"worker {j}", "rss", o, b) for j, (o, b) in pairs]
    for (who, name, o, b), half in itertools.product(rows, (False, True)):
        if half and name not in HALVES:
            continue
        mine, theirs = o.slope(name, half), b.slope(name, half)
        extra = mine - theirs
        print(
            f"  {who:10s} {name:6s} {'2nd' if half else 'all'} ours {mine:+10.0f}  "
            f"bare {theirs:+10.0f}  ours-bare {extra:+10.0f} /compute "
            f"{extra * ours.per_hour:+14.0f} /hour"
        )
    names = set(ours.lines) | set(bare.lines)
    extra_lines = {k: ours.lines.get(k, 0.0) - bare.lines.get(k, 0.0) for k in names}
    print_lines("kernel, ours minus bare", extra_lines, lines)


@contextmanager
def local_cluster() -> Iterator[Any]:
    """A ``LocalCluster`` of 2 worker processes (its logs kept short) and its client."""
    import distributed

    with (
        dask.config.set({"distributed.admin.low-level-log-length": 100}),
        distributed.LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=2, threads_per_worker=2, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,  # type: ignore[no-untyped-call]
    ):
        yield client


def local_twin(twin: str, seconds: float, every: float, lines: int) -> Soak:
    """One loop on the threads scheduler: ``profile()`` blocks (``threads``), the panel's
    per-cell recording (``panel``) or the same computes bare (``local-bare``)."""
    if twin == "threads":
        title = "profile() blocks, threads scheduler"
        return run_loop(title, seconds, every, threads_step, lines=lines)
    if twin == "local-bare":
        return run_loop("bare twin, threads scheduler", seconds, every, bare_step, lines=lines)
    with panel():
        title = "panel's per-cell recording, threads"
        soak = run_loop(title, seconds, every, bare_step, lines=lines)
        ring = panel_ring()
        if ring is not None:  # the shared resource sampler forgets what no run reads
            print(f"  shared resource sampler: {len(ring):,} samples held of {ring.total:,}")
        return soak


def cluster_twin(twin: str, seconds: float, every: float, lines: int) -> Soak:
    """One LocalCluster loop: ``profile()`` blocks (``ours``) or the same computes bare."""
    with local_cluster() as client:

        def step(i: int) -> None:
            dsk, outs = graph(i, 50)
            if twin == "ours":
                with daskprofile.profile(flush=0.05):
                    client.get(dsk, outs)
            else:
                client.get(dsk, outs)

        title = "profile() blocks, LocalCluster" if twin == "ours" else "bare twin, LocalCluster"
        return run_loop(title, seconds, every, step, client, lines)


def twin_in_a_process(twin: str, seconds: float, every: float, lines: int) -> Soak:
    """:func:`local_twin` or :func:`cluster_twin` in a fresh Python process: each loop
    starts from the same empty process (RSS does not come down after a loop, and caches
    fill once per process), so their slopes compare."""
    sys.stdout.flush()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "soak.pickle"
        args = [sys.executable, __file__, "--twin", twin, "--out", str(out)]
        args += ["--trim"] if TRIM else []
        args += [] if TRACE else ["--no-trace"]
        args += ["--rate", str(RATE)] if RATE else []
        args += ["--seconds", str(seconds), "--every", str(every), "--lines", str(lines)]
        subprocess.run(args, check=True)
        soak: Soak = pickle.loads(out.read_bytes())
        return soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--every", type=float, default=30, help="seconds between samples")
    parser.add_argument(
        "--lines", type=int, default=0, help="print the N lines whose traced memory grows most"
    )
    parser.add_argument(
        "--loops", default="threads,panel,cluster", help="comma-separated: threads,panel,cluster"
    )
    parser.add_argument(
        "--trim", action="store_true", help="malloc_trim(0) before each kernel RSS sample"
    )
    parser.add_argument(
        "--no-trace", action="store_true", help="tracemalloc off (RSS without its tables)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="computes per second at most in every loop (the same computes in the same "
        "time in a loop and its twin: slopes per compute and per second then agree)",
    )
    parser.add_argument(
        "--log-length",
        type=int,
        help="distributed.admin.log-length for the clusters (the scheduler's and workers' "
        "kept log records; distributed's default 10,000)",
    )
    # one loop, in this process (how the main process runs each)
    twins = ["threads", "panel", "local-bare", "ours", "bare"]
    parser.add_argument("--twin", choices=twins, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.lines
    global TRIM, TRACE, RATE
    TRIM, TRACE, RATE = args.trim, not args.no_trace, args.rate
    if RATE < 0:
        parser.error("--rate: must be >= 0")
    if args.log_length is not None:  # read by every process the loops start
        if args.log_length < 0:
            parser.error("--log-length: must be >= 0")
        os.environ["DASK_DISTRIBUTED__ADMIN__LOG_LENGTH"] = str(args.log_length)
    if n and not TRACE:
        parser.error("--lines needs tracemalloc: not with --no-trace")
    if args.twin:
        run = cluster_twin if args.twin in ("ours", "bare") else local_twin
        soak = run(args.twin, args.seconds, args.every, n)
        Path(args.out).write_bytes(pickle.dumps(soak))
        return
    loops = [name for name in args.loops.split(",") if name]
    unknown = set(loops) - {"threads", "panel", "cluster"}
    if unknown:
        parser.error(f"--loops: unknown {sorted(unknown)}")
    local = [name for name in loops if name != "cluster"]
    parts = len(loops) + bool(local) + ("cluster" in loops)
    share = args.minutes * 60 / parts
    print(f"soak, {args.minutes:g} min in {parts} loops, slopes by least squares")
    if local:
        soaks = {name: twin_in_a_process(name, share, args.every, n) for name in local}
        bare = twin_in_a_process("local-bare", share, args.every, n)
        titles = {"threads": "threads, profile()", "panel": "threads, the panel's recording"}
        for name, soak in soaks.items():
            report_twin(titles[name], soak, bare, n)
    if "cluster" in loops:
        ours = twin_in_a_process("ours", share, args.every, n)
        bare = twin_in_a_process("bare", share, args.every, n)
        report_twin("LocalCluster, profile()", ours, bare, n)


if __name__ == "__main__":
    main()
