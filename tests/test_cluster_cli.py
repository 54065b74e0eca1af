"""A real cluster in separate processes (``dask scheduler`` + two ``dask worker``), profiled
from a script run by ``daskprofile run`` and from ``performance_report`` in this process.

The cluster is started per test: the suite's leak check (conftest) fails a test that leaves
any child process, and a cluster shared across tests would be one. It takes ~1-2 s to start.
Workers run without a nanny: each worker is one process whose pid we know.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

import daskprofile  # noqa: E402
from daskprofile.stacktree import to_folded_lines  # noqa: E402

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
NTHREADS = 2
MEMORY_LIMIT = 1 << 30  # --memory-limit 1GiB
#: prefixes of the names of what daskprofile leaves on a cluster (plugins, topics, threads)
OURS = "daskprofile"
STARTUP = 60.0  # seconds for the cluster to come up (slow CI)
WARNING = "daskprofile: warning:"  # what the CLI prints for each of run.meta["errors"]
NOT_RECORDED = " ".join(["its cluster could not", "be recorded"])  # (not in this file's code)


# ---------------------------------------------------------------- the cluster
@dataclass
class Cluster:
    address: str
    client: Any  # this process's client (checks only; the scripts make their own)
    workers: dict[str, int] = field(default_factory=dict)  # worker address -> pid

    def leftovers(self) -> dict[str, Any]:
        """daskprofile's plugins, topics and threads still on the cluster."""

        def on_scheduler(dask_scheduler: Any) -> dict[str, list[str]]:
            topics = getattr(getattr(dask_scheduler, "_broker", None), "_topics", {})
            return {
                "plugins": sorted(n for n in dask_scheduler.plugins if n.startswith(OURS)),
                "worker_plugins": sorted(
                    n for n in dask_scheduler.worker_plugins if n.startswith(OURS)
                ),
                "topics": sorted(t for t in topics if str(t).startswith(OURS)),
            }

        def on_worker(dask_worker: Any) -> dict[str, list[str]]:
            import threading

            return {
                "plugins": sorted(n for n in dask_worker.plugins if n.startswith(OURS)),
                "threads": sorted(t.name for t in threading.enumerate() if t.name.startswith(OURS)),
            }

        return {
            "scheduler": self.client.run_on_scheduler(on_scheduler),
            "workers": self.client.run(on_worker),
        }

    def settled_leftovers(self, timeout: float = 5.0) -> dict[str, Any]:
        """:meth:`leftovers` once empty (threads end within ms of their plugin), or last."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.leftovers()
            if _empty(found) or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


def _empty(found: Any) -> bool:
    if isinstance(found, dict):
        return all(_empty(v) for v in found.values())
    return not found


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate and wait; kill what does not end. (Workers must go before the scheduler: a
    worker told to close by both SIGTERM and its closing scheduler can hang.)"""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A scheduler and two workers (2 threads each) as separate processes on 127.0.0.1, on
    ports the system picks (the address comes through a scheduler file: no port race)."""
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    info = tmp_path / "scheduler.json"
    dask = str(BIN / "dask")
    with ExitStack() as stack:
        scheduler: list[subprocess.Popen[bytes]] = []
        workers: list[subprocess.Popen[bytes]] = []
        stack.callback(_stop, scheduler)  # runs last
        stack.callback(_stop, workers)  # runs first
        scheduler.append(
            _spawn(
                [dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                 "--scheduler-file", str(info)],
                logs / "scheduler.log",
            )
        )  # fmt: skip
        for i in range(2):
            workers.append(
                _spawn(
                    [dask, "worker", "--scheduler-file", str(info), "--host", "127.0.0.1",
                     "--nthreads", str(NTHREADS), "--memory-limit", "1GiB",
                     "--no-dashboard", "--no-nanny", "--name", f"w{i}"],
                    logs / f"worker-{i}.log",
                )
            )  # fmt: skip
        everything = [*scheduler, *workers]
        address = _wait_for(lambda: _address(info), everything, logs, "scheduler address")
        client = stack.enter_context(
            distributed.Client(address, timeout=STARTUP, set_as_default=False)
        )
        _wait_for(
            lambda: len(client.scheduler_info()["workers"]) == 2, everything, logs, "2 workers"
        )
        pids = {proc.pid for proc in workers}
        got = {addr: int(pid) for addr, pid in client.run(os.getpid).items()}
        assert set(got.values()) == pids, (got, pids)
        yield Cluster(address, client, got)
        # the exit stack closes the client, then stops the workers, then the scheduler


def _address(info: Path) -> str | None:
    try:
        return str(json.loads(info.read_text())["address"])
    except (OSError, ValueError, KeyError):
        return None  # not written yet, or half written


def _wait_for(found: Any, procs: list[subprocess.Popen[bytes]], logs: Path, what: str) -> Any:
    """``found()`` once true; fails at once with the logs if a process exits first."""
    deadline = time.monotonic() + STARTUP
    while True:
        value = found()
        if value:
            return value
        exited = [" ".join(map(str, p.args[:2])) for p in procs if p.poll() is not None]
        if exited or time.monotonic() > deadline:
            tails = "\n".join(f"--- {f.name}\n{f.read_text()[-2000:]}" for f in logs.iterdir())
            pytest.fail(f"no {what}: {exited or 'timed out'}\n{tails}")
        time.sleep(0.05)


def _spawn(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def _cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "daskprofile"), *args]
    return subprocess.run(
        cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


# ---------------------------------------------------------------- the script
SCRIPT = '''
"""Makes its own client on the cluster at argv[1]; writes what it computed to argv[2]."""
import json
import sys
import time

import dask.array as da
from dask._expr import FinalizeCompute
from dask.base import collections_to_expr
from distributed import Client


def burn_a_little(x):
    """Pure-Python work, so the workers' stack samplers see this function."""
    t = time.perf_counter()
    while time.perf_counter() - t < 0.05:
        pass
    return x * x


