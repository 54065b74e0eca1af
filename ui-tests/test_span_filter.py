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


def test_the_span_selector_filters_the_task_stream_progress_and_run_bar(
    page: Any, lab: Any
) -> None:
    enable_test_hook(page)
    write_notebook(lab.root, "spans.ipynb", [""])
    open_notebook_in_workspace(page, lab, "spans.ipynb", "spans")
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 900)
    selector = page.locator(SELECT)
    assert not selector.is_visible()  # no run with spans yet

    output = run_code(page, CELL, timeout=SLOW)
    assert "SUM 79" in output
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "spans", "Number(v) >= 2", timeout=SLOW)
    model = page.evaluate(MODEL_JS)
    assert model["count"] == {"load": 12, "reduce": 5, "none": 3}
    assert model["paths"] == ["load", "reduce"]
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
