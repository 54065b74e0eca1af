"""HTML snapshots of real runs, opened in headless Chromium with the network refused.

Every request that is not ``file:`` or ``data:`` is aborted and recorded, so a page that
needs the network fails here. Hostile task keys must show as text and never run.
"""

from __future__ import annotations

import operator
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.export import _lod, to_html
from daskprofile.export._common import TaskArrays, natural_key, task_arrays

TOKEN = "5f3e0c0d9a1b2c3d4e5f60718293a4b5"
IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(1)</script>"
IDLE = "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents.every(d => d.is_idle)"

# count elements matching a tag (upper case) through open shadow roots
JS_COUNT = """(tag) => { let n = 0; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.tagName === tag) n++; if (el.shadowRoot) walk(el.shadowRoot); } };
  walk(document); return n; }"""
# text of bokeh tooltips, through shadow roots
JS_TOOLTIPS = """() => { const out = []; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.classList && [...el.classList].some(c => c.includes('tooltip'))) out.push(el.innerText);
    if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document); return out.join('\\n'); }"""
# client coordinates of data point (x, y) in the plot whose title starts with ``title``
JS_POINT = """([title, x, y]) => {
  const v = [...Bokeh.index.all_views()].find(
    v => v.frame && v.model.title && v.model.title.text.startsWith(title));
  v.el.scrollIntoView(); const r = v.el.getBoundingClientRect();
  return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }"""