def graph_size(collection):
    """Tasks of the graph ``collection.compute()`` sends (as dask.compute builds it)."""
    expr = FinalizeCompute(collections_to_expr([collection], True)).optimize()
    return len(expr.__dask_graph__())


if __name__ == "__main__":
    address, out = sys.argv[1], sys.argv[2]
    client = Client(address)
    squares = client.gather(client.map(burn_a_little, range(N_MAP)))
    total = da.ones((400, 400), chunks=100).sum()
    size = graph_size(total)
    value = float(total.compute())
    client.close()  # at once: the last tasks finished a moment ago
    with open(out, "w") as f:
        json.dump({"squares": sum(squares), "sum": value, "array_tasks": size}, f)
'''
N_MAP = 20


def _script(tmp_path: Path, text: str = SCRIPT, **values: Any) -> Path:
    path = tmp_path / "job.py"
    body = textwrap.dedent(text)
    for name, value in {"N_MAP": N_MAP, **values}.items():
        body = body.replace(name, repr(value))
    path.write_text(body)
    return path


def _within(run: Any, column: str, slack: float = 0.01) -> bool:
    span = float(run.meta["t1"]) - float(run.meta["t0"])
    values = run.tasks[column]
    return bool(values.min() >= -slack and values.max() <= span + slack)


# ---------------------------------------------------------------- tests
def test_cli_run_of_a_script_with_its_own_client(cluster: Cluster, tmp_path: Path) -> None:
    script = _script(tmp_path)
    out = _cli(
        "run", str(script), cluster.address, "computed.json",
        "--save", "run.npz", "-o", "report.html", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert WARNING not in out.stderr
    computed = json.loads((tmp_path / "computed.json").read_text())
    assert computed["squares"] == sum(i * i for i in range(N_MAP))
    assert computed["sum"] == 400 * 400

    run = daskprofile.load(tmp_path / "run.npz")
    tasks = run.tasks
    # every task of both graphs, each once, timed on the two workers' threads
    per_compute = sorted(tasks.groupby("compute").size().tolist())
    assert per_compute == sorted([N_MAP, computed["array_tasks"]]), tasks.groupby("group").size()
    assert (tasks.groupby("group").size()["burn_a_little"]) == N_MAP
    assert not tasks["key"].duplicated().any()
    assert (tasks["status"] == "ok").all()
    labels = set(tasks["worker"])
    expected_labels = {f"{a} thread {n}" for a in cluster.workers for n in range(NTHREADS)}
    assert labels <= expected_labels, labels
    assert {label.rsplit(" thread ", 1)[0] for label in labels} == set(cluster.workers)
    assert (tasks["start"] <= tasks["stop"]).all()
    assert (tasks["submit"] <= tasks["start"] + 0.05).all()  # one host: one clock
    assert _within(run, "start"), (tasks["start"].min(), run.meta["t1"] - run.meta["t0"])
    assert _within(run, "stop"), (tasks["stop"].max(), run.meta["t1"] - run.meta["t0"])
    assert run.meta["computes"] == 2
    assert run.meta["schedulers"] == ["distributed"]
    assert run.meta["errors"] == []

    # the cluster as it was: both workers, their processes' resources
    info = run.meta["distributed"]
    assert info["scheduler"] == cluster.address
    assert set(info["workers"]) == set(cluster.workers)
    for address, worker in info["workers"].items():
        assert worker["nthreads"] == NTHREADS
        assert worker["memory_limit"] == MEMORY_LIMIT
        assert worker["pid"] == cluster.workers[address]
    processes = {p["pid"]: p for p in info["processes"]}
    assert set(processes) == set(cluster.workers.values())
    for proc in processes.values():
        assert len(proc["time"]) == len(proc["cpu"]) == len(proc["memory"]) >= 2
        assert min(proc["memory"]) > 10_000_000
    # run.resources are the worker processes' (summed), not the script's own process
    resources = run.resources
    assert len(resources) >= 2
    assert resources["processes"].max() == 2, resources
    assert resources["memory"].max() <= sum(max(p["memory"]) for p in processes.values())

    # the workers' stack samples, with the script's own function innermost
    folded = to_folded_lines(run.stacks)
    mine = [line for line in folded if line.startswith("burn_a_little;")]
    assert mine, folded
    # the few others caught the thread after the function returned, in distributed measuring
    # the result (``sizeof``): dask's frames, never the workers' own plumbing above the task
    counts = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in mine}
    inside = sum(
        n for path, n in counts.items() if path.split(";")[-1].startswith("burn_a_little (")
    )
    assert inside >= 0.8 * sum(counts.values()), mine
    for path in counts:
        frames = path.split(";")[1:]
        if not frames[-1].startswith("burn_a_little ("):
            assert all("/dask/" in frame for frame in frames), path

    # the report names the groups, the workers and the script
    page = (tmp_path / "report.html").read_text()
    assert "<html" in page
    for name in [*set(tasks["group"]), *cluster.workers, "job.py"]:
        assert name in page, name

    # the script's client is gone; nothing of daskprofile stays on the cluster
    assert cluster.settled_leftovers() == _nothing(cluster)


def _nothing(cluster: Cluster) -> dict[str, Any]:
    return {
        "scheduler": {"plugins": [], "worker_plugins": [], "topics": []},
        "workers": {a: {"plugins": [], "threads": []} for a in cluster.workers},
    }


def test_performance_report_in_process_on_the_external_cluster(
    cluster: Cluster, tmp_path: Path
) -> None:
    import dask.array as da

    target = tmp_path / "dask-report.html"
    with (
        distributed.Client(cluster.address),  # the default client
        daskprofile.performance_report(filename=target) as report,
    ):
        total = da.arange(10_000, chunks=1_000).sum()
        assert int(total.compute()) == sum(range(10_000))
    run = report.run
    assert "distributed" in run.meta["schedulers"]
    assert run.meta["errors"] == []
    tasks = run.tasks
    assert len(tasks) > 10
    addresses = {label.rsplit(" thread ", 1)[0] for label in tasks["worker"]}
    assert addresses
    assert addresses <= set(cluster.workers)
    page = target.read_text()
    assert "<html" in page
    assert NOT_RECORDED not in page  # performance_report's note when the cluster is missed
    for name in [*set(tasks["group"]), *addresses, "total.compute()"]:
        assert name in page, name
    assert cluster.settled_leftovers() == _nothing(cluster)


CLOSING = '''
"""Closes its client while futures are still running, inside the profiled block."""
import sys
import time

