"""Stack sampler: samples/s per busy thread and slowdown of CPU-bound pure Python.

Side by side, in one process, on the same workload (threads that hold the GIL in a
pure-Python loop, registered as running a task the way the task hook does):

- ``off``: no sampler (the baseline)
- ``daskprofile``: ``StackCollector(interval=0.01)`` (Python's switch interval left alone)
- ``daskprofile,switch=2ms``: the same with ``switch_interval=0.002`` (lowered to 2 ms
  while busy threads keep the sampler waiting for the GIL)
- ``distributed-loop``: the distributed worker's approach, a thread that sleeps
  ``interval`` then feeds each busy thread's frame to ``distributed.profile.process``
- ``distributed.watch``: ``distributed.profile.watch(thread, "10ms", "1s")`` per busy thread

Runs are interleaved in a random order each round; slowdown is the median (and IQR) of
per-round ratios to ``off``. Last, the rate inside a worker process of the processes
scheduler (``ensure_worker_sampler``/``drain_worker_samples``) and its payload size.

    PYTHONPATH=python .venv/bin/python benchmarks/bench_stacks.py [--threads 1 2] [--rounds 7]
"""

from __future__ import annotations

import argparse
import pickle
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from distributed import profile as dprofile

from daskprofile import worker
from daskprofile.collectors.stacks import (
    StackCollector,
    drain_worker_samples,
    ensure_worker_sampler,
)

INTERVAL = 0.01


def hot(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def task(chunks: int) -> None:
    worker.task_started(f"hot-{threading.get_ident()}", "hot")
    try:
        for _ in range(chunks):
            hot(10_000)
    finally:
        worker.task_stopped()


class Sampler:
    """One way of sampling: start() before the threads run, stop() -> samples taken."""

    def start(self, idents: Callable[[], list[int]]) -> None: ...

    def stop(self) -> int:
        return 0


class Ours(Sampler):
    def __init__(self, switch_interval: float | None) -> None:
        self.switch_interval = switch_interval

    def start(self, idents: Callable[[], list[int]]) -> None:
        self.c = StackCollector(INTERVAL, switch_interval=self.switch_interval)
        self.c.start()

    def stop(self) -> int:
        self.c.stop()
        return sum(self.c.samples_by_group().values())


class DistributedLoop(Sampler):
    """What distributed's worker does each interval: sleep, then process() busy frames."""

    def start(self, idents: Callable[[], list[int]]) -> None:
        self.done = threading.Event()
        self.state = dprofile.create()
        self.n = 0
        self.t = threading.Thread(target=self._run)
        self.t.start()

    def _run(self) -> None:
        while not self.done.is_set():
            time.sleep(INTERVAL)
            frames = sys._current_frames()
            for ident in worker.snapshot():
                frame = frames.get(ident)
                if frame is not None:
                    dprofile.process(frame, None, self.state)
                    self.n += 1
            del frames

    def stop(self) -> int:
        self.done.set()
        self.t.join()
        return self.n


class DistributedWatch(Sampler):
    def start(self, idents: Callable[[], list[int]]) -> None:
        self.done = False
        self.logs = []
        for ident in idents():
            log = dprofile.watch(ident, "10ms", "1s", maxlen=1000, stop=lambda: self.done)
            self.logs.append(log)

    def stop(self) -> int:
        self.done = True
        time.sleep(2 * INTERVAL)  # watch threads notice stop() on their next wake-up
        return sum(state["count"] for log in self.logs for _, state in log)


def run_once(sampler: Sampler | None, nthreads: int, chunks: int) -> tuple[float, int]:
    go = threading.Event()

    def body() -> None:
        go.wait()
        task(chunks)

    threads = [threading.Thread(target=body) for _ in range(nthreads)]
    for t in threads:
        t.start()
    if sampler is not None:
        sampler.start(lambda: [t.ident for t in threads if t.ident is not None])
    t0 = time.perf_counter()
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    samples = sampler.stop() if sampler is not None else 0
    return elapsed, samples


CONFIGS: dict[str, Callable[[], Sampler | None]] = {
    "off": lambda: None,
    "daskprofile": lambda: Ours(None),  # the default: switch interval left alone
    "daskprofile,switch=2ms": lambda: Ours(0.002),  # lowered while samples come late
    "distributed-loop": DistributedLoop,
    "distributed.watch": DistributedWatch,
}


def bench(nthreads: int, rounds: int, seconds: float) -> list[dict[str, Any]]:
    # calibrate: chunks so that one thread alone runs ~`seconds`
    t0 = time.perf_counter()
    hot(10_000)
    chunk = time.perf_counter() - t0
    chunks = max(10, int(seconds / chunk / nthreads))
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in CONFIGS}
    rng = random.Random(0)
    for _ in range(rounds):  # a random order each round: drifts and order effects cancel
        for name in rng.sample(list(CONFIGS), len(CONFIGS)):
            results[name].append(run_once(CONFIGS[name](), nthreads, chunks))
    base = results["off"]
    rows = []
    for name, runs in results.items():
        ratios = sorted(e / b for (e, _), (b, _) in zip(runs, base, strict=True))
        rates = [n / nthreads / e for e, n in runs]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        rows.append(
            {
                "sampler": name,
                "threads": nthreads,
                "wall_s": statistics.median(e for e, _ in runs),
                "slowdown_pct": 100 * (statistics.median(ratios) - 1),
                "slowdown_iqr": (100 * (q1 - 1), 100 * (q3 - 1)),
                "samples_per_s_per_thread": statistics.median(rates),
            }
        )
    return rows


