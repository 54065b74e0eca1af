"""The ipywidget ProgressBar: counting and drawing in this process, then in a real kernel."""

from __future__ import annotations

import html
import io
import time
from pathlib import Path
from typing import Any

import dask
import dask.multiprocessing
import dask.threaded
import pytest

import daskprofile
from daskprofile import diagnostics
from daskprofile.jupyter import widgets
from nbkernel import (
    HOSTILE,
    IMG,
    execute,
    offline_page_fixture,  # noqa: F401 - the offline_page fixture
    outputs,
    progress_models,
    stream,
    widget_views,
)


def inc(x: int) -> int:
    return x + 1


def slow(x: int) -> int:
    time.sleep(0.002)
    return x


def boom() -> None:
    raise ZeroDivisionError("boom")


@pytest.fixture
def displayed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the bar displays, as if in a kernel (IPython's display is recorded)."""
    import IPython.display

    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    return shown


def widget_bar(**kwargs: Any) -> widgets.ProgressBar:
    bar = widgets.ProgressBar(**kwargs)
    bar.text = False  # widget mode without a kernel: the frontend is not needed to count
    return bar


def graph(n: int) -> dict[Any, Any]:
    dsk: dict[Any, Any] = {("inc-5f3e0c0d", i): (inc, i) for i in range(n)}
    dsk.update({("slow-9a1b2c3d", i): (slow, ("inc-5f3e0c0d", i)) for i in range(n)})
    dsk["data"] = 1  # data, not a task
    return dsk


GETTERS = {"sync": dask.get, "threads": dask.threaded.get, "processes": dask.multiprocessing.get}


def _state(bar: widgets.ProgressBar) -> tuple[str, Any, str]:
    header, progress, groups = bar.widget.children
    return header.value, progress, groups.value


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_counts_every_task_per_group(displayed: list[Any], scheduler: str) -> None:
    bar = widget_bar()
    dsk = graph(50)
    with bar:
        dask.compute(dask.delayed(sum)([1, 2]), scheduler=scheduler)
        GETTERS[scheduler](dsk, list(dsk))
    t = bar.tally
    assert (t.done, t.total, t.erred, t.computes) == (101, 101, 0, 2)
    assert ("inc", 50, 50) in t.rows()
    assert ("slow", 50, 50) in t.rows()
    header, progress, groups = _state(bar)
    assert header.startswith("Completed 101 / 101 tasks · 2 computes · erred 0")
    assert (progress.value, progress.max, progress.bar_style) == (101, 101, "success")
    assert "50 / 50" in groups
    assert displayed == [bar.widget]  # shown once for the whole block


def test_failed_compute_is_erred_and_red(displayed: list[Any]) -> None:
    bar = widget_bar()
    with bar, pytest.raises(ZeroDivisionError):
        dask.compute(dask.delayed(boom)(), scheduler="threads")
    header, progress, _ = _state(bar)
    assert progress.bar_style == "danger"
    assert "erred 1" in header
    assert header.startswith("Failed after")


def test_updates_come_from_a_timer_not_per_task(displayed: list[Any]) -> None:
    bar = widget_bar(dt=0.1)
    changes: list[int] = []
    with bar:
        dask.compute(dask.delayed(inc)(0), scheduler="sync")  # creates the widgets
        bar.widget.children[1].observe(lambda c: changes.append(c["new"]), "value")
        dsk = {("slow", i): (slow, i) for i in range(400)}  # ~0.9 s on 1 thread
        start = time.perf_counter()
        dask.get(dsk, list(dsk))
        elapsed = time.perf_counter() - start
    assert len(changes) <= elapsed / 0.1 + 3  # at most one update per tick (+ final)
    assert changes[-1] == 401
    assert len(changes) >= 3  # it did move while running


def test_minimum_hides_short_computes(displayed: list[Any]) -> None:
    bar = widget_bar(minimum=5)
    with bar:
        dask.compute(dask.delayed(inc)(1), scheduler="threads")
    assert displayed == []


def test_groups_are_escaped_and_many_groups_are_summed() -> None:
    tally = widgets.Tally()
    for i in range(20):
        tally.group_total.append(20 - i)
        tally.group_done.append(1)
        tally.index.group_id(f"g{i}")
    rows = tally.rows(limit=5)
    assert len(rows) == 5
    assert rows[-1] == ("16 other groups", 16, sum(range(1, 17)))
    page = widgets.groups_html([(HOSTILE, 1, 2)])
    assert IMG not in page
    assert "<script>" not in page
    assert html.escape(HOSTILE) in page


def test_group_rows_add_counts_from_a_cluster() -> None:
    tally = widgets.Tally()
    for group, done, total in [("inc", 3, 4), ("sum", 1, 1)]:
        tally.index.group_id(group)
        tally.group_done.append(done)
        tally.group_total.append(total)
    rows = tally.rows(extra={"inc": (10, 10), "load": (2, 6)})
    assert rows == [("inc", 13, 14), ("load", 2, 6), ("sum", 1, 1)]
    assert tally.rows() == [("inc", 3, 4), ("sum", 1, 1)]


def test_outside_a_kernel_it_is_the_text_bar() -> None:
    assert daskprofile.ProgressBar is diagnostics.ProgressBar
    out = io.StringIO()
    bar = widgets.ProgressBar(out=out)
    assert bar.text
    assert isinstance(bar, diagnostics.ProgressBar)
    with bar:
        dask.compute(dask.delayed(inc)(1), scheduler="threads")
    assert "100% Completed" in out.getvalue()
    assert bar.widget is None


# -- in a real kernel ---------------------------------------------------------------------

SETUP = f"""
import sys, threading, time
import dask
from daskprofile import ProgressBar
HOSTILE = {HOSTILE!r}
def inc(x):
    time.sleep(0.003)
    return x + 1
def boom():
    raise ZeroDivisionError("boom")
"""
CELLS = {
    "setup": SETUP,
    "ok": "with ProgressBar():\n"
    "    dask.compute(*[dask.delayed(inc)(i, dask_key_name=(HOSTILE, i)) for i in range(30)],\n"
    "                 *[dask.delayed(inc)(i, dask_key_name=('other', i)) for i in range(10)])",
    "fails": "with ProgressBar():\n"
    "    try:\n        dask.compute(dask.delayed(boom)())\n"
    "    except ZeroDivisionError:\n        pass",
    "minimum": "with ProgressBar(minimum=5):\n    dask.compute(dask.delayed(inc)(1))",
    "text": "with ProgressBar(out=sys.stdout):\n    dask.compute(dask.delayed(inc)(1))",
    "after": "print(ProgressBar.__module__,"
    " [t.name for t in threading.enumerate() if t.name.startswith('daskprofile')])",
}
INDEX = {name: i for i, name in enumerate(CELLS)}


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return execute(list(CELLS.values()), tmp_path_factory.mktemp("widgets"))


def test_kernel_bar_final_state(nb: Any) -> None:
    assert not any(outputs(nb, i, "error") for i in range(len(CELLS)))
    (model_id,) = widget_views(nb, INDEX["ok"])
    header, bar, groups = progress_models(nb, model_id)
    assert (bar["value"], bar["max"], bar["bar_style"]) == (40, 40, "success")
    assert header["value"].startswith("Completed 40 / 40 tasks · 1 compute · erred 0")
    assert html.escape(HOSTILE) in groups["value"]
    assert IMG not in groups["value"]
    assert "30 / 30" in groups["value"]
    assert "10 / 10" in groups["value"]


def test_kernel_bar_failure_minimum_text_fallback_and_cleanup(nb: Any) -> None:
    (model_id,) = widget_views(nb, INDEX["fails"])
    header, bar, _ = progress_models(nb, model_id)
    assert bar["bar_style"] == "danger"
    assert "erred 1" in header["value"]
    assert widget_views(nb, INDEX["minimum"]) == []
    assert widget_views(nb, INDEX["text"]) == []
    assert "100% Completed" in stream(nb, INDEX["text"])
    assert stream(nb, INDEX["after"]).strip() == "daskprofile.jupyter.widgets []"


def test_kernel_bar_groups_render_as_text_in_a_browser(
    nb: Any, offline_page: tuple[Any, dict[str, list[str]]], tmp_path: Path
) -> None:
    (model_id,) = widget_views(nb, INDEX["ok"])
    _, _, groups = progress_models(nb, model_id)
    page, seen = offline_page
    path = tmp_path / "widget.html"
    path.write_text("<!DOCTYPE html><html><body><div id=w></div></body></html>")
    page.goto(path.as_uri())
    page.evaluate("(v) => { document.getElementById('w').innerHTML = v; }", groups["value"])
    page.wait_for_timeout(200)  # an injected onerror handler would have fired by now
    assert HOSTILE in page.inner_text("#w")
    assert page.evaluate("() => document.querySelectorAll('img[src=x]').length") == 0
    assert seen == {"refused": [], "dialogs": [], "errors": []}
