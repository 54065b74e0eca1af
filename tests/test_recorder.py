"""profile(): options and config defaults, history, subscriptions, bounded memory."""

from __future__ import annotations

import threading
import time
from operator import add
from typing import Any

import dask
import pytest

import daskprofile
from daskprofile.record import history as recorder
from daskprofile.record.cursors import Cursors
from daskprofile.run import Run


def small_graph(n: int) -> dict[Any, Any]:
    return {("t-abc12345", i): (add, i, 1) for i in range(n)}


def test_defaults_from_dask_config() -> None:
    with dask.config.set({"daskprofile.stacks.interval": "5ms", "daskprofile.resources.dt": 0.25}):
        p = daskprofile.profile()
    assert p.options.interval == pytest.approx(0.005)
    assert p.options.dt == pytest.approx(0.25)
    assert daskprofile.profile(interval="20ms").options.interval == pytest.approx(0.02)


FIRST_USE_IN_A_CONFIG_BLOCK = """
import dask, daskprofile
with dask.config.set({"daskprofile.stacks.interval": "5ms"}):
    with daskprofile.profile(resources=False) as run:  # the first use: defaults load here
        dask.delayed(sum)([1, 2]).compute()
    print(run.meta["options"]["interval"])
with daskprofile.profile(resources=False) as run:  # the block's exit took the defaults
    dask.delayed(sum)([1, 2]).compute()
print(run.meta["options"]["interval"], len(run.tasks), dask.config.get("daskprofile.history"))
"""


def test_first_use_inside_a_config_block_leaves_the_defaults_in_place() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", FIRST_USE_IN_A_CONFIG_BLOCK],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out == ["0.005", "0.01", "1", "8"]


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"dt": 0}, ValueError, "dt"),
        ({"dt": -1}, ValueError, "dt"),
        ({"interval": 0}, ValueError, "interval"),
        ({"interval": "soon"}, ValueError, "interval"),
        ({"interval": [1]}, TypeError, "interval"),
        ({"max_records": 0}, ValueError, "max_records"),
        ({"max_records": 1.5}, TypeError, "max_records"),
        ({"tasks": "yes"}, TypeError, "tasks"),
        ({"metric": 3}, TypeError, "metric"),
    ],
)
def test_invalid_arguments_name_the_argument(
    kwargs: dict[str, Any], exc: type[Exception], name: str
) -> None:
    with pytest.raises(exc, match=name):
        daskprofile.profile(**kwargs)


def test_drop_in_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="dt"):
        daskprofile.ResourceProfiler(dt=0)
    with pytest.raises(TypeError, match="metric"):
        daskprofile.CacheProfiler(metric=5)
    with pytest.raises(ValueError, match="width"):
        daskprofile.ProgressBar(width=0)


def test_collects_all_computes_of_the_block_from_any_thread() -> None:
    with daskprofile.profile(resources=False, stacks=False) as run:
        dask.get(small_graph(3), list(small_graph(3)))
        t = threading.Thread(target=lambda: dask.threaded.get(small_graph(4), list(small_graph(4))))
        t.start()
        t.join()
    assert len(run.tasks) == 7
    assert run.meta["computes"] == 2


def test_memory_cap_drops_oldest_and_counts_them() -> None:
    with daskprofile.profile(resources=False, stacks=False, max_records=100) as run:
        dask.get(small_graph(500), list(small_graph(500)))
    tasks = run.tasks
    assert 80 <= len(tasks) <= 100
    assert run.meta["dropped"]["tasks"] == 500 - len(tasks)
    assert run.summary()["dropped"]["tasks"] > 0
    # the newest are kept, with their own keys
    assert tasks["start"].is_monotonic_increasing
    assert all(k.startswith("('t-abc12345', ") for k in tasks["key"])


def test_memory_cap_bounds_the_resource_samples_too() -> None:
    with daskprofile.profile(stacks=False, cache=False, dt=0.002, max_records=10) as run:
        time.sleep(0.2)  # ~100 samples
        dask.get(small_graph(5), list(small_graph(5)))
    assert len(run.resources) == 10
    assert run.meta["dropped"]["resources"] > 20
    assert run.resources["time"].is_monotonic_increasing  # the newest, in order


