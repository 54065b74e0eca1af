"""The span selector on a real kernel (threads scheduler), in a real JupyterLab and a real
Chromium: a cell computes inside ``daskprofile.span("load")`` and ``daskprofile.span(
"reduce")``; the panel's selector lists both, and picking "load" leaves only load's tasks
drawn (the others dimmed), its counts in the progress and the run bar. The model is read
through the test hook."""

from __future__ import annotations

from typing import Any

from helpers import (
    PANEL,
    enable_test_hook,
    open_notebook_in_workspace,
    open_panel,
    run_code,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

STREAM = ".jp-DaskProfile-taskStream canvas"
SELECT = f"{PANEL} .jp-DaskProfile-spanSelect"
SLOW = 240_000  # ms: the machine is shared

# 12 tasks in load (slow enough to be drawn wide), 5 in reduce, 3 in no span
CELL = (
    "import time, dask, daskprofile\n"
    "nap = lambda x: time.sleep(0.05) or x\n"
    "with daskprofile.span('load'):\n"
    "    a = [dask.delayed(nap)(i) for i in range(12)]\n"
    "with daskprofile.span('reduce'):\n"
    "    b = [dask.delayed(nap)(i) for i in range(5)]\n"
    "c = [dask.delayed(nap)(i) for i in range(3)]\n"
    "print('SUM', sum(sum(x) for x in dask.compute(a, b, c, scheduler='threads')))\n"
)

# what the model holds for the current run: per span path, the tasks and their span ids
MODEL_JS = """() => {
  const model = window.daskprofileTestHook.model;
  const run = model.current;
  const ids = [...run.taskSpan.view()];
  const name = id => id === 0 ? 'none' : run.spanNames.get(id);
  const count = {};
  ids.forEach(id => { count[name(id)] = (count[name(id)] || 0) + 1; });
  return {filter: model.spanFilter, paths: run.spanPaths(), count,
          load: run.spanCounts('load').tasks, finished: run.finished};
}"""


def _stream(page: Any) -> dict[str, int]:
    data = page.evaluate(f"() => ({{...document.querySelector('{STREAM}').dataset}})")
    return {k: int(data.get(k) or 0) for k in ("rects", "shown", "dimmed")}


def _open(page: Any, lab: Any, name: str) -> None:
    """A new notebook ``name`` with the panel open beside it, connected and wide."""
    enable_test_hook(page)
    write_notebook(lab.root, f"{name}.ipynb", [""])
    open_notebook_in_workspace(page, lab, f"{name}.ipynb", name)
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 900)


def _run_spans(page: Any, cell: str, total: int, count: dict[str, int]) -> dict[str, Any]:
    """Run ``cell`` (it prints ``SUM total``); the finished run's tasks per span path."""
    output = run_code(page, cell, timeout=SLOW)
    assert f"SUM {total}" in output
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "spans", "Number(v) >= 2", timeout=SLOW)
    model: dict[str, Any] = page.evaluate(MODEL_JS)
    assert model["count"] == count
    assert model["paths"] == ["load", "reduce"]
    return model


def test_the_span_selector_filters_the_task_stream_progress_and_run_bar(
    page: Any, lab: Any
) -> None:
    _open(page, lab, "spans")
    selector = page.locator(SELECT)
    assert not selector.is_visible()  # no run with spans yet

    model = _run_spans(page, CELL, 79, {"load": 12, "reduce": 5, "none": 3})
    assert model["filter"] is None

    selector.wait_for(state="visible")
    options = selector.evaluate("s => [...s.options].map(o => o.text)")
    assert options == ["All spans", "load", "reduce"]
    page.wait_for_function(f"() => Number(document.querySelector('{STREAM}').dataset.rects) > 0")
    everything = _stream(page)
    assert everything["dimmed"] == 0
    assert everything["shown"] == everything["rects"] > 0

    selector.select_option("load")
    wait_data(page, "span", "v === 'load'")
    page.wait_for_function(f"() => Number(document.querySelector('{STREAM}').dataset.dimmed) > 0")
    model = page.evaluate(MODEL_JS)
    assert model["filter"] == "load"
    assert model["load"] == 12
    loaded = _stream(page)
    assert loaded["rects"] == everything["rects"]  # the others are dimmed, not dropped
    assert 0 < loaded["shown"] < everything["rects"]
    progress = page.locator(f"{PANEL} .jp-DaskProfile-progress")
    assert progress.get_attribute("data-span") == "load"
    assert progress.get_attribute("data-done") == "12"
    summary = page.locator(f"{PANEL} .jp-DaskProfile-summary")
    assert summary.get_attribute("data-tasks") == "12"
    assert "12 of 20 in load" in summary.inner_text()

    selector.select_option("")
    wait_data(page, "span", "v === ''")
    page.wait_for_function(f"() => document.querySelector('{STREAM}').dataset.dimmed === '0'")
    assert page.locator(f"{PANEL} .jp-DaskProfile-progress").get_attribute("data-done") == "20"


# the same on a LocalCluster the panel records by itself: distributed's own ``span`` and
# daskprofile's, 6 tasks in "load", 4 in "reduce", 2 in none. Each span calls its own
# function: distributed puts every task of one TaskGroup (here: of one function) in the
# span its first task was in.
CLUSTER_CELL = (
    "import time, dask, daskprofile\n"
    "from distributed import Client, LocalCluster, span\n"
    "client = Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=False,\n"
    "                             dashboard_address=None))\n"
    "def load(x):\n    time.sleep(0.05)\n    return x\n"
    "def reduce(x):\n    time.sleep(0.05)\n    return x\n"
    "def other(x):\n    time.sleep(0.05)\n    return x\n"
    "with span('load'):\n"
    "    a = [dask.delayed(load)(i) for i in range(6)]\n"
    "with daskprofile.span('reduce'):\n"
    "    b = [dask.delayed(reduce)(i) for i in range(4)]\n"
    "c = [dask.delayed(other)(i) for i in range(2)]\n"
    "print('SUM', sum(sum(x) for x in dask.compute(a, b, c)))\n"
)


def test_the_span_selector_filters_a_cluster_run(page: Any, lab: Any) -> None:
    _open(page, lab, "cluster-spans")
    try:
        _run_spans(page, CLUSTER_CELL, 22, {"load": 6, "reduce": 4, "none": 2})
        selector = page.locator(SELECT)
        selector.wait_for(state="visible")
        selector.select_option("reduce")
        wait_data(page, "span", "v === 'reduce'")
        page.wait_for_function(
            f"() => Number(document.querySelector('{STREAM}').dataset.dimmed) > 0"
        )
        progress = page.locator(f"{PANEL} .jp-DaskProfile-progress")
        assert progress.get_attribute("data-done") == "4"
        summary = page.locator(f"{PANEL} .jp-DaskProfile-summary")
        assert summary.get_attribute("data-tasks") == "4"
    finally:
        run_code(page, "client.close(); client.cluster.close()", timeout=SLOW)
