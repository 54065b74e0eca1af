"""ResourceCollector: CPU/memory/process count of the whole process tree, sampled in a thread."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import dask
import numpy as np
import psutil
import pytest

from daskprofile.collectors import _procfs, resources
from daskprofile.collectors.resources import COLUMNS, ResourceCollector


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    yield
    # dask keeps its thread pool alive between computes: only ours must be gone
    left = [t for t in threading.enumerate() if t.name.startswith("daskprofile")]
    assert not left, f"threads left behind: {left}"


def mean_cpu(cols: dict[str, np.ndarray]) -> float:
    """Time-weighted mean CPU % over the samples (the first has no interval)."""
    t, cpu = cols["time"], cols["cpu"]
    return float((cpu[1:] * np.diff(t)).sum() / (t[-1] - t[0]))


def sleepy(x: int) -> int:
    time.sleep(0.4)
    return x


def test_first_sample_is_taken_at_start_and_columns_are_typed() -> None:
    with ResourceCollector(dt=10.0) as rc:
        cols = rc.snapshot()
    assert tuple(cols) == COLUMNS
    assert 1 <= len(cols["time"]) <= 2  # the one at start, maybe one more at stop
    assert cols["memory"][0] > 10_000_000
    assert cols["processes"][0] >= 1
    assert cols["memory"].dtype == np.int64


def test_sees_memory_growth_of_an_allocating_workload() -> None:
    with ResourceCollector(dt=0.02) as rc:
        time.sleep(0.1)
        block = np.ones(300_000_000 // 8)  # 300 MB, touched
        time.sleep(0.2)
        del block
    mem = rc.snapshot()["memory"]
    assert mem.max() - mem[0] > 250_000_000


def test_reports_the_cpu_a_busy_thread_uses() -> None:
    used: list[float] = []

    def spin() -> None:
        start = time.thread_time()
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            sum(range(10_000))
        used.append(time.thread_time() - start)

    busy = threading.Thread(target=spin)
    with ResourceCollector(dt=0.05) as rc:
        busy.start()
        busy.join()
    cols = rc.snapshot()
    reported = mean_cpu(cols) / 100 * (cols["time"][-1] - cols["time"][0])  # CPU seconds
    # however loaded the machine, what was reported is what the thread used (10 ms ticks)
    assert used[0] > 0.1
    assert used[0] * 0.8 - 0.05 <= reported <= used[0] * 1.2 + 0.05


def test_sees_worker_processes_of_the_processes_scheduler() -> None:
    tasks = [dask.delayed(sleepy)(i) for i in range(4)]
    with ResourceCollector(dt=0.05) as rc:
        assert dask.compute(*tasks, scheduler="processes", num_workers=2, chunksize=1) == (
            0,
            1,
            2,
            3,
        )
    procs = rc.snapshot()["processes"]
    assert procs[0] >= 1
    assert procs.max() >= procs[0] + 2


def spin(seconds: float) -> float:
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass
    return seconds


def test_counts_the_cpu_and_memory_of_busy_worker_processes() -> None:
    """Two worker processes spinning: more than one core's worth of CPU is reported, which
    this process alone (the parent, idle meanwhile) could never show."""
    tasks = [dask.delayed(spin)(0.4) for _ in range(4)]
    with ResourceCollector(dt=0.05) as rc:
        dask.compute(*tasks, scheduler="processes", num_workers=2, chunksize=1)
    cols = rc.snapshot()
    assert cols["cpu"].max() > 110, cols["cpu"].tolist()
    busy = cols["processes"] >= cols["processes"][0] + 2
    assert busy.any()
    own = psutil.Process().memory_info().rss
    assert cols["memory"][busy].max() > own  # the workers' memory is added to ours


def test_sees_a_child_process_started_mid_run_and_tolerates_its_exit() -> None:
    with ResourceCollector(dt=0.02) as rc:
        time.sleep(0.05)
        for _ in range(3):  # children that come and go between samples
            subprocess.run([sys.executable, "-c", "import time; time.sleep(0.15)"], check=True)
    cols = rc.snapshot()
    assert cols["processes"].max() >= cols["processes"][0] + 1
    assert rc.error is None


def test_stop_returns_within_50_ms_whatever_dt() -> None:
    rc = ResourceCollector(dt=1.0)
    rc.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    rc.stop()
    assert time.perf_counter() - t0 < 0.05
    assert not rc.running


def test_does_not_count_itself() -> None:
    # sampling every 2 ms costs the sampler a good share of a core: none of it is reported
    with ResourceCollector(dt=0.002) as rc:
        time.sleep(1.0)
    cols = rc.snapshot()
    assert len(cols["time"]) > 100
    assert mean_cpu(cols) < 5.0
    own_tree = 1 + len(psutil.Process().children(recursive=True))
    assert cols["processes"][-1] == own_tree  # a thread, not a tracker process


def test_since_streams_only_new_samples() -> None:
    with ResourceCollector(dt=0.01) as rc:
        first, cursor = rc.since(0)
        time.sleep(0.1)
        second, cursor2 = rc.since(cursor)
    assert len(first["time"]) >= 1
    assert len(second["time"]) >= 3
    assert cursor2 == cursor + len(second["time"])
    assert second["time"][0] > first["time"][-1]


def test_memory_is_bounded_and_drops_are_counted() -> None:
    with ResourceCollector(dt=0.002, max_samples=8) as rc:
        time.sleep(0.2)
    cols = rc.snapshot()
    assert len(cols["time"]) == 8
    assert rc.dropped > 0
    assert np.all(np.diff(cols["time"]) > 0)


@pytest.mark.parametrize("dt", [0, -1, math.nan, math.inf])
def test_invalid_dt_raises_value_error_naming_dt(dt: float) -> None:
    with pytest.raises(ValueError, match="dt"):
        ResourceCollector(dt=dt)


@pytest.mark.parametrize("dt", ["0.1", None, True])
def test_non_number_dt_raises_type_error_naming_dt(dt: object) -> None:
    with pytest.raises(TypeError, match="dt"):
        ResourceCollector(dt=dt)  # type: ignore[arg-type]


def _spawn_tree() -> subprocess.Popen[bytes]:
    """A child process with a grandchild, the child started from a thread that has ended."""
    started: list[subprocess.Popen[bytes]] = []
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', " \
        "'import time; time.sleep(30)']); time.sleep(30)"  # fmt: skip
    forker = threading.Thread(
        target=lambda: started.append(subprocess.Popen([sys.executable, "-c", code]))
    )
    forker.start()
    forker.join()
    return started[0]


@pytest.mark.parametrize("proc_children", [True, False], ids=["proc-children", "scan"])
def test_descendants_are_the_whole_tree(proc_children: bool) -> None:
    if proc_children:
        assert resources.PROC_CHILDREN, "this Linux lists no /proc/<pid>/task/<tid>/children"
    child = _spawn_tree()
    try:
        me = psutil.Process()
        deadline = time.monotonic() + 10
        while len(me.children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        expected = {me.pid, *(p.pid for p in me.children(recursive=True))}
        find = resources._Descendants(me.pid)
        find.use_proc_children = proc_children
        tree = find()
        assert tree[0] == me.pid
        assert set(tree) == expected
        assert len(tree) == len(expected) >= 3  # no pid twice; child and grandchild seen
    finally:
        for p in psutil.Process(child.pid).children(recursive=True):
            p.kill()
        child.kill()
        child.wait()


def test_proc_reads_that_keep_the_gil_match_the_standard_library() -> None:
    me = psutil.Process()
    assert _procfs.available()
    task_dir = f"/proc/{me.pid}/task"
    assert sorted(_procfs.listdir(task_dir) or []) == sorted(os.listdir(task_dir))
    with open(f"/proc/{me.pid}/stat", "rb") as f:
        expected_fields = resources._stat_fields(f.read())[:5]
    stat = _procfs.read(f"/proc/{me.pid}/stat")
    assert stat is not None
    assert resources._stat_fields(stat)[:5] == expected_fields
    assert _procfs.read("/proc/no-such-pid/stat") is None
    assert _procfs.listdir("/proc/no-such-pid/task") is None
    started, cpu, rss = resources._proc_stat(me.pid) or (0, 0.0, 0)
    times, memory = me.cpu_times(), me.memory_info()
    assert abs(cpu - (times.user + times.system)) < 0.05
    assert abs(rss - memory.rss) < 1 << 20
    assert resources._boot_time() + started / resources._TICK == pytest.approx(
        me.create_time(), abs=0.05
    )


def test_the_psutil_reading_where_there_is_no_proc_matches_the_proc_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Off Linux a process is read through psutil: the same CPU, memory and birth time,
    and a reused pid still shows (the identity is the psutil.Process)."""
    me = psutil.Process()
    tree = resources._Tree(me)
    _, cpu, rss, born = tree._read(me.pid) or (None, 0.0, 0, 0.0)
    monkeypatch.setattr(resources, "_proc_stat", lambda pid: None)
    ident, cpu2, rss2, born2 = tree._read(me.pid) or (None, 0.0, 0, 0.0)
    assert ident == me
    assert abs(cpu2 - cpu) < 0.05
    assert abs(rss2 - rss) < 1 << 20
    assert born2 == pytest.approx(born, abs=0.05)
    assert tree._read(2**22 + 12345) is None  # no such pid
    # tracked under this pid: another process (pid 1) that had used no CPU
    tree.tracked[me.pid] = resources._Tracked(psutil.Process(1), 0.0)
    tracked, delta, _ = tree._measure(me.pid, 0.0) or (None, -1.0, 0)
    assert tracked is not None
    assert tracked.ident == me
    assert delta == 0.0  # first sight of an old process, not all its CPU as new


