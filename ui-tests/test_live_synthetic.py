"""The panel's views on synthetic runs fed through the test hook (real JupyterLab, real
Chromium): canvases drawn, data attributes, keys shown as text, malformed messages."""

from __future__ import annotations

from typing import Any

from helpers import (
    PANEL,
    canvas_stats,
    enable_test_hook,
    open_notebook_in_workspace,
    open_panel,
    panel_data,
    synthetic_run,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook


def _ready(page: Any, lab: Any, name: str) -> Any:
    enable_test_hook(page)
    write_notebook(lab.root, name, ["1 + 1"])
    open_notebook_in_workspace(page, lab, name, name.replace(".ipynb", ""))
    panel = open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 900)
    return panel


def test_synthetic_run_draws_every_view(page: Any, lab: Any, screenshots: Any) -> None:
    _ready(page, lab, "synthetic.ipynb")
    synthetic_run(page, n=5000, workers=4, groups=5)
    wait_data(page, "tasks", "v === '5000'")
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "flame-nodes", "Number(v) > 5")
    assert panel_data(page, "runs") == "1"
    assert panel_data(page, "resources") == "200"
    page.wait_for_function(
        "() => Number(document.querySelector('.jp-DaskProfile-taskStream canvas').dataset.rects) > 0"
    )
    stream = canvas_stats(page, ".jp-DaskProfile-taskStream canvas")
    assert stream["filled"] > 0.2, stream
    assert stream["colors"] >= 5, stream
    lines = canvas_stats(page, ".jp-DaskProfile-resources canvas")
    assert lines["filled"] > 0.01, lines
    flame = canvas_stats(page, ".jp-DaskProfile-flame canvas")
    assert flame["filled"] > 0.3, flame
    text = page.locator(PANEL).inner_text()
    assert "Tasks" in text
    assert "5,000" in text
    assert "sum-aggregate" in page.locator(".jp-DaskProfile-legend").inner_text()
    assert "1,000 / 1,000" in page.locator(".jp-DaskProfile-progress").inner_text()
    page.screenshot(path=str(screenshots / "panel-synthetic.png"))
    assert not [e for e in page.console_errors if "daskprofile" in e]


def _stream_box(page: Any) -> dict[str, float]:
    return page.locator(".jp-DaskProfile-taskStream canvas").bounding_box()


def test_task_keys_with_html_are_shown_as_text(page: Any, lab: Any) -> None:
    _ready(page, lab, "keys.ipynb")
    synthetic_run(page, n=400, workers=2, groups=3, keys_html=True)
    wait_data(page, "run-state", "v === 'finished'")
    box = _stream_box(page)
    # row 0 starts at t = 0 in lane 0: just right of the 72 px gutter, below the 18 px axis
    page.mouse.move(box["x"] + 73, box["y"] + 18 + 4)
    tooltip = page.locator(".jp-DaskProfile-taskStream .jp-DaskProfile-tooltip")
    tooltip.wait_for(state="visible")
    assert tooltip.get_attribute("data-row") == "0"
    text = tooltip.inner_text()
    assert '<img src=x onerror="window.__xss=1">' in text
    for label in ("group", "duration", "wait"):
        assert label in text
    assert tooltip.locator("img").count() == 0
    assert page.evaluate("() => window.__xss") is None


