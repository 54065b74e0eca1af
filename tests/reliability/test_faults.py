"""Faults: what the user gets and what the run records when something breaks mid-compute.

Each fault is run twice, bare and under daskprofile, on the schedulers where it applies
(sync, threads, processes, a real ``LocalCluster`` of worker processes, a ``dask scheduler``
+ ``dask worker`` started as commands): the user's result or exception (type, message, the
traceback's last frame) must be the same, the run must record what happened, and nothing may
be left behind (tests/conftest.py checks threads, child processes, hooks and callbacks after
each test). Faults injected into daskprofile's own code (a collector raising) monkeypatch one
of its methods; everything a user would run is real.
"""

from __future__ import annotations

import _thread
import errno
import functools
import io
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import pytest

import daskprofile
from daskprofile.collectors.cache import CacheCollector
from daskprofile.collectors.resources import ResourceCollector
from daskprofile.collectors.stacks import _Sampler as StackSampler
from daskprofile.collectors.tasks import TaskCollector

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("distributed_threads")]

# Worker processes of the processes scheduler import this module to run its tasks: what only
# the tests need (distributed, the other test modules' helpers) is imported where used.

LOCAL = ["sync", "threads", "processes"]
#: longest a fault may take to reach the user (a hang fails the test well before pytest's timeout)
BOUND = 30.0


# ---------------------------------------------------------------- tasks (importable by workers)
def inc(x: int) -> int:
    return x + 1


def fail(x: int) -> int:
    """One task of the graph raises (the same one every time, whichever runs first)."""
    if x == 3:
        raise ValueError(f"task got {x}, wanted something else")
    return x


def interrupt(x: int) -> int:
    raise KeyboardInterrupt


def nap(x: int, seconds: float = 0.2, marks: str | None = None) -> int:
    """Sleeps; then leaves a mark in the folder ``marks`` (the test's view of progress)."""
    time.sleep(seconds)
    if marks is not None:
        Path(marks, str(x)).touch()
    return x


def die_on(x: int, which: int) -> int:
    """A worker process dies mid-task (no exception, no cleanup)."""
    if x == which:
        time.sleep(0.2)  # let the other tasks finish first
        os._exit(1)
    return x


def wait_for_file(x: int, path: str) -> int:
    """Runs until ``path`` exists (the test decides when the compute ends)."""
    deadline = time.monotonic() + BOUND
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return x


def total(parts: list[int]) -> int:
    return sum(parts)


def _graph(fn: Callable[..., int], n: int = 6, **kwargs: Any) -> Any:
    """``total([fn(0), ..., fn(n-1)])`` as a delayed (tasks named after ``fn``)."""
    parts = [dask.delayed(fn, pure=True)(i, **kwargs) for i in range(n)]
    return dask.delayed(total, pure=True)(parts)


# ---------------------------------------------------------------- outcomes
@dataclass(frozen=True)
class Outcome:
    """What the user got: a value, or an exception's type, message and last frame."""

    value: Any = None
    type: type | None = None
    message: str = ""
    last_frame: tuple[str, str, int | None] | None = None

    @classmethod
    def of(cls, call: Callable[[], Any]) -> Outcome:
        try:
            return cls(value=call())
        except BaseException as exc:  # KeyboardInterrupt too: that is what we compare
            last = traceback.extract_tb(exc.__traceback__)[-1]
            frame = (os.path.basename(last.filename), last.name, last.lineno)
            return cls(type=type(exc), message=str(exc), last_frame=frame)


def _twins(call: Callable[[], Any], **profile: Any) -> tuple[Outcome, Outcome, Any]:
    """``call()`` bare, then inside ``daskprofile.profile()``: both outcomes and the run."""
    bare = Outcome.of(call)
    holder: dict[str, Any] = {}

    def profiled() -> Any:
        with daskprofile.profile(**profile) as run:
            holder["run"] = run
            return call()

    started = time.monotonic()
    got = Outcome.of(profiled)
    assert time.monotonic() - started < BOUND
    return bare, got, holder["run"]


