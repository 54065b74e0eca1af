"""A real cluster whose workers lack daskprofile: the scheduler has it, the worker does not.

A ``dask scheduler`` and a ``dask worker`` process on 127.0.0.1, started with the CLI. The
worker's environment hides daskprofile (``PYTHONPATH`` points at a directory whose
``sitecustomize.py`` puts a finder first on ``sys.meta_path`` that refuses ``daskprofile``),
as on a cluster whose worker image was built without the package: the worker plugin cannot
be unpickled there. The recording falls back to what the scheduler knows and says so.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

import daskprofile  # noqa: E402
from daskprofile import distributed as dd  # noqa: E402
from daskprofile.distributed.collector import ALL_TASKS  # noqa: E402

pytestmark = pytest.mark.slow

DASK = Path(sys.executable).with_name("dask")
#: seconds to wait for a process to come up
STARTUP = 60.0

SITECUSTOMIZE = '''
"""Hide daskprofile from this interpreter (a worker image without the package)."""
import sys


class _NoDaskprofile:
    def find_spec(self, name, path=None, target=None):
        if name == "daskprofile" or name.startswith("daskprofile."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoDaskprofile())
'''

#: the tasks: a module the worker imports from its PYTHONPATH (not the test module, which
#: imports daskprofile)
TASKS = '''
import hashlib
import time


def crunch(seconds, x):
    """CPU work for ``seconds`` (hashing releases the GIL); returns ``x * 2``."""
    data = bytes(1 << 20)
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        hashlib.sha256(data).digest()
    return x * 2


def import_daskprofile():
    """``"imported"`` or the error importing daskprofile raised here."""
    try:
        import daskprofile  # noqa: F401
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "imported"
'''


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(DASK), *args], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log.parent
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _wait_for(what: str, ready: Any, procs: list[subprocess.Popen[bytes]], logs: Path) -> Any:
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.1)
    text = "\n".join(f"--- {f.name}\n{f.read_text()[-3000:]}" for f in sorted(logs.glob("*.log")))
    raise AssertionError(f"{what} did not come up\n{text}")


@pytest.fixture
def code(tmp_path: Path) -> Path:
    """The users' code, on the scheduler's and the worker's PYTHONPATH."""
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "plain_tasks.py").write_text(textwrap.dedent(TASKS))
    return folder


@pytest.fixture
def hidden(tmp_path: Path) -> Path:
    """First on the worker's PYTHONPATH: the sitecustomize hiding daskprofile."""
    folder = tmp_path / "hide"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    return folder


@pytest.fixture
def tasks(code: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The tasks module, imported here under the name the cluster imports it by."""
    monkeypatch.syspath_prepend(str(code))
    module = importlib.import_module("plain_tasks")
    yield module
    sys.modules.pop("plain_tasks", None)


@pytest.fixture
def cluster(tmp_path: Path, code: Path, hidden: Path) -> Iterator[str]:
    """A scheduler (with daskprofile) and a worker (without), as processes; terminated at
    teardown whatever happened. Yields the scheduler's address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASK_", "PYTHONPATH"))}
    env["PYTHONUNBUFFERED"] = "1"
    scheduler_file = tmp_path / "scheduler.json"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            _start(
                ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                 "--scheduler-file", str(scheduler_file)],
                tmp_path / "scheduler.log",
                {**env, "PYTHONPATH": str(code)},
            )
        )  # fmt: skip
        address = _wait_for("the scheduler", lambda: _read_address(scheduler_file), procs, tmp_path)
        procs.append(
            _start(
                ["worker", address, "--host", "127.0.0.1", "--no-nanny", "--no-dashboard",
                 "--nthreads", "2", "--name", "plain"],
                tmp_path / "worker.log",
                {**env, "PYTHONPATH": os.pathsep.join([str(hidden), str(code)])},
            )
        )  # fmt: skip
        yield address
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _read_address(path: Path) -> str | None:
    try:
        return str(json.loads(path.read_text())["address"])
    except (OSError, ValueError, KeyError):
        return None


