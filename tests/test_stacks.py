"""StackCollector: statistical stack sampling of threads running tasks, and its trees."""

from __future__ import annotations

import inspect
import itertools
import math
import os
import pickle
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

import dask
import pytest
from dask.base import named_schedulers
from distributed import profile as dprofile

import daskprofile
from daskprofile import stacktree, worker
from daskprofile.collectors import _frames
from daskprofile.collectors.stacks import (
    PAYLOAD_VERSION,
    StackCollector,
    _FrameTable,
    _ShortTaskCatcher,
    drain_worker_samples,
    ensure_worker_sampler,
)


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    yield
    # dask keeps its thread pool alive between computes: only ours must be gone
    left = [t for t in threading.enumerate() if t.name.startswith("daskprofile")]
    assert not left, f"threads left behind: {left}"
    assert not worker.running, "a test left a task registered"


# -- workloads: pure-Python, GIL-holding ---------------------------------------------------------
def spin(n: int) -> int:
    x = 0
    for i in range(n):  # SPIN-LOOP
        x += i * i  # SPIN-BODY
    return x


def light_then_heavy(repeat: int) -> int:
    total = 0
    for _ in range(repeat):
        total += 1  # LIGHT
        total += spin(20_000)  # HEAVY
    return total


def other_work(n: int) -> float:
    y = 0.0
    for i in range(n):
        y += math.sqrt(i)
    return y


def line_of(func: Callable[..., Any], marker: str) -> int:
    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def run_as_task(group: str, body: Callable[[], Any], seconds: float) -> threading.Thread:
    """A thread that runs ``body`` in a loop for ``seconds``, registered as a task of ``group``."""

    def target() -> None:
        worker.task_started(f"{group}-{threading.get_ident()}")
        try:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                body()
        finally:
            worker.task_stopped()

    thread = threading.Thread(target=target, name=f"task-{group}")
    thread.start()
    return thread


def sample_tasks(
    tasks: dict[str, Callable[[], Any]], seconds: float = 0.6, **kwargs: Any
) -> StackCollector:
    with StackCollector(**kwargs) as collector:
        threads = [run_as_task(group, body, seconds) for group, body in tasks.items()]
        for t in threads:
            t.join()
    return collector


def leaves(tree: stacktree.Tree) -> Iterator[stacktree.Tree]:
    todo = [tree]
    while todo:
        node = todo.pop()
        if not node["children"]:
            yield node
        todo.extend(node["children"].values())


def find(tree: stacktree.Tree, name: str) -> list[stacktree.Tree]:
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        if node["description"]["name"] == name:
            out.append(node)
        todo.extend(node["children"].values())
    return out


# -- sampling -------------------------------------------------------------------------------------
def test_cpu_bound_function_is_the_innermost_frame_with_its_line_numbers() -> None:
    collector = sample_tasks({"spin": lambda: spin(50_000)})
    tree = collector.trees()["spin"]
    assert tree["identifier"] == "root"
    assert tree["count"] > 0
    hot = [leaf for leaf in leaves(tree) if leaf["description"]["name"] == "spin"]
    assert hot, "spin() should be a leaf"
    assert sum(leaf["count"] for leaf in hot) > 0.5 * tree["count"]
    loop_lines = {line_of(spin, "SPIN-LOOP"), line_of(spin, "SPIN-BODY")}
    hottest = max(hot, key=lambda leaf: leaf["count"])
    desc = hottest["description"]
    assert desc["line_number"] in loop_lines  # the hottest line of the innermost frame
    assert desc["filename"] == __file__
    assert "x" in desc["line"]
    source, first = inspect.getsourcelines(spin)
    lines = {int(line) for leaf in hot for line in leaf["lines"]}
    assert lines <= set(range(first, first + len(source)))


