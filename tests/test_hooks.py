"""The scheduler hook: installed only while listened to, safe across threads and faults."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
import warnings
from operator import add
from typing import Any

import dask
import dask.local
import dask.multiprocessing
import dask.threaded
import pytest
from dask.callbacks import Callback as DaskCallback

import daskprofile
from daskprofile import Callback, Profiler, hooks
from daskprofile.hooks import Compute, Listener, TaskEvent


class Recorder(Listener):
    def __init__(self) -> None:
        self.events: list[TaskEvent] = []
        self.computes: list[str] = []

    def on_compute_start(self, compute: Compute) -> None:
        self.computes.append(compute.scheduler)

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        self.events.append(event)


def originals() -> bool:
    return all(
        m.get_async is hooks.original_get_async
        for m in (dask.local, dask.threaded, dask.multiprocessing)
    )


def test_installed_only_while_listened_to() -> None:
    assert originals()
    a, b = Recorder(), Recorder()
    hooks.add_listener(a)
    hooks.add_listener(b)
    assert hooks.installed()
    assert dask.threaded.get_async is hooks.get_async
    hooks.remove_listener(a)
    assert hooks.installed()
    hooks.remove_listener(b)
    assert originals()
    hooks.remove_listener(b)  # idempotent
    assert originals()


def test_results_and_other_callbacks_see_dask_values() -> None:
    seen: list[tuple[Any, Any]] = []
    dsk = {"a": 1, "b": (add, "a", 1), "c": (add, "b", "a")}
    rec = Recorder()
    hooks.add_listener(rec)
    try:
        with DaskCallback(posttask=lambda k, r, d, s, w: seen.append((r, w))):
            assert dask.threaded.get(dsk, "c") == 3
    finally:
        hooks.remove_listener(rec)
    assert [r for r, _ in seen] == [2, 3]
    idents = {t.ident for t in threading.enumerate()}
    assert all(isinstance(w, int) and w in idents for _, w in seen)
    assert {e.key for e in rec.events} == {"b", "c"}


def test_dask_registered_callbacks_still_called() -> None:
    calls: list[Any] = []
    cb = DaskCallback(pretask=lambda key, dsk, state: calls.append(key))
    cb.register()
    rec = Recorder()
    hooks.add_listener(rec)
    try:
        dask.get({"x": (add, 1, 2)}, "x")
    finally:
        hooks.remove_listener(rec)
        cb.unregister()
    assert calls == ["x"]
    assert not DaskCallback.active


def test_scheduler_kinds_are_named() -> None:
    rec = Recorder()
    hooks.add_listener(rec)
    try:
        x = dask.delayed(add)(1, 2)
        x.compute(scheduler="sync")
        x.compute(scheduler="threads")
    finally:
        hooks.remove_listener(rec)
    assert rec.computes == ["sync", "threads"]


def test_two_threads_computing_at_once_both_fully_recorded() -> None:
    # dask: a registered Profiler records ~half, is silently unregistered, then KeyError
    prof = Profiler()
    prof.register()
    barrier = threading.Barrier(2)

    def work(tag: str) -> None:
        barrier.wait()
        xs = [dask.delayed(time.sleep)(0.01, dask_key_name=f"{tag}-{i}") for i in range(10)]
        dask.compute(*xs, scheduler="threads", num_workers=2)

    threads = [threading.Thread(target=work, args=(t,)) for t in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        keys = {r.key for r in prof.results}
        assert keys == {f"{tag}-{i}" for tag in ("left", "right") for i in range(10)}
        assert prof in Callback.active
    finally:
        prof.unregister()
    assert prof not in Callback.active
    assert originals()


def test_faulty_listener_warns_once_and_compute_unaffected() -> None:
    class Broken(Listener):
        calls = 0

        def on_task(
            self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
        ) -> None:
            Broken.calls += 1
            raise RuntimeError("collector bug")

    broken, good = Broken(), Recorder()
    hooks.add_listener(broken)
    hooks.add_listener(good)
    try:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out = dask.compute(*[dask.delayed(add)(i, 1) for i in range(5)], scheduler="threads")
            out2 = dask.delayed(add)(1, 1).compute(scheduler="sync")
    finally:
        hooks.remove_listener(broken)
        hooks.remove_listener(good)
    assert out == (1, 2, 3, 4, 5)
    assert out2 == 2
    assert len([w for w in record if "collector bug" in str(w.message)]) == 1
    assert Broken.calls == 1
    assert len(good.events) == 6


def test_faulty_collector_recorded_in_run() -> None:
    def bad_metric(value: Any) -> float:
        raise ZeroDivisionError("metric bug")

    with (
        pytest.warns(RuntimeWarning, match="metric bug"),
        daskprofile.profile(resources=False, stacks=False, metric=bad_metric) as run,
    ):
        assert dask.delayed(add)(1, 2).compute(scheduler="threads") == 3
    assert [e["collector"] for e in run.meta["errors"]] == ["cache"]
    assert len(run.tasks) == 1  # the other collectors kept going


def test_user_callback_exception_does_not_fail_compute() -> None:
    def pretask(key: Any, dsk: Any, state: Any) -> None:
        raise KeyError("oops")

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with Callback(pretask=pretask):
            assert dask.delayed(add)(1, 2).compute() == 3
    assert any("oops" in str(w.message) for w in record)


def _warm_default_pool() -> None:
    """Start every thread of dask's default pool. A Ctrl-C that lands while the pool starts
    a thread orphans it (not yet in the pool's list: never told to stop, it would hold up
    the interpreter's exit): a real pool mishap, not what these tests are about."""
    gate = threading.Barrier(dask.threaded.CPU_COUNT, timeout=10)
    parts = [dask.delayed(gate.wait)(dask_key_name=f"warm-{i}") for i in range(gate.parties)]
    dask.compute(*parts, scheduler="threads")


def test_keyboard_interrupt_mid_compute_leaves_nothing_behind() -> None:
    _warm_default_pool()
    started = threading.Event()

    def interrupt_main(x: int) -> int:
        # one Ctrl-C, as a user gives it: a second SIGINT can land inside
        # threading.Condition.wait's own cleanup (a CPython race: "release unlocked lock")
        started.set()
        if x == 0:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        return x

    with (
        pytest.raises(KeyboardInterrupt),
        daskprofile.profile(dt=0.01) as run,
        Profiler(),
        daskprofile.ProgressBar(out=None),
    ):
        dask.compute(*[dask.delayed(interrupt_main)(i) for i in range(2)], scheduler="threads")
    assert started.is_set()
    assert run.finished
    assert originals()
    assert not Callback.active
    # the conftest fixture checks threads, processes and hooks once the test returns


def _interrupt_parent(x: int, parent: int) -> int:
    if x == 0:
        os.kill(parent, signal.SIGINT)
    time.sleep(0.5)
    return x


def test_keyboard_interrupt_mid_compute_on_processes_leaves_nothing_behind() -> None:
    """Ctrl-C in the kernel while worker processes run: the pool, the samplers inside the
    workers and every hook are gone (the conftest fixture checks once the test returns)."""
    parts = [dask.delayed(_interrupt_parent)(i, os.getpid()) for i in range(4)]
    with (
        pytest.raises(KeyboardInterrupt),
        daskprofile.profile(dt=0.01, interval=0.005) as run,
        daskprofile.ProgressBar(out=None),
    ):
        dask.compute(*parts, scheduler="processes", num_workers=2)
    assert run.finished
    assert originals()
    assert not Callback.active


def test_keyboard_interrupt_raised_by_task_propagates_sync() -> None:
    def stop(x: int) -> int:
        raise KeyboardInterrupt

    with (
        daskprofile.profile(resources=False, stacks=False) as run,
        pytest.raises(KeyboardInterrupt),
    ):
        dask.delayed(stop)(1).compute(scheduler="sync")
    assert list(run.tasks["error"]) == ["KeyboardInterrupt"]


def test_worker_running_registry_tracked_during_tasks() -> None:
    from daskprofile import worker

    seen: list[tuple[int, tuple[str, str] | None]] = []

    def look(x: int) -> int:
        ident = threading.get_ident()
        seen.append((ident, worker.snapshot().get(ident)))
        return x

    class Tracker(Listener):
        track_running = True

    tracker = Tracker()
    hooks.add_listener(tracker)
    try:
        dask.delayed(look)(1, dask_key_name=("look-abc123", 0)).compute(scheduler="threads")
    finally:
        hooks.remove_listener(tracker)
    ((ident, running),) = seen
    assert running == ("('look-abc123', 0)", "look")
    assert ident not in worker.snapshot()


def _timed_here(_: object = None) -> bool:
    from daskprofile import hooks as h

    return h._tls.task is not None or threading.get_ident() in h._running


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_nothing_is_done_per_task_when_no_listener_wants_task_events(scheduler: str) -> None:
    import dask

    from daskprofile import ProgressBar
    from daskprofile.diagnostics import Profiler

    task = dask.delayed(_timed_here)()
    with ProgressBar(out=io.StringIO()):  # reads dask's state: no task events needed
        assert task.compute(scheduler=scheduler) is False
    with Profiler() as prof:  # wants task events: timed where the task runs
        assert task.compute(scheduler=scheduler) is True
    assert len(prof.results) == 1


class Batches(Listener):
    """Takes task events in batches only (as the collectors do)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.threads: set[int] = set()
        self.events: list[TaskEvent] = []

    def on_tasks(self, compute: Compute, batch: hooks.TaskBatch) -> None:
        self.sizes.append(len(batch))
        self.threads.add(threading.get_ident())
        self.events.extend(batch)


def test_batched_listener_costs_no_per_task_callback_and_gets_every_task() -> None:
    lst = Batches()
    compute = Compute((lst,), "threads")
    compute.local = True  # what the hook decides for the sync and threads schedulers
    assert compute.callback()[2:4] == (None, None)  # no pretask, no posttask to call
    n = 3 * hooks.BATCH + 7
    dsk = {("t-abc12345", i): (add, i, 1) for i in range(n)}
    hooks.add_listener(lst)
    try:
        assert dask.threaded.get(dsk, list(dsk))[:3] == (1, 2, 3)
    finally:
        hooks.remove_listener(lst)
    assert sorted(e.key for e in lst.events) == sorted(dsk)
    assert sum(lst.sizes) == n
    assert len(lst.sizes) >= 4
    # full batches are handed over where the tasks ran, not by the scheduling thread
    assert lst.threads - {threading.get_ident()}
    assert all(e.submit <= e.start <= e.stop for e in lst.events)
    assert {e.tid for e in lst.events} <= {t.ident for t in threading.enumerate()}


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_drain_observers_run_after_each_batch_on_the_thread_that_handed_it_over(
    scheduler: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An observer runs once per batch, after the listeners got it, on the thread that
    drained; one that raises is logged, stays registered, and changes no result."""
    order: list[tuple[str, int]] = []

    class Seen(Listener):
        def on_tasks(self, compute: Compute, batch: hooks.TaskBatch) -> None:
            order.append(("batch", threading.get_ident()))

    def observer() -> None:
        order.append(("observer", threading.get_ident()))

    def failing() -> None:
        raise RuntimeError("observer broke")

    n = 2 * hooks.BATCH + 5
    dsk: dict[Any, Any] = {("t-abc12345", i): (add, i, 1) for i in range(n)}
    dsk["total-abc12345"] = (sum, list(dsk))
    lst = Seen()
    hooks.add_listener(lst)
    hooks.add_drain_observer(failing)
    hooks.add_drain_observer(observer)
    hooks.add_drain_observer(observer)  # once is enough
    try:
        assert dask.get(dsk, "total-abc12345", scheduler=scheduler) == sum(range(1, n + 1))
    finally:
        hooks.remove_listener(lst)
        hooks.remove_drain_observer(observer)
        hooks.remove_drain_observer(failing)
        hooks.remove_drain_observer(failing)  # idempotent
    assert hooks.drain_observers() == ()
    batches = [who for kind, who in order if kind == "batch"]
    assert len(batches) >= 3
    for thread in set(batches):  # worker threads may drain at once: each in its own order
        kinds = [kind for kind, who in order if who == thread]
        assert kinds == ["batch", "observer"] * batches.count(thread)
    broke = [r for r in caplog.records if "drain observer failed" in r.getMessage()]
    assert len(broke) == len(batches)


_RAN: dict[Any, tuple[int, float, float]] = {}


def _note_where(i: int) -> int:
    t0 = time.perf_counter()
    time.sleep(0.002)
    _RAN[i] = (threading.get_ident(), t0, time.perf_counter())
    return i


@pytest.mark.parametrize("pooled", [False, True])
def test_tasks_are_timed_in_the_thread_that_ran_them_whatever_the_submit(pooled: bool) -> None:
    """dask's own sync scheduler runs tasks in the computing thread; a scheduler built on
    ``dask.local.get_async`` with dask's default ``get_id`` may hand them to a pool."""
    from concurrent.futures import ThreadPoolExecutor

    _RAN.clear()
    keys = [("where-ab12cd34", i) for i in range(12)]
    dsk = {key: (_note_where, key[1]) for key in keys}
    lst = Batches()
    hooks.add_listener(lst)
    try:
        if pooled:
            with ThreadPoolExecutor(3) as pool:
                out = dask.local.get_async(pool.submit, 3, dsk, keys)
        else:
            out = dask.get(dsk, keys)
    finally:
        hooks.remove_listener(lst)
    assert list(out) == list(range(12))
    assert len(lst.events) == len(keys)
    for event in lst.events:
        tid, t0, t1 = _RAN[event.key[1]]
        assert event.tid == tid
        assert event.submit <= event.start <= t0 < t1 <= event.stop
    threads = {event.tid for event in lst.events}
    assert (threading.get_ident() in threads) is not pooled


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_batched_and_per_task_listeners_see_the_same_events(scheduler: str) -> None:
    batched, per_task = Batches(), Recorder()
    hooks.add_listener(batched)
    hooks.add_listener(per_task)
    try:
        out = dask.compute(*[dask.delayed(add)(i, 1) for i in range(20)], scheduler=scheduler)
    finally:
        hooks.remove_listener(batched)
        hooks.remove_listener(per_task)
    assert out == tuple(range(1, 21))

    def times(events: list[TaskEvent]) -> dict[Any, tuple[float, ...]]:
        return {e.key: (e.submit, e.start, e.stop, e.pid, e.tid) for e in events}

    assert len(batched.events) == len(per_task.events) == 20
    assert times(batched.events) == times(per_task.events)


def test_batched_listener_gets_failed_tasks_before_the_compute_ends() -> None:
    ended: list[int] = []

    class Ends(Batches):
        def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
            ended.append(len(self.events))

    def boom(x: int) -> int:
        raise ValueError(x)

    lst = Ends()
    hooks.add_listener(lst)
    try:
        for scheduler in ("sync", "threads"):
            with pytest.raises(ValueError):
                dask.delayed(boom)(dask.delayed(add)(1, 2)).compute(scheduler=scheduler)
    finally:
        hooks.remove_listener(lst)
    assert [e.error for e in lst.events] == [None, "ValueError"] * 2
    assert ended == [2, 4]


def test_reader_flush_hands_over_rows_of_a_running_compute() -> None:
    lst = Batches()
    gate, done = threading.Event(), threading.Event()

    def wait(x: int) -> int:
        done.set()
        gate.wait(10)
        return x

    dsk: dict[Any, Any] = {("t-abc12345", i): (add, i, 1) for i in range(5)}
    dsk["last-abc12345"] = (wait, [("t-abc12345", i) for i in range(5)])
    hooks.add_listener(lst)
    try:
        t = threading.Thread(target=dask.threaded.get, args=(dsk, "last-abc12345"))
        t.start()
        assert done.wait(10)
        assert lst.events == []  # fewer than a batch: still pending
        hooks.flush()
        assert len(lst.events) == 5
        gate.set()
        t.join()
    finally:
        gate.set()
        hooks.remove_listener(lst)
    assert len(lst.events) == 6


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_faulty_batched_listener_is_switched_off_and_compute_unaffected(scheduler: str) -> None:
    class Broken(Batches):
        def on_tasks(self, compute: Compute, batch: hooks.TaskBatch) -> None:
            super().on_tasks(compute, batch)
            raise RuntimeError("batch bug")

    broken, good = Broken(), Batches()
    n = 2 * hooks.BATCH + 3  # full batches are handed over mid-compute, where tasks run
    dsk = {("t-abc12345", i): (add, i, 1) for i in range(n)}
    hooks.add_listener(broken)
    hooks.add_listener(good)
    try:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out = dask.base.named_schedulers[scheduler](dsk, list(dsk))
    finally:
        hooks.remove_listener(broken)
        hooks.remove_listener(good)
    assert list(out) == [i + 1 for i in range(n)]
    assert len([w for w in record if "batch bug" in str(w.message)]) == 1
    assert len(broken.sizes) == 1  # switched off after its first batch
    assert sum(good.sizes) == n


def _spin(x: int) -> int:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.03:
        pass
    return x


def _fail_after(calls: int, original: Any) -> Any:
    """``original`` until it has been called ``calls`` times, then raising."""
    count = [0]

    def method(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        if count[0] > calls:
            raise RuntimeError("collector bug")
        return original(*args, **kwargs)

    return method


@pytest.mark.parametrize("collector", ["tasks", "cache", "resources", "stacks"])
def test_a_collector_failing_mid_run_is_switched_off_once(
    collector: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each collector raising during a 40-task run: the result is unchanged, exactly one
    warning names it, the run records one error for it, the others go on."""
    from daskprofile.collectors import cache, resources, stacks, tasks

    target = {  # (class, method, calls that succeed); rows come in one batch here
        "tasks": (tasks.TaskCollector, "on_tasks", 0),
        "cache": (cache.CacheCollector, "on_tasks", 0),
        "resources": (resources._Tree, "sample", 2),
        "stacks": (stacks._Sampler, "sample", 2),
    }
    label = {"resources": "resource sampler", "stacks": "stack sampler"}.get(collector, collector)
    owner, method, calls = target[collector]
    monkeypatch.setattr(owner, method, _fail_after(calls, getattr(owner, method)))
    parts = [dask.delayed(_spin)(i) for i in range(40)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with daskprofile.profile(dt=0.01, interval=0.005) as run:
            # one task at a time: samples keep coming after a sampler's failure
            out = dask.compute(*parts, scheduler="threads", num_workers=1)
    assert out == tuple(range(40))
    mine = [w for w in caught if str(w.message).startswith(f"daskprofile: {label} ")]
    assert len(mine) == 1, [str(w.message) for w in caught]
    errors = [e for e in run.meta["errors"] if e["collector"] == collector]
    assert len(errors) == 1, run.meta["errors"]
    assert "collector bug" in errors[0]["error"]
    assert len(run.meta["errors"]) == 1  # no other collector suffered
    if collector != "tasks":
        assert len(run.tasks) == 40
    if collector != "resources":
        assert len(run.resources) > 0