def _blocked(tid: int) -> int:
    """How many times thread ``tid`` of this process has given up its CPU (waited)."""
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split(":")[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc status")


def test_a_sample_hands_the_gil_over_once_to_a_busy_thread() -> None:
    """A pure-Python thread keeps the GIL; each time the sampler gives it up (any file or
    directory call of the standard library does) and takes it back, the busy thread waits
    twice. A sample reads /proc with the GIL kept: only its wake-up costs a hand-over."""
    me = threading.get_native_id()
    rc = ResourceCollector(dt=0.05)
    rc.start()
    try:
        before, t0 = _blocked(me), time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < 0.8:  # busy in Python, GIL held
            n += 1
        waits = _blocked(me) - before
        samples = len(rc.snapshot()["time"]) - 1
    finally:
        rc.stop()
    assert samples >= 5
    assert waits <= 3 * samples + 4, (waits, samples)


def test_proc_reads_fall_back_to_the_standard_library_without_libc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_procfs, "_libc", None)
    assert not _procfs.available()
    task_dir = f"/proc/{os.getpid()}/task"
    assert sorted(_procfs.listdir(task_dir) or []) == sorted(os.listdir(task_dir))
    assert resources._stat_fields(_procfs.read("/proc/self/stat") or b")  ")[0] in b"RSD"
    assert _procfs.read("/proc/no-such-pid/stat") is None
    assert _procfs.listdir("/proc/no-such-pid/task") is None
    children = {p.pid for p in psutil.Process().children()}
    assert set(resources._thread_children(os.getpid())) == children