def test_collects_a_robust_fraction_of_the_expected_samples() -> None:
    collector = sample_tasks({"spin": lambda: spin(50_000)}, seconds=1.0, interval=0.01)
    # 100 expected at 10 ms; asserting rates belongs to benchmarks/bench_stacks.py
    assert collector.samples_by_group()["spin"] >= 25
    (label, n), *_ = collector.samples_by_thread().items()
    assert label.startswith(f"{os.getpid()}:")
    assert n == collector.samples_by_group()["spin"]


def test_stack_is_cut_where_the_task_starts_under_a_real_dask_scheduler() -> None:
    def task(x: int) -> int:
        worker.task_started("task-1")
        try:
            end = time.perf_counter() + 0.4
            while time.perf_counter() < end:
                spin(20_000)
        finally:
            worker.task_stopped()
        return x

    with StackCollector() as collector:
        assert dask.compute(dask.delayed(task)(1), scheduler="threads") == (1,)
    tree = collector.trees()["task"]
    (top,) = tree["children"].values()  # no threading/dask frames above the task
    assert top["description"]["name"] == "task"
    assert find(top, "spin")


def frame_through(*calls: tuple[str, str]) -> Any:
    """The innermost frame of a chain of calls, outermost first, each ``(file, function)``
    compiled as if it lived in that file."""
    inner: Any = None
    for path, name in reversed(calls):
        namespace: dict[str, Any] = {"sys": sys, "inner": inner}
        source = f"def {name}():\n    return inner() if inner else sys._getframe()\n"
        exec(compile(source, path, "exec"), namespace)
        inner = namespace[name]
    return inner()


def test_a_thread_caught_in_the_schedulers_own_code_keeps_that_frame() -> None:
    table = _FrameTable()

    def names(*calls: tuple[str, str]) -> list[str]:
        return [table.infos[fid].name for fid in table.stack(_frames.walk(frame_through(*calls)))]

    pool, scheduler = ("/py/concurrent/futures/thread.py", "run"), ("/s/dask/local.py", "execute")
    wrapper, task = ("/s/dask/_task_spec.py", "call"), ("/u/job.py", "work")
    # a task about to start or just ended: the scheduler's frame is all there is to show
    assert names(pool, scheduler) == ["execute"]
    # otherwise everything from the scheduler out is cut, and dask's wrappers at the outer end
    assert names(pool, scheduler, wrapper, task) == ["work"]
    assert names(pool, scheduler, wrapper) == ["call"]
    assert names(pool, scheduler, task, wrapper) == ["work", "call"]


def test_groups_are_kept_separate() -> None:
    collector = sample_tasks({"a": lambda: spin(30_000), "b": lambda: other_work(30_000)})
    trees = collector.trees()
    assert set(trees) == {"a", "b"}
    assert find(trees["a"], "spin")
    assert not find(trees["a"], "other_work")
    assert find(trees["b"], "other_work")
    assert not find(trees["b"], "spin")
    assert set(collector.samples_by_group()) == {"a", "b"}


def test_history_cycles_and_time_ranges_select_cycles() -> None:
    collector = sample_tasks({"spin": lambda: spin(30_000)}, seconds=1.0, cycle=0.2)
    history = collector.history()
    assert len(history) >= 4
    for (s0, e0, _), (s1, e1, _) in itertools.pairwise(history):
        assert s0 < e0 <= s1 < e1
    total = collector.trees()["spin"]["count"]
    assert sum(trees["spin"]["count"] for _, _, trees in history if "spin" in trees) == total
    start, end, _ = history[1]
    part = collector.trees(start, end - 1e-6)["spin"]["count"]
    assert 0 < part < total


def test_history_is_bounded_but_totals_keep_everything() -> None:
    collector = sample_tasks({"spin": lambda: spin(30_000)}, seconds=0.6, cycle=0.05, max_cycles=3)
    assert len(collector.history()) <= 3
    assert collector.dropped > 0
    assert collector.trees()["spin"]["count"] == collector.samples_by_group()["spin"]


