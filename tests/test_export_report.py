"""``daskprofile.performance_report``: distributed's API over the local schedulers."""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Any

import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.report import NO_CODE, performance_report

GRAPH = {"inc-1": (operator.add, 1, 1), "inc-2": (operator.add, 2, 1)}


def compute(scheduler: str = "threads") -> Any:
    return named_schedulers[scheduler](GRAPH, list(GRAPH), num_workers=2)


def test_report_has_tasks_title_and_calling_code(tmp_path: Path) -> None:
    path = tmp_path / "dask-report.html"
    with daskprofile.performance_report(filename=path):
        assert compute() == (2, 3)
    text = path.read_text()
    assert "<title>Dask Performance Report</title>" in text
    assert "Calling code" in text
    assert "def test_report_has_tasks_title_and_calling_code" in text  # this function's source
    assert ">inc<" in text  # the group row
    assert 'src="https://cdn.bokeh.org' not in text


def _report_from_helper(path: Path, stacklevel: int) -> None:
    with performance_report(filename=path, stacklevel=stacklevel):
        compute("sync")


def test_stacklevel_picks_the_frame_whose_code_is_shown(tmp_path: Path) -> None:
    _report_from_helper(tmp_path / "one.html", 1)
    _report_from_helper(tmp_path / "two.html", 2)
    assert "def _report_from_helper" in (tmp_path / "one.html").read_text()
    two = (tmp_path / "two.html").read_text()
    assert "def test_stacklevel_picks_the_frame_whose_code_is_shown" in two


def test_report_is_written_and_the_error_propagates(tmp_path: Path) -> None:
    path = tmp_path / "failed.html"
    with pytest.raises(ZeroDivisionError), performance_report(filename=path):
        named_schedulers["threads"]({"boom-1": (operator.truediv, 1, 0)}, ["boom-1"])
    text = path.read_text()
    assert "Failed tasks" in text
    assert "ZeroDivisionError" in text


def test_mode_cdn_loads_bokehjs_from_the_cdn(tmp_path: Path) -> None:
    inline, cdn = tmp_path / "inline.html", tmp_path / "cdn.html"
    with performance_report(filename=inline, mode="inline"):
        compute()
    with performance_report(filename=cdn, mode="cdn"):
        compute()
    assert 'src="https://cdn.bokeh.org' in cdn.read_text()
    assert cdn.stat().st_size < inline.stat().st_size / 4


def test_invalid_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        performance_report(mode="server")


def test_storage_options_and_urls_go_through_fsspec() -> None:
    fsspec = pytest.importorskip("fsspec")
    with performance_report(filename="memory://reports/r.html", storage_options={}):
        compute()
    with fsspec.open("memory://reports/r.html", "r") as f:
        assert "Dask Performance Report" in f.read()
    fsspec.filesystem("memory").rm("/reports", recursive=True)


def test_async_with(tmp_path: Path) -> None:
    path = tmp_path / "async.html"

    async def main() -> None:
        async with performance_report(filename=path):
            compute("sync")

    asyncio.run(main())
    assert "async with performance_report" in path.read_text()


def test_calling_code_placeholder_without_source(tmp_path: Path) -> None:
    path = tmp_path / "exec.html"
    source = "with performance_report(filename=path):\n    compute()\n"
    exec(compile(source, "<no file>", "exec"), {**globals(), "path": path})
    assert NO_CODE.replace("<", "&lt;").replace(">", "&gt;") in path.read_text()


def test_with_a_distributed_client_the_cluster_is_in_the_report(tmp_path: Path) -> None:
    import distributed

    path = tmp_path / "client.html"
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
        performance_report(filename=path) as report,
    ):
        compute("threads")  # local scheduler, explicitly
        client.submit(len, "on-the-cluster", key="clusterlen-1").result()
    tasks = report.run.tasks
    assert "clusterlen" in set(tasks["group"])  # the cluster's task
    assert "inc" in set(tasks["group"])  # and the local ones, in one run
    assert "distributed" in report.run.meta["schedulers"]
    text = path.read_text()
    assert "clusterlen" in text
    assert "could not be " + "recorded" not in text  # (the calling code is in the report)