@contextmanager
def when(ready: Callable[[], bool], act: Callable[[], object]) -> Iterator[None]:
    """``act()`` once ``ready()``, from a thread watching while the block runs."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.01):
            if ready():
                act()
                return

    thread = threading.Thread(target=watch, name="test-fault-injector")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _interrupted_compute(root: Path, scheduler: Any, **kwargs: Any) -> Callable[[], Any]:
    """A compute of 40 naps interrupted once six of them are done (a fresh count per call)."""

    def compute() -> Any:
        marks = Path(tempfile.mkdtemp(dir=root))
        with when(lambda: len(os.listdir(marks)) >= 6, _thread.interrupt_main):  # Ctrl-C
            graph = _graph(nap, n=40, seconds=0.1, marks=str(marks))
            return graph.compute(scheduler=scheduler, **kwargs)

    return compute


# ---------------------------------------------------------------- the shared cluster
def _worker_pids(cluster: Any) -> set[int]:
    pids = set()
    for nanny in list(cluster.workers.values()):
        process = getattr(nanny, "process", None)
        pid = getattr(process, "pid", None)
        if pid is not None:
            pids.add(pid)
    return pids


@contextmanager
def _local_cluster(**config: Any) -> Iterator[tuple[Any, Any]]:
    """A real LocalCluster (2 worker processes x 1 thread) and a client not set as default."""
    import distributed

    with (
        dask.config.set(config),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        client.run(inc, 0)  # the workers have imported this module
        yield cluster, client


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """One LocalCluster for the tests that do not break it. Its worker processes outlive each
    test on purpose: the suite's leak check is told about them (and only them)."""
    import conftest  # tests/conftest.py: the suite's leak check

    with _local_cluster() as (cluster, c):
        children = conftest._children
        conftest._children = lambda: children() - _worker_pids(cluster)
        try:
            yield c
        finally:
            conftest._children = children


def _settled(client: Any) -> None:
    """Wait until the cluster has no task left (an interrupted compute's tasks are released)."""
    deadline = time.monotonic() + BOUND
    while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
        assert time.monotonic() < deadline, "the cluster kept tasks of an earlier test"
        time.sleep(0.05)


def _on(scheduler: str, client: Any) -> Any:
    """The ``scheduler=`` argument for a compute: a name, or the shared cluster's client."""
    return client if scheduler == "cluster" else scheduler


@pytest.fixture(params=[*LOCAL, "cluster"])
def where(request: pytest.FixtureRequest, client: Any) -> Iterator[Any]:
    """Each scheduler: its ``scheduler=`` argument (the cluster's client for "cluster").
    (The cluster is asked for in every case, so that it starts before a test's leak check
    takes its snapshot of threads.)"""
    if request.param != "cluster":
        yield request.param
        return
    _settled(client)
    yield client
    _settled(client)


def _name(where: Any) -> str:
    return where if isinstance(where, str) else "cluster"


# ================================================================ a task raising
def test_a_failing_task_raises_the_same_exception_and_the_run_records_it(where: Any) -> None:
    bare, got, run = _twins(lambda: _graph(fail).compute(scheduler=where))
    assert bare.type is ValueError
    assert got == bare
    assert run.finished
    assert run.meta.ended_by == f"ValueError: {bare.message}"
    table = run.exceptions
    assert len(table) >= 1
    assert set(table["type"]) == {"ValueError"}
    assert bare.message in set(table["message"])
    assert _errors(run) == []


def test_the_drop_in_profilers_raise_the_same_exception_as_without_them() -> None:
    bar = io.StringIO()
    bare = Outcome.of(lambda: _graph(fail).compute(scheduler="threads"))
    with (
        daskprofile.Profiler() as prof,
        daskprofile.ResourceProfiler(dt=0.05) as rprof,
        daskprofile.ProgressBar(out=bar),
    ):
        got = Outcome.of(lambda: _graph(fail).compute(scheduler="threads"))
    assert got == bare
    assert prof.results == [] or all(r.key[0] != "fail" for r in prof.results)
    assert rprof.results  # it sampled the block that failed
    assert "Completed" in bar.getvalue()