def test_hot_lines_points_at_the_hot_line() -> None:
    collector = sample_tasks({"mix": lambda: light_then_heavy(20)})
    heavy = line_of(light_then_heavy, "HEAVY")
    for query in (light_then_heavy, "light_then_heavy"):
        rows = collector.hot_lines(query)
        assert rows[0][:2] == (__file__, heavy)
        assert rows[0][2] > 0.8 * sum(n for _, _, n in rows)
    assert collector.hot_lines(spin)[0][1] in {
        line_of(spin, "SPIN-LOOP"),
        line_of(spin, "SPIN-BODY"),
    }


def test_trees_merge_with_distributed_profile() -> None:
    collector = sample_tasks({"spin": lambda: spin(30_000)})
    ours = collector.trees()["spin"]

    theirs = dprofile.create()
    ready, done = threading.Event(), threading.Event()

    def in_spin() -> None:
        def inner() -> None:
            ready.set()
            done.wait(5)

        inner()

    t = threading.Thread(target=in_spin)
    t.start()
    ready.wait(5)
    assert t.ident is not None
    dprofile.process(sys._current_frames()[t.ident], None, theirs)
    done.set()
    t.join()

    merged = dprofile.merge(ours, theirs, ours)
    assert merged["count"] == 2 * ours["count"] + theirs["count"]
    assert stacktree.merge(ours, theirs)["count"] == ours["count"] + theirs["count"]
    # our identifiers are distributed's: the same function lands on the same node
    spin_nodes = find(ours, "spin")
    assert spin_nodes[0]["identifier"] == f"spin;{__file__};{spin.__code__.co_firstlineno}"


def test_exports_folded_lines_and_shared_frames() -> None:
    collector = sample_tasks({"spin": lambda: spin(30_000), "other": lambda: other_work(30_000)})
    trees = collector.trees()
    lines = stacktree.to_folded_lines(trees)
    total = sum(tree["count"] for tree in trees.values())
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == total
    label = f"spin ({__file__}:{spin.__code__.co_firstlineno})"  # stable across runs
    assert any(line.startswith("spin;") and label in line for line in lines)

    shared = stacktree.to_shared_frames(trees)
    assert set(shared.profiles) == {"spin", "other"}
    assert sum(sum(w) for _, w in shared.profiles.values()) == total
    for samples, _ in shared.profiles.values():
        assert all(0 <= i < len(shared.frames) for stack in samples for i in stack)
    assert {"name", "file", "line"} <= set(shared.frames[0])


def test_stop_returns_fast_whatever_the_interval() -> None:
    collector = StackCollector(interval=1.0)
    collector.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    collector.stop()
    assert time.perf_counter() - t0 < 0.05


def test_switch_interval_lowered_only_while_busy_threads_delay_samples() -> None:
    before = sys.getswitchinterval()
    seen: list[float] = []

    def busy() -> None:
        seen.append(sys.getswitchinterval())
        spin(20_000)

    with StackCollector(interval=0.01, switch_interval=before / 4) as collector:
        time.sleep(0.15)  # nothing holds the GIL: samples come on time, nothing lowered
        assert sys.getswitchinterval() == before
        run_as_task("busy", busy, 0.6).join()
    assert sys.getswitchinterval() == before  # restored by stop()
    assert min(seen) == pytest.approx(before / 4)  # lowered while a busy task ran
    assert seen[0] == before
    assert collector.samples_by_group()["busy"] >= 30


