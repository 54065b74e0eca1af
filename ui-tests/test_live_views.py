"""The panel's views and options on synthetic runs (real JupyterLab, real Chromium): the
dropped-records warning, the tooltip's worker, flame search and group filter by the
numbers, cache lines, progress with errors and pending groups, palette commands, a
setting taking effect and the layout restored on reload."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import (
    PANEL,
    PANEL_TAB,
    canvas_stats,
    enable_test_hook,
    open_notebook_in_workspace,
    open_panel,
    panel_data,
    run_command,
    synthetic_run,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

STREAM = ".jp-DaskProfile-taskStream canvas"
CACHE = ".jp-DaskProfile-cache canvas"
TOOLTIP = ".jp-DaskProfile-taskStream .jp-DaskProfile-tooltip"
MATCH = ".jp-DaskProfile-match"


def _ready(page: Any, lab: Any, name: str, width: int = 900) -> None:
    enable_test_hook(page)
    write_notebook(lab.root, name, ["1 + 1"])
    open_notebook_in_workspace(page, lab, name, name.replace(".ipynb", ""))
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, width)


def _send(page: Any, data: dict[str, Any]) -> bool:
    return bool(page.evaluate("(d) => window.daskprofileTestHook.receive(d, [])", data))


def _attr(page: Any, selector: str, name: str) -> str:
    return page.locator(selector).get_attribute(f"data-{name}") or ""


def test_dropped_records_are_shown_as_a_warning(page: Any, lab: Any) -> None:
    _ready(page, lab, "dropped.ipynb")
    synthetic_run(page, n=300, workers=2, groups=2)
    wait_data(page, "run-state", "v === 'finished'")
    summary = page.locator(".jp-DaskProfile-summary")
    assert "Dropped" not in summary.inner_text()
    assert _send(page, {"type": "dropped", "run": "synthetic", "messages": 3, "rows": 1500})
    warn = summary.locator(".jp-mod-warn")
    warn.wait_for()
    text = warn.inner_text()
    assert "Dropped" in text
    assert "3 messages" in text
    assert "1,500 rows" in text


def test_tooltip_names_the_worker_of_the_lane_hovered(page: Any, lab: Any) -> None:
    _ready(page, lab, "tooltip.ipynb")
    synthetic_run(page, n=400, workers=2, groups=3, duration=0.004, gap=0.0001)
    wait_data(page, "run-state", "v === 'finished'")
    page.wait_for_function(f"() => Number(document.querySelector('{STREAM}').dataset.rects) > 0")
    box = page.locator(STREAM).bounding_box()
    lane = (box["height"] - 18) / 2
    tooltip = page.locator(TOOLTIP)
    for x in (0.1, 0.3, 0.5, 0.2, 0.4, 0.6):
        page.mouse.move(box["x"] + 72 + (box["width"] - 72) * x, box["y"] + 18 + lane * 1.5)
        try:
            tooltip.wait_for(state="visible", timeout=2_000)
            break
        except Exception:
            continue
    tooltip.wait_for(state="visible")
    text = tooltip.inner_text()
    assert "thread 2" in text, text
    assert "thread 1" not in text
    for label in ("group", "worker", "duration", "wait"):
        assert label in text, text


def test_flame_search_share_and_group_filter(page: Any, lab: Any) -> None:
    _ready(page, lab, "flame.ipynb")
    synthetic_run(page, n=600, workers=2, groups=3, samples=4)
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "flame-samples", "Number(v) > 0")
    everything = int(panel_data(page, "flame-samples"))
    # each group's tree: 30 samples, 9 of them in sleep (under _execute_subgraph)
    search = page.locator(".jp-DaskProfile-search")
    search.fill("sleep")
    page.wait_for_function(f"() => document.querySelector('{MATCH}').textContent !== ''")
    assert page.locator(MATCH).inner_text() == "30.0 % match"
    search.fill("no_such_function")
    page.wait_for_function(f"() => document.querySelector('{MATCH}').textContent === '0.0 % match'")
    search.fill("")
    # one group of three: a third of the samples
    select = page.locator(".jp-DaskProfile-groupFilter")
    assert select.locator("option").all_inner_texts() == [
        "All groups",
        "add",
        "inc",
        "sum-aggregate",
    ]
    select.select_option("inc")
    wait_data(page, "flame-samples", f"v === '{everything // 3}'")
    select.select_option("")
    wait_data(page, "flame-samples", f"v === '{everything}'")


def test_cache_lines_one_per_group(page: Any, lab: Any) -> None:
    _ready(page, lab, "cache.ipynb")
    page.wait_for_function(f"() => document.querySelector('{CACHE}').width > 0")
    blank = canvas_stats(page, CACHE)["filled"]
    synthetic_run(page, n=300, workers=2, groups=5)  # cache rows use three of the groups
    wait_data(page, "run-state", "v === 'finished'")
    page.wait_for_function(f"() => document.querySelector('{CACHE}').dataset.series === '3'")
    drawn = canvas_stats(page, CACHE)
    assert drawn["filled"] > blank + 0.02, (drawn, blank)
    assert drawn["colors"] >= 4, drawn  # three lines and the background


def test_progress_shows_errors_and_groups_not_started(page: Any, lab: Any) -> None:
    _ready(page, lab, "progress.ipynb")
    synthetic_run(page, n=500, workers=2, groups=2)
    wait_data(page, "run-state", "v === 'finished'")
    progress = page.locator(".jp-DaskProfile-progress")
    # group 1 ("add") has 2 erred tasks in the synthetic run
    add_row = progress.locator(".jp-DaskProfile-progressRow", has_text="add")
    assert "(2 erred)" in add_row.inner_text()
    assert (
        add_row.locator(".jp-DaskProfile-progressErred").evaluate("e => parseFloat(e.style.width)")
        > 0
    )
    # a new live run whose second group has not started yet
    assert _send(page, {"type": "run_start", "run": "live", "t0": 0, "wall0": 0, "options": {}})
    assert _send(
        page,
        {"type": "groups", "run": "live", "ids": [0, 1], "names": ["load", "reduce"],
         "colors": ["", ""]},
    )  # fmt: skip
    assert _send(
        page,
        {"type": "progress", "run": "live", "groups": [0, 1], "total": [10, 4],
         "done": [3, 0], "erred": [0, 0]},
    )  # fmt: skip
    wait_data(page, "run", "v === 'live'")
    page.wait_for_function(
        "() => document.querySelector('.jp-DaskProfile-progress').dataset.total === '14'"
    )
    rows = progress.locator(".jp-DaskProfile-progressRow")
    assert "3 / 10" in rows.filter(has_text="load").inner_text()
    assert "0 / 4" in rows.filter(has_text="reduce").inner_text()
    assert _attr(page, ".jp-DaskProfile-progress", "done") == "3"


def test_palette_commands_reset_the_view_and_pause(page: Any, lab: Any) -> None:
    _ready(page, lab, "commands.ipynb")
    synthetic_run(page, n=5000, workers=4, groups=5)
    wait_data(page, "run-state", "v === 'finished'")
    page.wait_for_function(f"() => document.querySelector('{STREAM}').dataset.view")
    full = _attr(page, STREAM, "view")
    box = page.locator(STREAM).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 30)
    page.mouse.wheel(0, -600)
    page.wait_for_function(f"() => document.querySelector('{STREAM}').dataset.view !== '{full}'")
    run_command(page, "Dask Profile: Reset Task Stream View")
    page.wait_for_function(f"() => document.querySelector('{STREAM}').dataset.view === '{full}'")
    pause = ".jp-DaskProfile-pause"
    run_command(page, "Dask Profile: Pause Live Updates")
    page.wait_for_selector(f"{pause}[data-paused='true']")
    run_command(page, "Dask Profile: Resume Live Updates")
    page.wait_for_selector(f"{pause}[data-paused='false']")


def _put_settings(lab: Any, raw: dict[str, Any]) -> None:
    body = json.dumps({"raw": json.dumps(raw)}).encode()
    request = urllib.request.Request(
        f"{lab.url}lab/api/settings/daskprofile:plugin",
        data=body,
        method="PUT",
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()


@pytest.fixture
def tall_lanes(lab: Any) -> Iterator[int]:
    _put_settings(lab, {"maxLaneHeight": 40})
    yield 40
    _put_settings(lab, {})


def _lane_area(page: Any) -> float:
    return float(page.locator(STREAM).bounding_box()["height"])


def test_a_setting_takes_effect_and_the_layout_is_restored(
    page: Any, lab: Any, tall_lanes: int
) -> None:
    _ready(page, lab, "layout.ipynb")
    synthetic_run(page, n=2000, workers=4, groups=3)
    wait_data(page, "run-state", "v === 'finished'")
    page.wait_for_function(f"() => Number(document.querySelector('{STREAM}').dataset.rects) > 0")
    # four lanes of up to 40 px (the default allows 18)
    assert _lane_area(page) >= 4 * tall_lanes, _lane_area(page)

    # reload the same workspace: the panel comes back open, in front, without a click
    # (once JupyterLab has saved the workspace: it does so a moment after layout changes)
    page.wait_for_function(
        """async (url) => {
            const r = await fetch(url);
            if (!r.ok) return false;
            const left = ((await r.json()).data['layout-restorer:data'] || {}).left || {};
            return String(left.current || '').includes('daskprofile') && !left.collapsed;
        }""",
        arg=f"{lab.url}lab/api/workspaces/layout?token={lab.token}",
        timeout=60_000,
        polling=250,
    )
    # (no /tree/ path in the URL: opening a path would show the file browser instead)
    page.goto(f"{lab.url}lab/workspaces/layout?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
    page.locator(PANEL).wait_for(state="visible", timeout=60_000)
    assert "lm-mod-current" in (page.locator(PANEL_TAB).get_attribute("class") or "")
    wait_status(page, "connected")
    synthetic_run(page, n=2000, workers=4, groups=3)
    wait_data(page, "run-state", "v === 'finished'")
    assert _lane_area(page) >= 4 * tall_lanes


def test_default_lane_height_is_smaller(page: Any, lab: Any) -> None:
    """The counterpart of the setting test: without it, four lanes take 18 px each."""
    _ready(page, lab, "lanes.ipynb")
    synthetic_run(page, n=2000, workers=4, groups=3)
    wait_data(page, "run-state", "v === 'finished'")
    assert _lane_area(page) < 4 * 40