# ================================================================ KeyboardInterrupt
@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_task_raising_keyboardinterrupt_reaches_the_user_and_ends_the_run(
    scheduler: str,
) -> None:
    bare, got, run = _twins(lambda: _graph(interrupt).compute(scheduler=scheduler))
    assert bare.type is KeyboardInterrupt
    assert got == bare
    assert run.finished
    assert run.meta.ended_by == "KeyboardInterrupt"
    assert run.meta.errors == []
    assert "interrupt" in set(run.tasks["group"])  # the task that raised is a row


def test_ctrl_c_while_the_processes_scheduler_waits_ends_the_run_with_what_it_had(
    tmp_path: Path,
) -> None:
    compute = _interrupted_compute(tmp_path, "processes", num_workers=2, chunksize=1)
    bare, got, run = _twins(compute)
    assert bare.type is KeyboardInterrupt
    # (an interrupt from another thread lands wherever the main thread is waiting at
    # that moment, bare or not: its last frame is timing, not ours to compare)
    assert (got.type, got.message) == (bare.type, bare.message)
    assert run.finished
    assert run.meta.ended_by == "KeyboardInterrupt"
    # (a mark is left as a task ends: the last few may not have reached the scheduler yet)
    assert 1 <= len(run.tasks) < 41, "the tasks done before the interrupt are the run's rows"
    assert run.meta.errors == []


def test_ctrl_c_while_a_cluster_computes_ends_the_run_and_leaves_no_plugin(
    client: Any, tmp_path: Path
) -> None:
    _settled(client)
    bare, got, run = _twins(_interrupted_compute(tmp_path, client))
    assert bare.type is KeyboardInterrupt
    assert (got.type, got.message) == (bare.type, bare.message)  # (see above: timing)
    assert run.finished
    assert run.meta.ended_by == "KeyboardInterrupt"
    # the cluster runs on what it had been given until the client's release reaches it
    assert len(run.tasks) >= 1
    assert set(run.tasks["status"]) == {"ok"}
    assert _errors(run) == []
    _settled(client)
    assert _ours_on(client) == {"scheduler": [], "workers": []}


def _ours_on(client: Any) -> dict[str, list[str]]:
    """daskprofile's plugins left on the cluster's scheduler and workers."""

    def on_scheduler(dask_scheduler: Any) -> list[str]:
        names = [*dask_scheduler.plugins, *dask_scheduler.worker_plugins]
        return sorted(n for n in names if n.startswith("daskprofile"))

    def on_worker(dask_worker: Any) -> list[str]:
        return sorted(n for n in dask_worker.plugins if n.startswith("daskprofile"))

    workers = [n for names in client.run(on_worker).values() for n in names]
    return {"scheduler": client.run_on_scheduler(on_scheduler), "workers": workers}


# ================================================================ a worker process dying
def test_a_dying_worker_process_breaks_the_pool_as_without_daskprofile() -> None:
    def compute() -> Any:
        graph = _graph(die_on, n=6, which=3)
        return graph.compute(scheduler="processes", num_workers=2, chunksize=1)

    bare, got, run = _twins(compute)
    assert bare.type is BrokenProcessPool
    assert (got.type, got.message) == (bare.type, bare.message)
    assert run.finished
    assert run.meta.ended_by == f"BrokenProcessPool: {bare.message}"
    assert "die_on" not in set(run.exceptions["group"])  # it died: no exception was raised


def test_a_dying_cluster_worker_gives_killedworker_and_the_run_records_its_loss() -> None:
    import distributed

    config = {"distributed.scheduler.allowed-failures": 0}  # the first death kills the task
    with _local_cluster(**config) as (_, c):

        def compute() -> Any:
            c.wait_for_workers(2, timeout=BOUND)  # the nanny restarted the one that died
            return _graph(die_on, n=6, which=3).compute(scheduler=c)

        bare, got, run = _twins(compute)
    assert bare.type is distributed.KilledWorker
    assert got.type is bare.type
    assert run.finished
    assert run.meta.ended_by is not None
    assert run.meta.ended_by.startswith("KilledWorker: ")
    workers = run.workers
    gone = workers[workers["left"].notna()]
    assert len(gone) == 1, workers.to_dict("records")
    assert any("die_on" in str(k) for k in gone.iloc[0]["killed"]), gone.to_dict("records")
    assert _errors(run) == []