def hold_the_gil(seconds: float) -> None:
    """Pure Python for ``seconds`` of wall time, never giving the GIL up by itself."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def short_task(seconds: float) -> None:
    hold_the_gil(seconds)


def long_task(seconds: float) -> None:
    hold_the_gil(seconds)


@pytest.mark.parametrize(
    ("scheduler", "least"),
    # a worker process gives the GIL up while it waits for its next task: the samples that
    # come as a task ends (a thread wake-up is ~0.1-0.3 ms here) fall there
    [("threads", 0.5), ("processes", 0.2)],
)
def test_short_gil_holding_tasks_get_their_share_of_samples(scheduler: str, least: float) -> None:
    # A pure-Python task shorter than the switch interval holds the GIL to its end, and the
    # sampler got it between tasks only: without catching, the short tasks here had 0-2% of
    # the samples for half of the time (see _ShortTaskCatcher).
    token = "5f3e0c0d9a1b2c3d4e5f60718293a4b5"
    dsk: dict[Any, Any] = {(f"short-{token}", i): (short_task, 0.0005) for i in range(1600)}
    dsk.update({(f"long-{token}", i): (long_task, 0.01) for i in range(80)})
    keys = list(dsk)
    random.Random(0).shuffle(keys)  # both kinds throughout the run
    with daskprofile.profile(stacks=True, interval=0.005) as run:
        named_schedulers[scheduler](dsk, keys, num_workers=2)
    tasks = run.tasks
    seconds = (tasks["stop"] - tasks["start"]).groupby(tasks["group"]).sum()
    samples = {group: tree["count"] for group, tree in run.stacks.items()}
    time_share = seconds["short"] / seconds.sum()
    sample_share = samples.get("short", 0) / sum(samples.values())
    assert sample_share >= least * time_share


class Ticks:
    """Samples 10 ms apart, with the task time the hook would have added up meanwhile."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spent = [0.0, 0.0]
        monkeypatch.setattr(worker, "spent", self.spent)
        self.now = 1000.0

    def feed(
        self, catcher: _ShortTaskCatcher, ticks: int, *, task: float, threads: int, seen: int
    ) -> None:
        """``threads`` threads ran tasks of ``task`` seconds back to back (none if 0);
        each sample caught ``seen`` of them inside a task."""
        for _ in range(ticks):
            self.spent[0] += threads * 0.01
            self.spent[1] += threads * 0.01 / task
            self.now += 0.01
            catcher.tick(self.now, seen)


def test_the_catcher_steps_in_only_for_short_tasks_it_misses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed = Ticks(monkeypatch).feed
    hidden = _ShortTaskCatcher()
    feed(hidden, 12, task=0.001, threads=2, seen=0)
    assert hidden.level == pytest.approx(0.001 / 4)  # a quarter of the tasks' mean
    feed(hidden, 10, task=0.001, threads=2, seen=0)
    assert hidden.level == pytest.approx(0.001 / 8)  # still hidden: halved
    feed(hidden, 30, task=0.001, threads=2, seen=0)
    assert hidden.level == pytest.approx(1e-4)  # never below the floor
    feed(hidden, 95, task=0.001, threads=0, seen=0)
    assert hidden.level == pytest.approx(1e-4)  # still within a second of the last task
    feed(hidden, 10, task=0.001, threads=0, seen=0)
    assert hidden.level is None  # a second with no task: done

    seen = _ShortTaskCatcher()
    feed(seen, 50, task=0.001, threads=2, seen=2)
    assert seen.level is None  # samples land inside the tasks as they should
    too_short = _ShortTaskCatcher()
    feed(too_short, 50, task=0.0001, threads=2, seen=0)
    assert too_short.level is None  # shorter than any switch interval worth setting
    long = _ShortTaskCatcher()
    feed(long, 40, task=0.05, threads=1, seen=0)
    assert long.level is None  # 0.4 s: a window spans ten tasks before it judges
    feed(long, 15, task=0.05, threads=1, seen=0)
    assert long.level == pytest.approx(0.002)  # capped


@pytest.mark.parametrize("interval", [0, -0.01, math.nan, math.inf])
def test_invalid_interval_raises_value_error_naming_interval(interval: float) -> None:
    with pytest.raises(ValueError, match="interval"):
        StackCollector(interval=interval)


