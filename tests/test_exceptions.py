"""``run.exceptions``: the tasks that raised, with type, message and traceback, on every
scheduler (real ones), saved with the run, shown escaped in the snapshot."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import pytest

import daskprofile
from daskprofile.collectors.exceptions import ExceptionTable
from daskprofile.failures import TRACEBACK_CHARS, cut, describe, message_from_repr

distributed = pytest.importorskip("distributed")

#: the cluster tests need distributed's process-wide threads started first
pytestmark = pytest.mark.usefixtures("distributed_threads")

HOSTILE = "<script>alert('x')</script>"


class Custom(Exception):
    """An exception type of the user's own."""


def user_function_that_fails(x: int) -> int:
    raise Custom(f"bad value {x} {HOSTILE}")


def deep(n: int) -> int:
    """Recursion through two functions: Python prints every frame (no repeat is folded)."""
    if n == 0:
        raise ValueError("at the bottom")
    return deeper(n - 1)


def deeper(n: int) -> int:
    return deep(n)


def inc(x: int) -> int:
    return x + 1


def _raised(scheduler: str, fn: Any = user_function_that_fails) -> BaseException:
    try:
        dask.delayed(fn)(1, dask_key_name=f"failing-{HOSTILE}").compute(scheduler=scheduler)
    except BaseException as exc:
        return exc
    raise AssertionError("the task did not raise")


def _check_row(row: pd.Series, worker_like: str) -> None:
    assert row["type"] == "Custom"
    assert row["message"] == f"bad value 1 {HOSTILE}"
    assert "user_function_that_fails" in row["traceback"]
    assert row["key"] == f"failing-{HOSTILE}"
    assert row["group"] == "failing"
    assert re.search(worker_like, row["worker"]), row["worker"]
    assert row["time"] >= 0


# ---------------------------------------------------------------- local schedulers
@pytest.mark.parametrize(
    ("scheduler", "worker_like"),
    [("sync", "main thread"), ("threads", r"^thread \d+$"), ("processes", r"^process \d+$")],
)
def test_a_failed_task_has_its_type_message_and_traceback(scheduler: str, worker_like: str) -> None:
    bare = _raised(scheduler)
    with daskprofile.profile(resources=False, stacks=False) as run:
        profiled = _raised(scheduler)
        assert dask.delayed(inc)(1).compute(scheduler=scheduler) == 2
    # the user's compute raises as it does without daskprofile
    assert type(profiled) is type(bare)
    assert str(profiled) == str(bare)
    table = run.exceptions
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == [
        *("key", "group", "worker", "time", "type", "message", "traceback", "compute"),
        "span",
    ]
    assert len(table) == 1
    _check_row(table.iloc[0], worker_like)
    failed = run.tasks[run.tasks["status"] == "error"]
    assert failed["worker"].tolist() == [table.iloc[0]["worker"]]
    assert run.summary()["errors"] == 1
    assert run.summary()["error_types"] == {"Custom": 1}


def test_the_traceback_starts_at_the_users_code_and_is_bounded() -> None:
    with (
        daskprofile.profile(resources=False, stacks=False) as run,
        pytest.raises(ValueError, match="at the bottom"),
    ):
        dask.delayed(deep)(200).compute(scheduler="threads")
    trace = run.exceptions.iloc[0]["traceback"]
    assert len(trace) <= TRACEBACK_CHARS + 100
    assert "characters cut" in trace
    assert trace.rstrip().endswith("ValueError: at the bottom")
    assert "dask/local.py" not in trace  # dask's task running frames are left out
    assert "in deep" in trace


def test_a_run_without_failures_has_an_empty_table() -> None:
    with daskprofile.profile(resources=False, stacks=False) as run:
        dask.delayed(inc)(1).compute(scheduler="threads")
    assert run.exceptions.empty
    assert run.summary()["error_types"] == {}
    assert run.meta.dropped.get("exceptions") == 0


def test_failures_with_a_metric_on_sync_are_recorded_too() -> None:
    """A listener that wants each result (a cache metric) puts the sync scheduler in
    envelope mode, where dask re-raises the failure before it comes back."""
    with (
        daskprofile.profile(resources=False, stacks=False, metric=lambda r: 1.0) as run,
        pytest.raises(Custom),
    ):
        dask.delayed(user_function_that_fails)(1).compute(scheduler="sync")
    assert run.exceptions["type"].tolist() == ["Custom"]
    assert run.tasks["status"].tolist() == ["error"]