def test_history_and_subscriptions() -> None:
    recorder.clear_history()
    started: list[Run] = []
    ended: list[Run] = []
    live_at_start: list[bool] = []

    def on_start(run: Run, cursors: Cursors) -> None:
        started.append(run)
        live_at_start.append(run in recorder.live_runs())
        assert cursors.tasks is not None  # the recording's own readers come with the run

    unsubscribe = recorder.subscribe(on_start, ended.append)
    try:
        with dask.config.set({"daskprofile.history": 2}):
            for _ in range(3):
                with daskprofile.profile(resources=False, stacks=False):
                    dask.get(small_graph(2), list(small_graph(2)))
    finally:
        unsubscribe()
    assert len(started) == len(ended) == 3
    assert all(live_at_start)
    assert all(r.finished for r in ended)
    assert recorder.history() == ended[1:]
    assert recorder.live_runs() == []
    with daskprofile.profile(resources=False, stacks=False):
        pass
    assert len(ended) == 3  # unsubscribed
    recorder.clear_history()


def test_subscriber_error_is_a_warning() -> None:
    def broken(run: Run) -> None:
        raise RuntimeError("subscriber bug")

    unsubscribe = recorder.subscribe(on_end=broken)
    try:
        with (
            pytest.warns(RuntimeWarning, match="subscriber bug"),
            daskprofile.profile(resources=False, stacks=False),
        ):
            pass
    finally:
        unsubscribe()
    recorder.clear_history()


def test_incremental_cursor() -> None:
    from daskprofile import hooks
    from daskprofile.collectors.tasks import TaskCollector

    tc = TaskCollector()
    hooks.add_listener(tc)
    try:
        dask.get(small_graph(3), list(small_graph(3)))
        rows, cursor = tc.since(0)
        assert len(rows["key"]) == 3
        assert cursor == 3
        rows, cursor2 = tc.since(cursor)
        assert rows["key"] == []
        assert cursor2 == 3
        dask.get(small_graph(2), list(small_graph(2)))
        rows, cursor3 = tc.since(cursor2)
        assert len(rows["key"]) == 2
        assert cursor3 == 5
        assert [rows["groups"][g] for g in rows["group"]] == ["t", "t"]
    finally:
        hooks.remove_listener(tc)


def test_stacks_from_worker_processes() -> None:
    import time

    def spin(x: int) -> int:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.3:
            pass
        return x

    with daskprofile.profile(resources=False, interval=0.005) as run:
        dask.compute(
            *[dask.delayed(spin)(i) for i in range(2)], scheduler="processes", num_workers=2
        )
    assert "spin" in run.stacks
    assert run.stacks["spin"]["count"] > 10


def test_concurrent_computes_recorded_row_by_row() -> None:
    barrier = threading.Barrier(3)

    def work(tag: str) -> None:
        dsk = {(f"{tag}-abc12345", i): (add, i, 1) for i in range(300)}
        barrier.wait()
        dask.threaded.get(dsk, list(dsk), num_workers=2)

    with daskprofile.profile(resources=False, stacks=False) as run:
        threads = [threading.Thread(target=work, args=(t,)) for t in ("left", "mid", "right")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    tasks = run.tasks
    assert len(tasks) == 900
    assert tasks["compute"].nunique() == 3
    # every row is whole: its key, group and compute belong together
    for _, rows in tasks.groupby("compute"):
        (group,) = set(rows["group"])
        assert all(k.startswith(f"('{group}-abc12345', ") for k in rows["key"])
        assert len(set(rows["key"])) == 300


def test_runs_recorded_elsewhere_can_be_announced() -> None:
    recorder.clear_history()
    seen: list[tuple[str, Run]] = []
    unsubscribe = recorder.subscribe(
        lambda r, c: seen.append(("start", r)), lambda r: seen.append(("end", r))
    )
    try:
        run = Run({"id": "elsewhere", "finished": False})
        recorder.started(run, Cursors())
        assert recorder.live_runs() == [run]
        run.finish(1.0)
        recorder.finished(run)
    finally:
        unsubscribe()
    assert seen == [("start", run), ("end", run)]
    assert recorder.history() == [run]
    assert recorder.live_runs() == []
    recorder.clear_history()