def spin(seconds: float) -> int:
    """Busy pure Python for ``seconds`` (gives the stack sampler something to see)."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n


def hostile_graph() -> dict[Any, Any]:
    """Keys written to break out of HTML and script contexts, plus ordinary tasks."""
    dsk: dict[Any, Any] = {IMG: (spin, 0.3), SCRIPT: (spin, 0.1)}
    dsk.update({(f"inc-{TOKEN}", i): (operator.add, i, 1) for i in range(20)})
    dsk["total"] = (sum, [(f"inc-{TOKEN}", i) for i in range(20)])
    return dsk


# -- browser -----------------------------------------------------------------------------


def assert_rendered(opened: Any, documents: int = 1) -> None:
    """Plots drawn, offline, without errors or dialogs."""
    page = opened.page
    assert page.evaluate("() => Bokeh.documents.length") == documents
    assert page.evaluate(JS_COUNT, "CANVAS") > 0
    assert opened.refused == []
    assert opened.errors == []
    assert opened.dialogs == []


# -- runs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_run() -> Any:
    with daskprofile.profile(stacks=True, interval=0.005) as run:
        named_schedulers["threads"](hostile_graph(), [IMG, SCRIPT, "total"], num_workers=2)
    return run


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_snapshot_renders_offline_for_each_scheduler(
    scheduler: str, tmp_path: Path, open_offline: Any
) -> None:
    dsk = {(f"inc-{TOKEN}", i): (operator.add, i, 1) for i in range(30)}
    with daskprofile.profile() as run:
        named_schedulers[scheduler](dsk, list(dsk), num_workers=2)
    path = tmp_path / "report.html"
    to_html(run, path, title="scheduler test")
    text = path.read_text()
    assert "cdn.bokeh.org" not in text
    opened = open_offline(path)
    assert_rendered(opened)
    body = opened.page.inner_text("body")
    assert "scheduler test" in body
    assert "inc" in body
    assert "30" in body


def test_hostile_keys_show_as_text_in_summary_and_hover(
    hostile_run: Any, tmp_path: Path, open_offline: Any
) -> None:
    path = tmp_path / "hostile.html"
    to_html(hostile_run, path, title=SCRIPT)
    opened = open_offline(path)
    assert_rendered(opened)
    page = opened.page
    body = page.inner_text("body")
    assert IMG in body  # as text, in the longest tasks
    assert page.title() == SCRIPT
    assert page.evaluate(JS_COUNT, "IMG") == 0
    # hover the long task of the hostile key: its tooltip shows the key as text
    tasks = hostile_run.tasks
    row = tasks[tasks["key"] == IMG].iloc[0]
    lane = sorted(set(tasks["worker"]), key=natural_key).index(row["worker"])
    x, y = page.evaluate(JS_POINT, ["Task stream", (row["start"] + row["stop"]) / 2, lane])
    page.mouse.move(x, y)
    page.wait_for_function(f"() => ({JS_TOOLTIPS})().includes('key')", timeout=5_000)
    tooltip = page.evaluate(JS_TOOLTIPS)
    assert IMG in tooltip
    assert page.evaluate(JS_COUNT, "IMG") == 0
    assert opened.dialogs == []
    assert opened.errors == []


def test_every_tab_renders_and_flame_graph_switches_group(
    hostile_run: Any, tmp_path: Path, open_offline: Any
) -> None:
    path = tmp_path / "tabs.html"
    to_html(hostile_run, path)
    opened = open_offline(path)
    page = opened.page
    for tab in ("Cache", "Flame graph", "Timeline"):
        page.get_by_text(tab, exact=True).first.click()
        page.wait_for_function(IDLE)
    page.get_by_text("Flame graph", exact=True).first.click()
    groups = set(hostile_run.stacks)
    assert len(groups) >= 2
    group_filter = (
        "() => [...Bokeh.documents[0].all_models].find(m => m.type === 'GroupFilter').group"
    )
    first = page.evaluate(group_filter)
    select = page.locator("select").first
    options = select.evaluate("s => [...s.options].map(o => o.text)")
    for group in groups:  # hostile group names are option text, not markup
        assert any(text.startswith(f"{group} (") for text in options)
    select.select_option(index=1)
    second = page.evaluate(group_filter)
    assert {first, second} <= groups
    assert first != second
    page.wait_for_function(IDLE)
    assert_rendered(opened)


def test_several_runs_in_one_file(tmp_path: Path, open_offline: Any) -> None:
    runs = []
    for n in (5, 7):
        with daskprofile.profile() as run:
            named_schedulers["threads"]({f"a-{i}": (operator.add, i, 1) for i in range(n)},
                                        [f"a-{i}" for i in range(n)])  # fmt: skip
        runs.append(run)
    path = tmp_path / "two.html"
    to_html(runs, path)
    opened = open_offline(path)
    assert_rendered(opened)
    roots = "() => Bokeh.documents[0].roots().filter(r => r.name !== 'dp-what-if').length"
    assert opened.page.evaluate(roots) == 2  # one per run (besides the findings' charts)
    assert "Run 2 of 2" in opened.page.inner_text("body")


def _spaced_tasks(n: int, duration: float, every: float) -> TaskArrays:
    start = np.arange(n) * every
    return TaskArrays(
        key_column=pd.Series([f"t-{i}" for i in range(n)]),
        group=np.zeros(n, np.int32),
        lane=np.zeros(n, np.int32),
        submit=start,
        start=start,
        stop=start + duration,
        error=np.zeros(n, bool),
        error_type=np.full(n, None, object),
        groups=["t"],
        lanes=["thread 0"],
    )


def test_merge_bounded_coarsens_the_gap_until_under_the_cap() -> None:
    arrays = _spaced_tasks(200, duration=1e-3, every=2e-3)  # 1 ms tasks, 1 ms apart
    rows = np.arange(200)
    fine, gap = _lod.merge_bounded(arrays, rows, 1e-4, cap=200)
    assert (len(fine), gap) == (200, 1e-4)  # under the cap: one interval per task
    coarse, gap = _lod.merge_bounded(arrays, rows, 1e-4, cap=10)
    assert gap == pytest.approx(1.6e-3)  # 1e-4 * 4 * 4: the first gap wider than 1 ms
    assert len(coarse) == 1
    assert (coarse.count.sum(), coarse.busy.sum()) == (200, pytest.approx(0.2))
    assert (coarse.start[0], coarse.stop[0]) == (0.0, pytest.approx(0.399))


def test_level_of_detail_merges_short_tasks(
    tmp_path: Path, open_offline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsk: dict[Any, Any] = {(f"inc-{TOKEN}", i): (operator.add, i, 1) for i in range(3000)}
    dsk["long-1"] = (time.sleep, 0.2)
    with daskprofile.profile() as run:
        named_schedulers["threads"](dsk, list(dsk), num_workers=2)
    monkeypatch.setattr(_lod, "LOD_THRESHOLD", 500)
    arrays = task_arrays(run)
    single, short, pixel = _lod.split_tasks(arrays)
    assert len(single) + len(short) == len(run.tasks)
    assert "long-1" in arrays.keys(single)
    busy = _lod.merge_busy(arrays, short, pixel)
    assert busy.count.sum() == len(short)
    duration = arrays.stop[short] - arrays.start[short]
    assert np.isclose(busy.busy.sum(), duration.sum())
    assert len(busy) < len(short)
    coarse, gap = _lod.merge_bounded(arrays, short, pixel, cap=10)
    assert len(coarse) <= 10
    assert gap >= pixel  # coarser only if the pixel-level merge left more than the cap
    assert coarse.count.sum() == len(short)
    path = tmp_path / "lod.html"
    to_html(run, path)
    opened = open_offline(path)
    assert_rendered(opened)
    assert "merged per worker and group" in opened.page.evaluate(
        "() => [...Bokeh.index.all_views()].map(v => v.model.title?.text ?? '').join(' ')"
    )


def test_memory_samples_tab(hostile_run: Any, tmp_path: Path, open_offline: Any) -> None:
    sampler = daskprofile.MemorySampler()
    for label in ("small", "big"):
        with sampler.sample(label, interval=0.01):
            time.sleep(0.1)
    path = tmp_path / "memory.html"
    to_html(hostile_run, path, memory_samples=sampler)
    opened = open_offline(path)
    opened.page.get_by_text("Memory samples", exact=True).first.click()
    opened.page.wait_for_function(IDLE)
    assert_rendered(opened)
    assert "Memory samples" in opened.page.evaluate(
        "() => [...Bokeh.index.all_views()].map(v => v.model.title?.text ?? '').join(' ')"
    )


def test_performance_report_renders_offline_with_calling_code(
    tmp_path: Path, open_offline: Any
) -> None:
    path = tmp_path / "dask-report.html"
    marker = "a_marker_only_this_test_has"
    with daskprofile.performance_report(filename=path):
        named_schedulers["threads"]({"x-1": (operator.add, 1, 2), marker: (spin, 0.05)},
                                    ["x-1", marker])  # fmt: skip
    opened = open_offline(path)
    assert_rendered(opened)
    body = opened.page.inner_text("body")
    assert "Dask Performance Report" in body
    assert "Calling code" in body
    assert "def test_performance_report_renders_offline_with_calling_code" in body


def test_cache_total_is_the_sum_of_group_occupancies(hostile_run: Any) -> None:
    from daskprofile.export._plots import cache_lines

    cache = hostile_run.cache.sort_values("time", kind="stable")
    assert len(cache) > 0
    occupancy: dict[str, float] = {}
    expected = []
    for group, metric in zip(cache["group"], cache["metric"], strict=True):
        occupancy[group] = metric
        expected.append(sum(occupancy.values()))
    lines = cache_lines(hostile_run)
    label, _, total, _ = lines[0]
    assert label == "total"
    np.testing.assert_allclose(total, expected)
    assert {name for name, *_ in lines[1:]} <= set(cache["group"])


def test_decimate_keeps_extremes_of_every_bin() -> None:
    x = np.linspace(0, 10, 100_000)
    y = np.sin(x * 50) + (x > 7.3) * 5
    dx, dy = _lod.decimate(x, y, bins=500)
    assert len(dx) <= 4 * 500
    assert np.all(np.diff(dx) >= 0)
    assert dy.max() == y.max()
    assert dy.min() == y.min()
    edges = np.linspace(0, 10, 501)
    for lo, hi in zip(edges[:-1:50], edges[1::50], strict=True):
        inside = (x >= lo) & (x < hi)
        kept = (dx >= lo) & (dx < hi)
        assert dy[kept].max() == y[inside].max()
        assert dy[kept].min() == y[inside].min()


def test_a_run_without_tasks_still_renders(tmp_path: Path, open_offline: Any) -> None:
    with daskprofile.profile() as run:
        pass
    assert len(run.tasks) == 0
    path = tmp_path / "empty.html"
    to_html(run, path)
    opened = open_offline(path)
    assert_rendered(opened)
    assert "No tasks recorded" in opened.page.inner_text("body")


def test_the_summary_names_what_was_recorded_in_a_reduced_way(
    tmp_path: Path, open_offline: Any
) -> None:
    dsk = {("inc", i): (operator.add, i, 1) for i in range(4)}
    with daskprofile.profile(stacks=False, resources=False) as run:
        named_schedulers["sync"](dsk, list(dsk))
    why = "workers lack daskprofile (ModuleNotFoundError: No module named 'daskprofile')"
    run.meta.reduced = {
        "stacks": f"{why}: no stack samples",
        "resources": f"{why}: CPU/memory from the scheduler's heartbeats {IMG}",
    }
    path = tmp_path / "reduced.html"
    to_html(run, path)
    opened = open_offline(path)
    assert_rendered(opened)
    body = opened.page.inner_text("body")
    assert f"Reduced stacks: {why}: no stack samples" in body
    assert f"Reduced resources: {why}: CPU/memory from the scheduler's heartbeats {IMG}" in body
    assert opened.page.evaluate(JS_COUNT, "IMG") == 0