def test_non_number_options_raise_type_error_naming_the_option() -> None:
    with pytest.raises(TypeError, match="interval"):
        StackCollector(interval="10ms")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="catch_short_tasks"):
        StackCollector(catch_short_tasks="yes")  # type: ignore[arg-type]


# -- processes: worker side + merge_remote ------------------------------------------------------
def remote_task(group: str, seconds: float) -> tuple[bool, bytes, int]:
    """Runs in a worker process as the task hook would: ensure, run, drain."""
    started = ensure_worker_sampler(0.005, owner_pid=None)
    worker.task_started(f"{group}-1")
    try:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            spin(20_000)
    finally:
        worker.task_stopped()
    return started, pickle.dumps(drain_worker_samples()), os.getpid()


def test_ensure_worker_sampler_starts_nothing_in_the_owning_process() -> None:
    StackCollector()  # this process owns a collector
    assert ensure_worker_sampler(0.01) is False
    assert ensure_worker_sampler(0.01, owner_pid=os.getpid()) is False
    assert drain_worker_samples() is None


def test_worker_samples_round_trip_through_a_process_pool() -> None:
    collector = StackCollector()
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        first = pool.submit(remote_task, "remote", 0.5).result()
        second = pool.submit(remote_task, "remote", 0.3).result()
    (started1, blob1, pid), (started2, blob2, pid2) = first, second
    assert started1
    assert started2
    assert pid == pid2
    p1, p2 = pickle.loads(blob1), pickle.loads(blob2)
    assert p1["v"] == PAYLOAD_VERSION
    assert p1["pid"] == pid
    assert p1["frames"]
    assert not {f[0] for f in p1["frames"]} & {f[0] for f in p2["frames"]}
    assert len(blob2) < 2_000  # frames are sent once: later payloads are small

    collector.merge_remote(p1)
    collector.merge_remote(p2)
    collector.merge_remote(None)
    tree = collector.trees()["remote"]
    assert tree["count"] >= 20
    spins = [leaf for leaf in leaves(tree) if leaf["description"]["name"] == "spin"]
    assert spins
    assert spins[0]["description"]["filename"] == __file__
    assert collector.samples_by_group()["remote"] == tree["count"]
    assert any(label.startswith(f"{pid}:") for label in collector.samples_by_thread())
    assert collector.history()


def worker_threads() -> int:
    return sum(t.name == "daskprofile-stacks-worker" for t in threading.enumerate())


def idle_then_busy() -> tuple[int, int, int, bool]:
    """In a worker: the sampler ends itself when idle and starts again on the next task."""
    ensure_worker_sampler(0.005, 1.0, None, 0.1)
    running = worker_threads()
    time.sleep(0.5)
    after_idle = worker_threads()
    _, blob, _ = remote_task("again", 0.2)
    return running, after_idle, worker_threads(), pickle.loads(blob) is not None


def test_worker_sampler_in_a_forked_process_of_a_sampling_kernel_ends_when_idle() -> None:
    with StackCollector(), ProcessPoolExecutor(1, mp_context=get_context("fork")) as pool:
        running, after_idle, again, drained = pool.submit(idle_then_busy).result()
    assert (running, after_idle, again) == (1, 0, 1)
    assert drained


def _busy_chunk(block: Any) -> Any:
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:
        pass
    return block + 1


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_stack_groups_are_the_task_tables_groups_for_fused_tasks(scheduler: str) -> None:
    import dask.array as da

    x = da.ones((40, 40), chunks=(10, 40)).map_blocks(_busy_chunk)
    y = (x.T + 1).sum(axis=0)  # blockwise layers fuse into _execute_subgraph tasks
    with daskprofile.profile(stacks=True, interval=0.005, resources=False) as run:
        y.compute(scheduler=scheduler)
    task_groups = set(run.tasks["group"])
    assert run.stacks
    assert set(run.stacks) <= task_groups, (set(run.stacks), task_groups)