from distributed import Client, wait


def nap(x):
    time.sleep(NAP if x else 0.0)
    return x


if __name__ == "__main__":
    client = Client(sys.argv[1])
    futures = client.map(nap, range(12))  # nap(0) returns at once; 11 long naps
    wait(futures[0])
    done = sum(f.done() for f in futures)  # then close at once, before the next batch
    print("done before close", done, flush=True)
    client.close()
    print("closed", flush=True)
'''


NAP = 3.0


@pytest.mark.timeout(120)
def test_a_client_closed_mid_block_ends_with_what_it_had(cluster: Cluster, tmp_path: Path) -> None:
    script = _script(tmp_path, CLOSING, NAP=NAP)
    out = _cli(
        "run", str(script), cluster.address, "--save", "run.npz", "-q", cwd=tmp_path, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "closed" in out.stdout
    done = int(out.stdout.split("done before close", 1)[1].split()[0])
    assert done >= 1

    run = daskprofile.load(tmp_path / "run.npz")
    tasks = run.tasks
    assert run.meta["finished"]
    # the block did not wait for the naps (cancelled with the client: 3 rounds of NAP s)
    assert run.meta["t1"] - run.meta["t0"] < 2 * NAP
    assert "distributed" in run.meta["schedulers"]
    # what finished before the close is there; nothing that never ran
    assert done <= len(tasks) < 12, (done, len(tasks))
    assert (tasks["group"] == "nap").all()
    assert set(tasks["worker"].str.rsplit(" thread ", n=1).str[0]) <= set(cluster.workers)
    # and the run says its client went away while its futures were pending, as does the CLI
    errors = " ".join(str(e.get("error")) for e in run.meta["errors"])
    assert "closed" in errors, run.meta["errors"]
    warnings = [line for line in out.stderr.splitlines() if line.startswith(WARNING)]
    assert any("closed" in line for line in warnings), out.stderr
    assert cluster.settled_leftovers() == _nothing(cluster)


KILLED = """
import os, sys, time
import daskprofile
from distributed import Client

client = Client(sys.argv[1])
with daskprofile.profile(resources=False) as run:
    client.submit(sum, [1, 2], key="before-death").result()
    time.sleep(0.3)
    os._exit(0)  # the process dies inside the block: nothing of ours runs after this
"""


def test_plugins_go_when_the_recording_process_dies(cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    done = subprocess.run(
        [sys.executable, str(script), cluster.address],
        check=False,
        timeout=120,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    # the scheduler plugin saw its owner leave and removed itself, the worker plugin, the topic
    assert cluster.settled_leftovers(timeout=15) == _nothing(cluster)