def test_malformed_messages_are_rejected_and_break_nothing(page: Any, lab: Any) -> None:
    _ready(page, lab, "malformed.ipynb")
    synthetic_run(page, run="good", n=300, workers=2, groups=2)
    wait_data(page, "tasks", "v === '300'")
    results = page.evaluate(
        """() => {
            const h = window.daskprofileTestHook;
            return [
                h.receive('garbage'),
                h.receive({type: 'tasks', run: 'good', n: 5, base: 0, first: 0,
                           columns: ['group', 'worker', 'status', 'submit', 'start', 'stop']},
                          [new ArrayBuffer(3)]),
                h.receive({type: 'tasks', run: 'good', n: 1, base: 0, first: 0,
                           columns: ['group', 'worker', 'status', 'submit', 'start', 'stop']},
                          [new ArrayBuffer(2), new ArrayBuffer(2), new ArrayBuffer(1),
                           new ArrayBuffer(4), new ArrayBuffer(4), new ArrayBuffer(3)]),
                h.receive({type: 'groups', run: 'nope', ids: [1], names: ['x'], colors: ['#000000']}),
                h.receive({type: 'stacks', run: 'good', t_start: 0, t_end: 1, trees: {a: 5}}),
                h.receive({type: 'progress', run: 'good', groups: [0], total: ['<b>'], done: [0], erred: [0]}),
                h.receive({type: 'run_start', run: {}, t0: 0, wall0: 0}),
                h.receive({type: 'keys', run: 'good', indices: [0], keys: [{}]}),
            ];
        }"""
    )
    assert results == [False] * 8
    wait_data(page, "rejected", "v === '8'")
    errors = [e for e in page.console_errors if "daskprofile" in e]
    assert len(errors) == 8, errors
    assert panel_data(page, "tasks") == "300"
    # still alive: a new valid run is shown
    synthetic_run(page, run="after", n=100, workers=1, groups=1)
    wait_data(page, "run", "v === 'after'")
    wait_data(page, "tasks", "v === '100'")
    assert panel_data(page, "runs") == "2"


def test_zoom_pan_select_and_flame_interactions(page: Any, lab: Any) -> None:
    _ready(page, lab, "interact.ipynb")
    synthetic_run(page, n=20_000, workers=4, groups=5, samples=4)
    wait_data(page, "run-state", "v === 'finished'")
    canvas = page.locator(".jp-DaskProfile-taskStream canvas")
    view = lambda: [float(x) for x in (canvas.get_attribute("data-view") or "0,0").split(",")]  # noqa: E731
    page.wait_for_function(
        "() => document.querySelector('.jp-DaskProfile-taskStream canvas').dataset.view"
    )
    full = view()
    full_text = canvas.get_attribute("data-view") or ""
    box = _stream_box(page)
    cx, cy = box["x"] + box["width"] / 2, box["y"] + 40
    page.mouse.move(cx, cy)
    page.mouse.wheel(0, -600)
    page.wait_for_function(
        f"() => {{ const v = document.querySelector('.jp-DaskProfile-taskStream canvas').dataset.view.split(',').map(Number); return v[1] - v[0] < {(full[1] - full[0]) * 0.6}; }}"
    )
    zoomed = view()
    # drag right: the window moves back in time
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + 100, cy, steps=4)
    page.mouse.up()
    page.wait_for_function(
        f"() => Number(document.querySelector('.jp-DaskProfile-taskStream canvas').dataset.view.split(',')[0]) < {zoomed[0]}"
    )
    page.locator(".jp-DaskProfile-taskStream canvas").dblclick(position={"x": 200, "y": 40})
    page.wait_for_function(
        f"() => document.querySelector('.jp-DaskProfile-taskStream canvas').dataset.view === '{full_text}'"
    )
    wait_data(page, "flame-samples", "Number(v) > 0")
    all_samples = int(panel_data(page, "flame-samples"))
    # shift+drag over the first quarter selects a range: the flame graph keeps fewer cycles
    box = _stream_box(page)
    x0 = box["x"] + 73
    page.keyboard.down("Shift")
    page.mouse.move(x0, cy)
    page.mouse.down()
    page.mouse.move(x0 + (box["width"] - 72) * 0.2, cy, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    wait_data(page, "selection", "v !== ''")
    wait_data(page, "flame-samples", f"Number(v) > 0 && Number(v) < {all_samples}")
    page.get_by_text("Clear range").click()
    wait_data(page, "flame-samples", f"v === '{all_samples}'")
    # flame graph: search highlights, click zooms
    page.locator(".jp-DaskProfile-search").fill("sleep")
    page.wait_for_function(
        "() => document.querySelector('.jp-DaskProfile-match').textContent.includes('%')"
    )
    flame = page.locator(".jp-DaskProfile-flame canvas")
    before = int(flame.get_attribute("data-rects") or "0")
    fbox = flame.bounding_box()
    flame.click(position={"x": 5, "y": 16 * 2 + 8})  # depth 2: first group's first frame
    page.wait_for_function(
        f"() => Number(document.querySelector('.jp-DaskProfile-flame canvas').dataset.rects) < {before}"
    )
    assert fbox["width"] > 0