def worker_process_task(seconds: float) -> tuple[float, Any]:
    """In a worker process, as the task hook does: ensure a sampler, run, drain."""
    ensure_worker_sampler(INTERVAL, 1.0)
    t0 = time.perf_counter()
    end = t0 + seconds
    worker.task_started("hot-1", "hot")
    try:
        while time.perf_counter() < end:
            hot(10_000)
    finally:
        worker.task_stopped()
    return time.perf_counter() - t0, drain_worker_samples()


def bench_worker_process(seconds: float = 1.0, rounds: int = 3) -> tuple[float, int]:
    """(samples/s of the task in a worker process, pickled payload bytes of a later task)."""
    rates, size = [], 0
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        pool.submit(worker_process_task, 0.1).result()  # warm up: frames sent once
        for _ in range(rounds):
            elapsed, payload = pool.submit(worker_process_task, seconds).result()
            n = sum(c for _, groups in payload["buckets"] for st in groups.values() for _, c in st)
            rates.append(n / elapsed)
            size = len(pickle.dumps(payload))
    return statistics.median(rates), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--only", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    args = parser.parse_args()
    for name in set(CONFIGS) - {"off", *args.only}:
        del CONFIGS[name]
    print(f"python {sys.version.split()[0]}, switch interval {sys.getswitchinterval()}s")
    print(
        f"{'sampler':24} {'threads':>7} {'wall s':>8} {'slowdown':>9} {'(IQR)':>15} "
        f"{'samples/s/thread':>17}"
    )
    for n in args.threads:
        for row in bench(n, args.rounds, args.seconds):
            print(
                f"{row['sampler']:24} {row['threads']:>7} {row['wall_s']:>8.3f} "
                f"{row['slowdown_pct']:>8.1f}% "
                f"{'({:+.1f}, {:+.1f})'.format(*row['slowdown_iqr']):>15} "
                f"{row['samples_per_s_per_thread']:>17.1f}"
            )
    rate, size = bench_worker_process()
    print(
        f"\nprocesses scheduler, task in a worker process: {rate:.1f} samples/s; "
        f"payload of a later 1 s task: {size} bytes pickled"
    )


if __name__ == "__main__":
    main()
