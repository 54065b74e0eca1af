"""Worker-side times land on the kernel's clock, also from a worker whose clock is off.

A scheduler (``dask scheduler``) and two workers, separate processes on 127.0.0.1: one as
``dask worker`` runs it, one as ``dask worker`` would run on another machine whose wall
clock is ``SKEW`` seconds ahead (its ``time.time`` and host name differ; the process is
otherwise the same command's entry point). The truth is the monotonic clock, which every
process of this machine shares: tasks read it themselves, and the recorded times, aligned
with the offset estimated per worker, must match it within 20 ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

import daskprofile  # noqa: E402

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SKEW = 3.0  # seconds the far worker's wall clock is ahead
STARTUP = 60.0
TOLERANCE = 0.020  # seconds, the bound
#: ``dask worker`` as it runs on a machine whose wall clock is ``SKEW`` s ahead
FAR_WORKER = (
    "import socket, sys, time\n"
    "_wall = time.time\n"
    f"time.time = lambda: _wall() + {SKEW!r}\n"
    "socket.gethostname = lambda: 'far-away'\n"
    "from distributed.cli.dask_worker import main\n"
    "sys.argv[0] = 'dask-worker'\n"
    "main()\n"
)


def _stamp() -> Any:
    """A task function pickled by value (the cluster cannot import this test module)."""

    def stamp(seconds: float) -> tuple[float, float]:
        """Sleep; the monotonic clock (shared by this machine's processes) around it."""
        start = time.perf_counter()
        time.sleep(seconds)
        return start, time.perf_counter()

    return stamp


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Any, str, str]]:
    """(client, near worker address, far worker address)."""
    info = tmp_path / "scheduler.json"
    common = ["--scheduler-file", str(info), "--host", "127.0.0.1", "--nthreads", "1"]
    common += ["--no-nanny", "--no-dashboard"]
    logs: list[Path] = []
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(cmd: list[str], name: str) -> None:
        log = tmp_path / f"{name}.log"
        logs.append(log)
        with open(log, "wb") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT))

    dask = str(BIN / "dask")
    spawn([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
           "--scheduler-file", str(info)], "scheduler")  # fmt: skip
    try:
        address = _wait(lambda: _address(info), procs, logs)
        spawn([dask, "worker", *common, "--name", "near"], "near")
        spawn([sys.executable, "-c", FAR_WORKER, *common, "--name", "far"], "far")
        with distributed.Client(address, timeout=STARTUP, set_as_default=False) as client:
            _wait(lambda: len(client.scheduler_info()["workers"]) == 2, procs, logs)
            names = {w["name"]: a for a, w in client.scheduler_info()["workers"].items()}
            far_clock = client.run(time.time, workers=[names["far"]])[names["far"]]
            assert far_clock - time.time() > SKEW - 0.5  # the far worker's clock is off
            # distributed's estimate of the far clock comes with the first heartbeats
            time.sleep(1.5)
            yield client, names["near"], names["far"]
    finally:  # workers first: one told to close by a signal and its scheduler can hang
        _stop(procs[1:])
        _stop(procs[:1])


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _address(info: Path) -> str | None:
    try:
        return str(json.loads(info.read_text())["address"])
    except (OSError, ValueError, KeyError):
        return None


def _wait(found: Any, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> Any:
    deadline = time.monotonic() + STARTUP
    while True:
        value = found()
        if value:
            return value
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            tails = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in logs)
            pytest.fail(f"the cluster did not come up\n{tails}")
        time.sleep(0.05)


def test_times_from_a_worker_with_another_clock_are_aligned_to_the_kernels(
    cluster: tuple[Any, str, str],
) -> None:
    client, near, far = cluster
    stamp = _stamp()
    with daskprofile.profile(client=client) as run:
        futures = [
            client.submit(stamp, 0.15, workers=[w], pure=False, key=f"stamp-{w[-5:]}-{i}")
            for i in range(4)
            for w in (near, far)
        ]
        truth = dict(zip((f.key for f in futures), client.gather(futures), strict=True))
    t0 = run.meta.t0
    tasks = run.tasks.set_index("key")
    assert set(tasks.index) == set(truth)
    workers = tasks["worker"].str.rsplit(" thread ", n=1).str[0]
    assert set(workers) == {near, far}
    for key, (start, stop) in truth.items():
        row = tasks.loc[key]
        assert abs(row["start"] - (start - t0)) < TOLERANCE, (key, row["start"], start - t0)
        assert abs(row["stop"] - (stop - t0)) < TOLERANCE, (key, row["stop"], stop - t0)
    # the offsets estimated per worker are kept in the run (and saved with it)
    # and what ran it there
    workers = run.meta.distributed["workers"]
    assert workers[far]["versions"]["distributed"] == distributed.__version__
    assert workers[near]["versions"]["python"] == run.meta.versions["python"]
    clocks = run.meta.distributed["clocks"]
    assert clocks[near] == 0.0  # the kernel's host: one clock
    assert abs(clocks[far] + SKEW) < TOLERANCE
    # the far worker's process samples (CPU, memory) lie within the run, not 3 s after it
    processes = run.meta.distributed["processes"]
    (far_process,) = [p for p in processes if far in p["workers"]]
    duration = run.meta.t1 - t0
    assert far_process["time"]
    assert all(-0.5 < t < duration + 0.5 for t in far_process["time"])
