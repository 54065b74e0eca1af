"""Spans: ``daskprofile.span`` (and distributed's ``span``) name parts of a computation; each
task's span is in ``run.tasks``, per-span figures in ``summary()``, ``run.filter(span=)``
narrows every view. Real schedulers and a real LocalCluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pandas as pd
import pytest

import daskprofile
from daskprofile import spans

distributed = pytest.importorskip("distributed")

#: the cluster tests need distributed's process-wide threads started first
pytestmark = pytest.mark.usefixtures("distributed_threads")

HOSTILE = "<b>bold</b>"


def load_part(x: int) -> int:
    return x + 1


def clean_part(x: int) -> int:
    return x * 2


def report_part(x: int) -> int:
    return x - 1


def outside(x: int) -> int:
    return x


def fails(x: int) -> int:
    raise ValueError(x)


def _span_of(run: Any) -> dict[str, Any]:
    """The span of each task group of a run."""
    tasks = run.tasks
    out: dict[str, Any] = {}
    for group, span in zip(tasks["group"], tasks["span"], strict=True):
        out[group] = span if isinstance(span, str) else None
    return out


# ---------------------------------------------------------------- the API
@pytest.mark.parametrize("bad", [123, None, b"load", ("a",)])
def test_a_span_name_that_is_not_a_string_is_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match="span name"):
        daskprofile.span(bad)


@pytest.mark.parametrize("bad", ["", "   "])
def test_an_empty_span_name_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="span name"):
        daskprofile.span(bad)


def test_spans_nest_into_distributeds_annotation_shape() -> None:
    with daskprofile.span("outer") as outer_id:
        with daskprofile.span("inner") as inner_id:
            annotation = dask.get_annotations()["span"]
        assert dask.get_annotations()["span"]["name"] == ("outer",)
    assert "span" not in dask.get_annotations()
    assert annotation == {"name": ("outer", "inner"), "ids": (outer_id, inner_id)}


def test_a_span_block_cannot_be_entered_twice() -> None:
    block = daskprofile.span("once")
    with block:
        pass
    with pytest.raises(RuntimeError, match="twice"):
        block.__enter__()


# ---------------------------------------------------------------- local schedulers
@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_tasks_carry_the_span_open_when_they_were_computed(scheduler: str) -> None:
    with daskprofile.profile(resources=False, stacks=False) as run:
        with daskprofile.span("load"):
            dask.delayed(load_part)(1).compute(scheduler=scheduler)
            with daskprofile.span("clean"):
                dask.delayed(clean_part)(1).compute(scheduler=scheduler)
        dask.delayed(outside)(1).compute(scheduler=scheduler)
    assert _span_of(run) == {"load_part": "load", "clean_part": "load/clean", "outside": None}


def test_a_collection_made_in_a_span_keeps_it_when_computed_outside() -> None:
    with daskprofile.span("made"):
        made = dask.delayed(load_part)(1)
    later = dask.delayed(clean_part)(made)
    with daskprofile.profile(resources=False, stacks=False) as run:
        assert later.compute(scheduler="threads") == 4
        with daskprofile.span("now"):  # the layer's own span wins, as on a cluster
            assert later.compute(scheduler="threads") == 4
    tasks = run.tasks
    assert tasks.loc[tasks["group"] == "load_part", "span"].tolist() == ["made", "made"]
    assert tasks.loc[tasks["group"] == "clean_part", "span"].tolist()[1] == "now"


def test_array_tasks_fused_by_dask_belong_to_the_span_of_the_compute() -> None:
    da = pytest.importorskip("dask.array")
    x = da.ones((20, 20), chunks=10)
    with daskprofile.profile(resources=False, stacks=False) as run, daskprofile.span("array"):
        assert float((x + 1).sum().compute(scheduler="threads")) == 800
    assert len(run.tasks) >= 4
    assert set(run.tasks["span"]) == {"array"}


def test_summary_filter_save_and_snapshot_by_span(tmp_path: Path) -> None:
    with daskprofile.profile(resources=False, stacks=False) as run:
        with daskprofile.span("pipeline"):
            dask.compute(*[dask.delayed(load_part)(i) for i in range(3)], scheduler="threads")
            with daskprofile.span(HOSTILE), pytest.raises(ValueError):
                dask.delayed(fails)(1).compute(scheduler="threads")
        dask.delayed(outside)(1).compute(scheduler="threads")
    rows = {r["span"]: r for r in run.summary()["spans"]}
    assert set(rows) == {"pipeline", f"pipeline/{HOSTILE}"}
    assert rows["pipeline"]["tasks"] == 3
    assert rows[f"pipeline/{HOSTILE}"]["errors"] == 1
    # one span and its sub-spans: every view of the filtered run
    part = run.filter(span="pipeline")
    assert set(part.tasks["group"]) == {"load_part", "fails"}
    assert part.summary()["tasks"] == 4
    assert part.exceptions["span"].tolist() == [f"pipeline/{HOSTILE}"]
    inner = run.filter(span=f"pipeline/{HOSTILE}")
    assert inner.tasks["group"].tolist() == ["fails"]
    assert run.filter(span="pipe").tasks.empty  # a path, not a prefix of a name
    # saved and loaded with the run
    loaded = daskprofile.load(run.save(tmp_path / "run.npz"))
    pd.testing.assert_frame_equal(loaded.tasks, run.tasks)
    assert loaded.summary()["spans"] == run.summary()["spans"]
    # the snapshot's span table, escaped
    page = Path(run.to_html(tmp_path / "snap.html")).read_text()
    assert "<h3>Spans</h3>" in page
    assert HOSTILE not in page
    assert "pipeline/&lt;b&gt;bold&lt;/b&gt;" in page


@pytest.mark.parametrize(("bad", "error"), [(1, TypeError), ("", ValueError), ("/", ValueError)])
def test_filter_refuses_a_bad_span(bad: Any, error: type[Exception]) -> None:
    with daskprofile.profile(resources=False, stacks=False) as run:
        dask.delayed(outside)(1).compute(scheduler="sync")
    with pytest.raises(error, match="span"):
        run.filter(span=bad)


def test_without_spans_nothing_is_looked_up_and_the_column_is_empty() -> None:
    with daskprofile.profile(resources=False, stacks=False) as run:
        dask.delayed(outside)(1).compute(scheduler="threads")
    assert run.tasks["span"].isna().all()
    assert run.summary()["spans"] == []
    assert spans.current() is None
    assert spans.of_compute({"x": 1}, None) is None  # a plain graph: no annotation to read


# ---------------------------------------------------------------- a cluster


@pytest.fixture
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _scheduler_spans(dask_scheduler: Any) -> list[tuple[str, ...]]:
    return sorted(s.name for s in dask_scheduler.extensions["spans"].spans.values())


@pytest.mark.slow
def test_spans_on_a_cluster_from_both_apis(client: Any) -> None:
    with daskprofile.profile(client=client, resources=False, stacks=False) as run:
        with daskprofile.span("load"):
            client.submit(load_part, 1).result()
            with daskprofile.span("clean"):
                client.compute(dask.delayed(clean_part)(1)).result()
        with distributed.span("report"):
            client.submit(report_part, 1).result()
        client.submit(outside, 1).result()
    assert _span_of(run) == {
        "load_part": "load",
        "clean_part": "load/clean",
        "report_part": "report",
        "outside": None,
    }
    # daskprofile.span made spans distributed's own extension knows
    known = client.run_on_scheduler(_scheduler_spans)
    assert ("load", "clean") in known
    assert ("report",) in known
    assert {r["span"] for r in run.summary()["spans"]} == {"load", "load/clean", "report"}
    assert set(run.filter(span="load").tasks["group"]) == {"load_part", "clean_part"}


@pytest.mark.slow
def test_a_failed_task_on_a_cluster_is_in_its_span(client: Any) -> None:
    with (
        daskprofile.profile(client=client, resources=False, stacks=False) as run,
        daskprofile.span("risky"),
        pytest.raises(ValueError),
    ):
        client.submit(fails, 7).result()
    assert run.exceptions["span"].tolist() == ["risky"]
    assert run.exceptions["message"].tolist() == ["7"]