def _scheduler_state(client: Any) -> dict[str, list[str]]:
    """daskprofile's plugins and topics on the scheduler."""

    def on_scheduler(dask_scheduler: Any) -> dict[str, list[str]]:  # (pickled by value)
        topics = dask_scheduler._broker._topics
        return {
            "plugins": sorted(p for p in dask_scheduler.plugins if p.startswith("daskprofile")),
            "worker_plugins": sorted(
                p for p in dask_scheduler.worker_plugins if p.startswith("daskprofile")
            ),
            "topics": sorted(t for t in topics if t.startswith("daskprofile")),
        }

    state: dict[str, list[str]] = client.run_on_scheduler(on_scheduler)
    return state


def test_a_cluster_whose_workers_lack_daskprofile_is_recorded_from_the_scheduler(
    cluster: str, tasks: ModuleType, tmp_path: Path
) -> None:
    with distributed.Client(cluster, timeout="30s") as client:
        client.wait_for_workers(1, timeout=STARTUP)
        (worker,) = client.scheduler_info()["workers"]
        errors = client.run(tasks.import_daskprofile)
        assert errors == {worker: "ModuleNotFoundError: No module named 'daskprofile'"}
        before = _scheduler_state(client)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with daskprofile.profile(client=client, dt=0.1) as run:
                futures = client.map(tasks.crunch, [1.5] * 4, range(4))
                assert client.gather(futures) == [0, 2, 4, 6]

        after = _scheduler_state(client)
        on_worker = client.run(lambda dask_worker: sorted(dask_worker.plugins))

    ours = [w for w in caught if "daskprofile" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert ours[0].category is RuntimeWarning
    assert "workers lack daskprofile" in str(ours[0].message)

    # every task, on the worker that ran it (the scheduler plugin records them)
    tasks_table = run.tasks
    assert len(tasks_table) == 4
    assert set(tasks_table["group"]) == {"crunch"}
    assert (tasks_table["status"] == "ok").all()
    assert {dd.task_worker_address(w) for w in tasks_table["worker"]} == {worker}
    duration = tasks_table["stop"] - tasks_table["start"]
    assert duration.between(1.4, 5.0).all(), duration

    # what is reduced, and why
    reduced = run.meta.reduced
    assert set(reduced) == {"stacks", "resources", "actions", "transfers", "memory"}
    for why in reduced.values():
        assert why.startswith("workers lack daskprofile (ModuleNotFoundError: "), why
    assert "heartbeats" in reduced["resources"]
    assert run.meta.errors == []

    # the worker's CPU and memory from its heartbeats
    resources = run.resources
    assert len(resources) >= 3
    assert (resources["memory"] > 10_000_000).all()
    (proc,) = run.meta.distributed["processes"]
    assert proc["workers"] == [worker]
    assert len(proc["time"]) >= 3
    assert max(proc["cpu"]) > 0

    # the cluster tables: workers from the scheduler, memory from the heartbeats, no
    # transfer logs (and no actions: these tasks have no dependencies)
    members = run.workers
    assert members["address"].tolist() == [worker]
    assert (members["name"].tolist(), members["threads"].tolist()) == (["plain"], [2])
    memory = run.memory
    assert len(memory) >= 3
    assert set(memory["worker"]) == {worker}
    assert (memory["process"] > 10_000_000).all()
    assert memory["spill_count"].isna().all()
    assert run.transfers.empty
    assert run.actions.empty
    assert "heartbeats" in reduced["memory"]
    assert "startstops" in reduced["actions"]

    # stacks: distributed's own profiler, if it ran, in one group
    assert set(run.stacks) <= {ALL_TASKS}
    if run.stacks:
        assert "distributed's profiler" in reduced["stacks"]
        assert run.stacks[ALL_TASKS]["count"] > 0
    else:
        assert reduced["stacks"].endswith("no stack samples")

    # nothing of ours left on the cluster
    assert after == before
    assert not after["plugins"]
    assert not after["worker_plugins"]
    assert not [p for p in on_worker[worker] if p.startswith("daskprofile")], on_worker

    # and it saves and loads with the run
    loaded = daskprofile.load(run.save(tmp_path / "run.npz"))
    assert loaded.meta.reduced == reduced
    assert loaded.memory.equals(memory)