# ================================================================ our own code raising
def _injected(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("injected fault")


def _recorded_fault(run: Any, collector: str | None) -> bool:
    """Whether the run's errors name the injected fault (under ``collector``, if given)."""
    return any(
        collector in (None, e["collector"]) and "injected fault" in e["error"]
        for e in run.meta.errors
    )


def _errors(run: Any) -> list[dict[str, str]]:
    """The run's errors, less the note that the block ended before a cluster had finished
    its graph (what a user who got an exception early leaves behind: expected)."""
    return [e for e in run.meta.errors if "were fully recorded" not in e["error"]]


def _at_most_one_warning(caught: list[warnings.WarningMessage]) -> None:
    ours = [w for w in caught if "daskprofile" in str(w.message)]
    assert len(ours) <= 1, [str(w.message) for w in ours]


def test_a_collector_raising_leaves_the_result_and_the_other_collectors_alone(
    where: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = isinstance(where, str)
    if local:
        monkeypatch.setattr(CacheCollector, "on_tasks", _injected)
    else:  # a cluster's rows come in batches; its cache rows may come after the block
        monkeypatch.setattr(TaskCollector, "add_rows", _injected)
    expected = _graph(inc, n=20).compute(scheduler="sync")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.monotonic()
        with daskprofile.profile(stacks=False) as run:
            got = _graph(inc, n=20).compute(scheduler=where)
    assert time.monotonic() - started < BOUND
    assert got == expected
    # (a cluster's batch is applied by distributed/source.py, which records it as its own)
    assert _recorded_fault(run, "cache" if local else None), run.meta.errors
    if local:
        assert len(run.tasks) == 21, "the task collector went on recording"
    else:  # the batch's other parts (its graphs' pending counts) still reached the run
        assert not any("fully recorded" in e["error"] for e in run.meta.errors), run.meta.errors
    assert len(run.resources) >= 1, "the resource sampler went on recording"
    _at_most_one_warning(caught)


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
@pytest.mark.parametrize("sampler", ["resources", "stacks"])
def test_a_sampler_thread_raising_leaves_the_result_and_the_other_collectors_alone(
    scheduler: str, sampler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sampler == "resources":
        monkeypatch.setattr(ResourceCollector, "_sample", _injected)
    else:
        monkeypatch.setattr(StackSampler, "sample", _injected)  # the sampling thread
    expected = _graph(nap, n=8, seconds=0.05).compute(scheduler="sync")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with daskprofile.profile(dt=0.02, interval=0.005) as run:
            got = _graph(nap, n=8, seconds=0.05).compute(scheduler=scheduler)
    assert got == expected
    assert _recorded_fault(run, sampler), run.meta.errors
    assert len(run.tasks) == 9
    assert len(run.cache) > 0
    other = run.stacks if sampler == "resources" else run.resources
    assert len(other) > 0, f"the other sampler stopped too ({sampler} raised)"
    _at_most_one_warning(caught)


# ================================================================ disk full, or nowhere to write
WRITERS: dict[str, str] = {
    "save": "run.npz",
    "to_html": "run.html",
    "to_chrome_trace": "run.json",
    "to_speedscope": "run.speedscope.json",
    "to_folded": "run.folded",
}


@pytest.fixture(scope="module")
def small_run() -> Any:
    """A finished run with tasks, resources, cache and stacks (every writer has content)."""
    with daskprofile.profile(dt=0.02, interval=0.005) as run:
        _graph(nap, n=8, seconds=0.05).compute(scheduler="threads")
    assert len(run.stacks) > 0
    return run


def _write(run: Any, writer: str, path: Path | str) -> str:
    return str(getattr(run, writer)(path))


def _state(run: Any) -> tuple[Any, ...]:
    """What must not change when a write fails."""
    return (run.meta.to_dict(), run.tasks.to_dict("list"), run.summary(), run.stacks)


@contextmanager
def _file_size_limit(limit: int) -> Iterator[None]:
    """Writes past ``limit`` bytes fail with EFBIG, as on a full disk (Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.mark.parametrize("writer", list(WRITERS))
def test_writing_under_a_file_is_an_oserror_naming_the_path(
    small_run: Any, writer: str, tmp_path: Path
) -> None:
    before = _state(small_run)
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    path = a_file / WRITERS[writer]
    with pytest.raises(OSError) as raised:
        _write(small_run, writer, path)
    assert raised.value.errno == errno.ENOTDIR
    assert raised.value.filename == str(path)
    assert str(path) in str(raised.value)
    assert _state(small_run) == before
    assert os.listdir(tmp_path) == ["a_file"]
    again = _write(small_run, writer, tmp_path / WRITERS[writer])  # elsewhere: it works
    assert os.path.getsize(again) > 0


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_full_disk_is_an_oserror_naming_the_path(small_run: Any, writer: str) -> None:
    before = _state(small_run)
    with pytest.raises(OSError) as raised:
        _write(small_run, writer, "/dev/full")  # every write: ENOSPC
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == "/dev/full"
    assert "/dev/full" in str(raised.value)
    assert Path("/dev/full").is_char_device()
    assert _state(small_run) == before


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_write_that_fails_half_way_leaves_the_earlier_file_whole(
    small_run: Any, writer: str, tmp_path: Path
) -> None:
    before = _state(small_run)
    path = tmp_path / WRITERS[writer]
    _write(small_run, writer, path)
    earlier = path.read_bytes()
    assert len(earlier) >= 2
    with pytest.raises(OSError) as raised, _file_size_limit(len(earlier) // 2):
        _write(small_run, writer, path)
    assert path.read_bytes() == earlier, "a half-written file replaced the earlier one"
    assert os.listdir(tmp_path) == [path.name], "a temporary file was left behind"
    assert raised.value.errno == errno.EFBIG
    assert raised.value.filename == str(path)
    assert _state(small_run) == before
    if writer == "save":
        assert daskprofile.load(path).tasks.equals(small_run.tasks)


# ================================================================ a scheduler that goes away
@dataclass
class Commands:
    """A ``dask scheduler`` and a ``dask worker`` started as commands, and a client on them."""

    scheduler: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    client: Any


@contextmanager
def _commands(folder: Path) -> Iterator[Commands]:
    """The cluster of tests/test_cluster_cli.py (its helpers), one worker of 2 threads that
    can import this module; everything stopped and reaped on the way out."""
    import distributed

    import test_cluster_cli as cli

    folder.mkdir()
    info, dask_cmd = folder / "scheduler.json", str(cli.BIN / "dask")
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(daskprofile.__file__).parents[1])])
    env = {**os.environ, "PYTHONPATH": path}

    def spawn(args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(folder / log, "wb") as out:
            return subprocess.Popen([dask_cmd, *args], stdout=out, stderr=out, env=env)

    with ExitStack() as stack:
        procs: list[subprocess.Popen[bytes]] = []
        stack.callback(cli._stop, procs)
        where = ["--scheduler-file", str(info), "--host", "127.0.0.1", "--no-dashboard"]
        procs.append(spawn(["scheduler", *where, "--port", "0"], "scheduler.log"))
        worker = ["worker", *where, "--nthreads", "2", "--no-nanny"]
        procs.insert(0, spawn(worker, "worker.log"))  # workers are stopped first
        address = cli._wait_for(lambda: cli._address(info), procs, folder, "scheduler address")
        client = distributed.Client(address, timeout=cli.STARTUP, set_as_default=False)
        stack.callback(client.close, timeout=5)
        client.wait_for_workers(1, timeout=cli.STARTUP)
        yield Commands(procs[1], procs[0], client)


def test_a_scheduler_killed_mid_run_gives_the_same_error_and_the_run_says_why(
    tmp_path: Path,
) -> None:
    import distributed

    from daskprofile.record import clusters

    outcomes, runs, exits = [], [], []
    marks = tmp_path / "marks"  # one path for both twins: the same graph, the same keys
    for twin in ("bare", "profiled"):
        with _commands(tmp_path / twin) as cluster:
            marks.mkdir()
            graph = _graph(nap, n=60, seconds=0.1, marks=str(marks))
            compute = functools.partial(graph.compute, scheduler=cluster.client)
            left: list[float] = []

            def profiled(compute: Callable[[], Any] = compute, left: list[float] = left) -> Any:
                with daskprofile.profile() as run:
                    runs.append(run)
                    try:
                        return compute()
                    finally:
                        left.append(time.monotonic())

            kill = when(lambda: len(os.listdir(marks)) >= 16, cluster.scheduler.kill)
            with kill:
                outcomes.append(Outcome.of(compute if twin == "bare" else profiled))
            if left:
                exits.append(time.monotonic() - left[0])
        shutil.rmtree(marks)  # (the worker is stopped: nothing writes there now)
    bare, got = outcomes
    assert bare.type is distributed.client.FutureCancelledError
    assert "scheduler-connection-lost" in bare.message
    assert got == bare
    assert exits[0] < 10.0, f"the profile() block took {exits[0]:.1f} s to end"
    (run,) = runs
    assert run.finished
    assert run.meta.ended_by == f"FutureCancelledError: {bare.message}"
    assert 1 <= len(run.tasks) < 61, "the rows that reached the client before the kill"
    assert not clusters.watch_module().listening(), "Client._graph_to_futures still wrapped"
    assert distributed.Client.close.__qualname__ == "Client.close", "Client.close still wrapped"


# ================================================================ the panel's comm closing
@pytest.mark.parametrize("recorded_by", ["panel", "profile()"])
def test_closing_the_panels_comm_mid_compute_keeps_the_result_and_the_run(
    recorded_by: str, tmp_path: Path
) -> None:
    """The panel goes away (its comm closes) while a compute runs, recorded by the panel's
    own per-cell recorder or by a ``profile()`` block: the result is unchanged and the run
    ends whole in the history."""
    from daskprofile.jupyter import comm as dpcomm
    from daskprofile.record import history
    from test_comm_publisher import _RecordingComm

    bare = tmp_path / "bare"
    bare.mkdir()
    expected = _graph(nap, n=12, seconds=0.05, marks=str(bare)).compute(scheduler="threads")
    comm = _RecordingComm()
    meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
    marks = tmp_path / "marks"
    marks.mkdir()
    history.clear_history()
    try:
        dpcomm._on_open(comm, {"metadata": meta, "content": {"data": {"type": "hello"}}})
        assert dpcomm.hub() is not None
        close = when(lambda: len(os.listdir(marks)) >= 2, lambda: comm.close_cb({}))
        graph = _graph(nap, n=12, seconds=0.05, marks=str(marks))
        with close, ExitStack() as block:
            if recorded_by == "profile()":
                block.enter_context(daskprofile.profile())
            got = graph.compute(scheduler="threads")
        assert not dpcomm.hub() or not dpcomm.hub().publisher.connections, "the comm stayed"
        assert got == expected
        deadline = time.monotonic() + BOUND
        while not history.history() and time.monotonic() < deadline:
            time.sleep(0.02)
        (run,) = history.history()
        assert run.finished
        assert len(run.tasks) == 13
        assert run.meta.auto is (recorded_by == "panel")
        assert run.meta.errors == []
    finally:
        dpcomm.shutdown()
        history.clear_history()


def test_a_collector_raising_under_the_panel_spoils_neither_that_run_nor_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The panel's recorder hands events to each cell run's collectors itself: one raising
    is switched off for that run (recorded in it), the run still ends with its task rows,
    and the next compute is recorded too."""
    from daskprofile.jupyter import comm as dpcomm
    from daskprofile.record import history
    from test_comm_publisher import _RecordingComm

    monkeypatch.setattr(CacheCollector, "on_tasks", _injected)
    expected = _graph(inc, n=20).compute(scheduler="sync")
    meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
    history.clear_history()
    try:
        dpcomm._on_open(_RecordingComm(), {"metadata": meta, "content": {"data": {}}})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [_graph(inc, n=20).compute(scheduler="threads") for _ in range(2)]
        assert got == [expected, expected]
        deadline = time.monotonic() + BOUND
        while len(history.history()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        runs = history.history()
        assert [len(r.tasks) for r in runs] == [21, 21]
        assert all(r.finished and _recorded_fault(r, "cache") for r in runs)
        assert len([w for w in caught if "daskprofile" in str(w.message)]) <= 2  # one a run
    finally:
        dpcomm.shutdown()
        history.clear_history()