# ---------------------------------------------------------------- bounds
def test_the_table_keeps_the_first_rows_and_counts_the_others() -> None:
    table = ExceptionTable(max_rows=2)
    for i in range(5):
        table.add(f"k-{i}", "k", "thread 0", float(i), "E", "m" * 5000, "t" * 10**5, 1)
    snap = table.snapshot()
    assert snap["key"] == ["k-0", "k-1"]
    assert snap["dropped"] == 3
    assert all(len(t) < 5000 for t in snap["traceback"])
    assert all(len(m) < 1200 for m in snap["message"])


def test_texts_are_cut_around_the_middle_and_describe_never_raises() -> None:
    assert cut("short", 10) == "short"
    long = "a" * 50 + "b" * 50
    out = cut(long, 40)
    assert out.startswith("a" * 10)
    assert out.endswith("b" * 30)
    assert "60 characters cut" in out

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    message, trace = describe(Unprintable())
    assert "Unprintable" in message
    assert isinstance(trace, str)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ValueError('bad')", "bad"),
        ('KeyError("x")', "x"),
        ("ValueError()", ""),
        ("OSError(2, 'No such file')", "(2, 'No such file')"),
        ("Weird<not a repr>", "Weird<not a repr>"),
        ("RuntimeError(<object at 0x1>)", "RuntimeError(<object at 0x1>)"),
    ],
)
def test_the_message_is_recovered_from_a_clusters_repr(text: str, message: str) -> None:
    assert message_from_repr(text) == message


# ---------------------------------------------------------------- values and views
@pytest.fixture(scope="module")
def failed_run() -> Any:
    with daskprofile.profile(resources=False, stacks=False) as run:
        _raised("threads")
        dask.delayed(inc)(1).compute(scheduler="threads")
    return run


def test_exceptions_survive_save_and_load(failed_run: Any, tmp_path: Path) -> None:
    loaded = daskprofile.load(failed_run.save(tmp_path / "run.npz"))
    pd.testing.assert_frame_equal(loaded.exceptions, failed_run.exceptions)
    assert loaded.summary()["error_types"] == {"Custom": 1}
    again = daskprofile.Run.from_dict(failed_run.to_dict())
    pd.testing.assert_frame_equal(again.exceptions, failed_run.exceptions)


def test_a_file_saved_without_the_new_columns_still_loads(failed_run: Any, tmp_path: Path) -> None:
    path = failed_run.save(tmp_path / "run.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != "tasks.span"}
    old = tmp_path / "old.npz"
    with open(old, "wb") as f:
        np.savez_compressed(f, **arrays)
    loaded = daskprofile.load(old)
    assert loaded.tasks["span"].isna().all()
    assert len(loaded.tasks) == len(failed_run.tasks)
    assert loaded.filter(span="any").tasks.empty
    assert loaded.summary()["spans"] == []


def test_the_snapshot_lists_exceptions_with_every_text_escaped(
    failed_run: Any, tmp_path: Path
) -> None:
    page = Path(failed_run.to_html(tmp_path / "snap.html")).read_text()
    assert "Exceptions" in page
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "user_function_that_fails" in page
    assert '<details class="dp-exception">' in page


# ---------------------------------------------------------------- a cluster


@pytest.fixture
def process_client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        c.run(inc, 0)  # the worker imports this module before any timing
        yield c


@pytest.mark.slow
def test_a_failed_task_on_a_cluster_has_its_texts(process_client: Any, tmp_path: Path) -> None:
    with pytest.raises(Custom) as bare:
        process_client.submit(user_function_that_fails, 1, key="bare").result()
    with daskprofile.profile(client=process_client, resources=False, stacks=False) as run:
        with pytest.raises(Custom) as profiled:
            process_client.submit(user_function_that_fails, 1, key=f"failing-{HOSTILE}").result()
        assert process_client.submit(inc, 1).result() == 2
    assert str(profiled.value) == str(bare.value)
    table = run.exceptions
    assert len(table) == 1, (run.tasks.to_dict("records"), run.meta.errors)
    _check_row(table.iloc[0], r"^tcp://.+ thread \d+$")
    assert run.tasks.loc[run.tasks["status"] == "error", "error"].tolist() == ["Custom"]
    loaded = daskprofile.load(run.save(tmp_path / "cluster.npz"))
    pd.testing.assert_frame_equal(loaded.exceptions, table)
