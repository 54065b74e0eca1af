"""The panel's views checked by their numbers and pixels (real JupyterLab, real Chromium),
on runs fed through the test hook: dropped records in the run header, the task tooltip,
flame search and group filter, cache lines, progress, run switching, settings (through
the REST API and the Settings Editor), palette commands and the layout restored on
reload."""

from __future__ import annotations

import json
import re
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
    put_settings,
    run_command,
    synthetic_run,
    wait_data,
    wait_server,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

STREAM = ".jp-DaskProfile-taskStream canvas"
FLAME = ".jp-DaskProfile-flame canvas"
CACHE = ".jp-DaskProfile-cache canvas"
TOOLTIP = ".jp-DaskProfile-taskStream .jp-DaskProfile-tooltip"
SUMMARY = ".jp-DaskProfile-summary"
MATCH = ".jp-DaskProfile-match"
GUTTER = 72  # px left of every time axis (views/canvas.ts)
AXIS = 18  # px of the task stream's time axis (views/taskStream.ts)
SEARCH_HIT = (0xE0, 0x40, 0xFB)  # colour of frames matching the search (views/flameGraph.ts)


def _ready(page: Any, lab: Any, name: str, width: int = 900) -> None:
    enable_test_hook(page)
    write_notebook(lab.root, name, ["1 + 1"])
    open_notebook_in_workspace(page, lab, name, name.replace(".ipynb", ""))
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, width)


def _send(page: Any, data: dict[str, Any]) -> None:
    ok = page.evaluate("(d) => window.daskprofileTestHook.receive(d, [])", data)
    assert ok, data


def _attr(page: Any, selector: str, name: str) -> str:
    return page.locator(selector).get_attribute(f"data-{name}") or ""


def _wait_attr(page: Any, selector: str, name: str, predicate: str) -> None:
    """Wait until JS ``predicate`` over ``v`` (data-``name`` of ``selector``) holds."""
    page.wait_for_function(
        f"""() => {{
            const el = document.querySelector({json.dumps(selector)});
            const v = el ? (el.getAttribute({json.dumps("data-" + name)}) ?? '') : '';
            return {predicate};
        }}"""
    )


def _next_frames(page: Any) -> None:
    """Wait two animation frames: the views draw on the next one after a change."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


# A run built row by row: run_start, groups, workers, one tasks message, run_end.
CUSTOM_RUN_JS = """
({run, groups, workers, rows}) => {
  const hook = window.daskprofileTestHook;
  const send = (d, b) => { if (!hook.receive(d, b || [])) throw new Error('rejected ' + d.type); };
  send({type: 'run_start', run, t0: 0, wall0: Date.now() / 1000, options: {}, title: run});
  send({type: 'groups', run, ids: groups.map((_, i) => i), names: groups, colors: groups.map(() => '')});
  send({type: 'workers', run, ids: workers.map((_, i) => i), labels: workers,
        kinds: workers.map(() => 'thread')});
  const n = rows.length;
  const col = (T, k) => T.from(rows.map(r => r[k])).buffer;
  send({type: 'tasks', run, n, base: 0, first: 0,
        columns: ['group', 'worker', 'status', 'submit', 'start', 'stop']},
       [col(Uint16Array, 0), col(Uint16Array, 1), col(Uint8Array, 2), col(Float32Array, 3),
        col(Float32Array, 4), col(Float32Array, 5)]);
  send({type: 'run_end', run, summary: {}, dropped: {}, errors: []});
}
"""


def _custom_run(
    page: Any,
    run: str,
    groups: list[str],
    workers: list[str],
    rows: list[tuple[int, int, int, float, float, float]],
) -> None:
    """Rows are (group, worker, status, submit, start, stop), times in seconds."""
    page.evaluate(CUSTOM_RUN_JS, {"run": run, "groups": groups, "workers": workers, "rows": rows})


# --- 1. dropped records ------------------------------------------------------------------


def _summary_items(page: Any) -> dict[str, tuple[str, bool]]:
    """The run header's summary: label -> (value, has the warn class)."""
    items = page.evaluate(
        """(sel) => [...document.querySelectorAll(sel + ' .jp-DaskProfile-summaryItem')].map(
            e => [e.querySelector('.jp-DaskProfile-muted').textContent.trim(),
                  e.querySelector('b').textContent, e.classList.contains('jp-mod-warn')])""",
        SUMMARY,
    )
    return {label: (value, warn) for label, value, warn in items}


def test_run_header_shows_dropped_records_as_a_warning(page: Any, lab: Any) -> None:
    _ready(page, lab, "pv-dropped.ipynb")
    synthetic_run(page, run="full", n=300, workers=2, groups=2)
    wait_data(page, "run-state", "v === 'finished'")
    page.locator(SUMMARY).filter(has_text="Tasks").wait_for()
    items = _summary_items(page)
    assert items["Tasks"] == ("300 (1 failed)", False), items  # row 0 of the run erred
    assert "Dropped" not in items, items  # run_end said dropped: {tasks: 0}
    assert not any(warn for _, warn in items.values()), items

    # the publisher drops messages of a live run
    _send(page, {"type": "dropped", "run": "full", "messages": 3, "rows": 1500})
    page.locator(f"{SUMMARY} .jp-mod-warn").filter(has_text="Dropped").wait_for()
    items = _summary_items(page)
    assert items["Dropped"] == ("3 messages, 1,500 rows", True), items
    assert [label for label, (_, warn) in items.items() if warn] == ["Dropped"], items

    # a run whose collectors dropped records says so at its end (kinds with 0 are left out)
    _send(page, {"type": "run_start", "run": "lossy", "t0": 0, "wall0": 0, "options": {}})
    wait_data(page, "run", "v === 'lossy'")
    _send(
        page,
        {"type": "run_end", "run": "lossy", "summary": {"wall_time": 1.5},
         "dropped": {"tasks": 1234, "stacks": 0, "resources": 7}, "errors": []},
    )  # fmt: skip
    wait_data(page, "run-state", "v === 'finished'")
    page.locator(f"{SUMMARY} .jp-mod-warn").filter(has_text="1,234 tasks").wait_for()
    items = _summary_items(page)
    assert items["Dropped"] == ("1,234 tasks, 7 resources", True), items
    assert "stacks" not in items["Dropped"][0]
    _send(page, {"type": "dropped", "run": "lossy", "messages": 2, "rows": 10})
    page.locator(f"{SUMMARY} .jp-mod-warn").filter(has_text="2 messages").wait_for()
    assert _summary_items(page)["Dropped"] == (
        "1,234 tasks, 7 resources, 2 messages, 10 rows",
        True,
    )
    # the warning is styled as one (not only classed)
    colors = page.evaluate(
        """(sel) => {
            const items = [...document.querySelectorAll(sel + ' .jp-DaskProfile-summaryItem')];
            const warn = items.find(e => e.classList.contains('jp-mod-warn'));
            const plain = items.find(e => !e.classList.contains('jp-mod-warn'));
            return [getComputedStyle(warn.querySelector('b')).color,
                    getComputedStyle(plain.querySelector('b')).color];
        }""",
        SUMMARY,
    )
    assert colors[0] != colors[1], colors


# --- 2. task tooltip ----------------------------------------------------------------------


def _stream_x(page: Any, t: float) -> float:
    """Page x of time ``t`` on the task stream (from its data-view and its box)."""
    v0, v1 = (float(x) for x in _attr(page, STREAM, "view").split(","))
    box = page.locator(STREAM).bounding_box()
    return float(box["x"] + GUTTER + (t - v0) / (v1 - v0) * (box["width"] - GUTTER))


def _hover_lane(page: Any, t: float, lane: int, lanes: int = 2) -> None:
    """Move the mouse to time ``t`` in the middle of lane ``lane`` (0-based)."""
    box = page.locator(STREAM).bounding_box()
    height = (box["height"] - AXIS) / lanes
    page.mouse.move(_stream_x(page, t), box["y"] + AXIS + height * (lane + 0.5))


def _tooltip_lines(page: Any) -> dict[str, str]:
    text = page.locator(TOOLTIP).inner_text()
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def test_tooltip_shows_key_group_worker_duration_and_wait(page: Any, lab: Any) -> None:
    _ready(page, lab, "pv-tooltip.ipynb")
    # times are binary fractions, exact in float32: duration 250 ms, wait 125 ms
    _custom_run(
        page,
        "tip",
        ["load", "reduce"],
        ["thread 1", "thread 2"],
        [
            (0, 0, 0, 0.0, 0.0, 0.5),  # lane 1, the whole run
            (0, 1, 0, 0.0, 0.0, 0.125),  # lane 2, first
            (1, 1, 0, 0.125, 0.25, 0.5),  # lane 2, hovered
        ],
    )
    wait_data(page, "tasks", "v === '3'")
    _wait_attr(page, STREAM, "rects", "Number(v) >= 3")
    # keys are fetched on demand: catch the panel's requests instead of the kernel's
    # answer (it does not know this run)
    page.evaluate(
        "() => { window.__sent = []; window.daskprofileTestHook.model.sender = d => window.__sent.push(d); }"
    )
    tooltip = page.locator(TOOLTIP)
    _hover_lane(page, 0.375, 1)
    tooltip.wait_for(state="visible")
    assert tooltip.get_attribute("data-row") == "2"
    assert _tooltip_lines(page)["key"] == "loading…"
    index = page.evaluate("() => window.daskprofileTestHook.model.current.taskIndex.data[2]")
    page.wait_for_function("() => window.__sent.some(d => d.type === 'keys')")
    assert page.evaluate("() => window.__sent") == [
        {"type": "keys", "run": "tip", "indices": [index]}
    ]
    _send(page, {"type": "keys", "run": "tip", "indices": [index], "keys": ["('reduce-abc', 7)"]})
    tooltip.filter(has_text="reduce-abc").wait_for()
    lines = _tooltip_lines(page)
    assert lines["key"] == "('reduce-abc', 7)", lines
    assert lines["group"] == "reduce", lines
    assert lines["worker"] == "thread 2", lines
    assert lines["duration"] == "250 ms", lines
    assert lines["wait"] == "125 ms", lines
    assert lines["start"] == "250 ms", lines
    assert "status" not in lines

    # the first lane's task: another worker, group and duration
    _hover_lane(page, 0.375, 0)
    page.wait_for_function(
        f"() => document.querySelector({json.dumps(TOOLTIP)}).dataset.row === '0'"
    )
    lines = _tooltip_lines(page)
    assert (lines["group"], lines["worker"], lines["duration"], lines["wait"]) == (
        "load",
        "thread 1",
        "500 ms",
        "0 s",
    ), lines
    box = page.locator(STREAM).bounding_box()
    # leaving the canvas hides it
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] - 40)
    tooltip.wait_for(state="hidden")


# --- 3. flame graph search and group filter -------------------------------------------------


def _match_share(page: Any) -> float:
    text = page.locator(MATCH).inner_text()
    m = re.fullmatch(r"(\d+(?:\.\d+)?) % match", text)
    assert m, text
    return float(m.group(1))


def _count_blend(page: Any, selector: str, rgb: tuple[int, int, int]) -> int:
    """Pixels of colour ``rgb`` blended at least 40 % over the background (antialiased
    thin lines are rarely drawn in their full colour)."""
    return int(
        page.evaluate(
            """([sel, c]) => {
                const cv = document.querySelector(sel);
                const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
                const bg = [d[d.length - 4], d[d.length - 3], d[d.length - 2]];
                const dir = [c[0] - bg[0], c[1] - bg[1], c[2] - bg[2]];
                const dd = dir[0] ** 2 + dir[1] ** 2 + dir[2] ** 2;
                let n = 0;
                for (let i = 0; i < d.length; i += 4) {
                    const p = [d[i] - bg[0], d[i + 1] - bg[1], d[i + 2] - bg[2]];
                    const a = (p[0] * dir[0] + p[1] * dir[1] + p[2] * dir[2]) / dd;
                    if (a < 0.4 || a > 1.1) continue;
                    const r = Math.hypot(p[0] - a * dir[0], p[1] - a * dir[1], p[2] - a * dir[2]);
                    if (r < 20) n++;
                }
                return n;
            }""",
            [selector, list(rgb)],
        )
    )


COUNT_COLOR_JS = """([sel, rgb, tol]) => {
    const c = document.querySelector(sel);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
        if (Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1])
            + Math.abs(d[i + 2] - rgb[2]) <= tol) n++;
    }
    return n;
}"""


def _count_color(page: Any, selector: str, rgb: tuple[int, int, int], tol: int = 24) -> int:
    """Pixels of ``selector``'s canvas within ``tol`` (sum of channel differences) of ``rgb``."""
    return int(page.evaluate(COUNT_COLOR_JS, [selector, list(rgb), tol]))


def test_flame_search_share_and_group_filter(page: Any, lab: Any) -> None:
    _ready(page, lab, "pv-flame.ipynb")
    synthetic_run(page, n=600, workers=2, groups=3, samples=4)
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "flame-samples", "Number(v) > 0")
    _wait_attr(page, FLAME, "rects", "Number(v) > 0")
    assert _count_color(page, FLAME, SEARCH_HIT) == 0  # nothing highlighted yet
    search = page.locator(".jp-DaskProfile-search")

    # every group's tree has 30 samples: 9 in sleep, 12 in numpy_op
    for query, share in (("sleep", 30.0), ("numpy_op", 40.0)):
        search.fill(query)
        page.wait_for_function(
            f"() => document.querySelector('{MATCH}').textContent.startsWith('{share:.1f} ')"
        )
        assert _match_share(page) == share
        _wait_attr(page, FLAME, "rects", "Number(v) > 0")
        # the matching frames are drawn in the highlight colour
        page.wait_for_function(
            f"(a) => ({COUNT_COLOR_JS})(a) > 0", arg=[FLAME, list(SEARCH_HIT), 24]
        )
    search.fill("no_such_function")
    page.wait_for_function(f"() => document.querySelector('{MATCH}').textContent === '0.0 % match'")
    assert _match_share(page) == 0.0
    _next_frames(page)  # the redraw is scheduled on the next animation frame
    assert _count_color(page, FLAME, SEARCH_HIT) == 0
    search.fill("")
    page.wait_for_function(f"() => document.querySelector('{MATCH}').textContent === ''")

    # group filter: one of three groups keeps a third of the samples and fewer nodes
    all_samples = int(panel_data(page, "flame-samples"))
    all_nodes = int(panel_data(page, "flame-nodes"))
    select = page.locator(".jp-DaskProfile-groupFilter")
    assert select.locator("option").all_inner_texts() == [
        "All groups",
        "add",
        "inc",
        "sum-aggregate",
    ]
    select.select_option("add")
    wait_data(page, "flame-samples", f"Number(v) < {all_samples}")
    assert int(panel_data(page, "flame-samples")) * 3 == all_samples
    one_nodes = int(panel_data(page, "flame-nodes"))
    assert 0 < one_nodes < all_nodes, (one_nodes, all_nodes)
    # search within the filtered tree: the share is of that group's samples
    search.fill("sleep")
    page.wait_for_function(f"() => document.querySelector('{MATCH}').textContent !== ''")
    assert _match_share(page) == 30.0
    search.fill("")
    select.select_option("")
    wait_data(page, "flame-samples", f"v === '{all_samples}'")
    wait_data(page, "flame-nodes", f"v === '{all_nodes}'")


# --- 4. cache occupancy ---------------------------------------------------------------------

CACHE_RUN_JS = """
({run, groups, per}) => {
  const hook = window.daskprofileTestHook;
  const send = (d, b) => { if (!hook.receive(d, b || [])) throw new Error('rejected ' + d.type); };
  send({type: 'run_start', run, t0: 0, wall0: 0, options: {}});
  const names = ['load', 'parse', 'join', 'reduce', 'write', 'spare'];
  send({type: 'groups', run, ids: names.map((_, i) => i), names, colors: names.map(() => '')});
  send({type: 'workers', run, ids: [0], labels: ['thread 1'], kinds: ['thread']});
  const g = new Uint16Array([0]), w = new Uint16Array([0]), st = new Uint8Array([0]);
  send({type: 'tasks', run, n: 1, base: 0, first: 0,
        columns: ['group', 'worker', 'status', 'submit', 'start', 'stop']},
       [g.buffer, w.buffer, st.buffer, new Float32Array([0]).buffer,
        new Float32Array([0]).buffer, new Float32Array([10]).buffer]);
  const n = groups * per;
  const t = new Float32Array(n), cg = new Uint16Array(n), m = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const gi = i % groups, k = Math.floor(i / groups);
    t[i] = (k / per) * 10; cg[i] = gi; m[i] = 1e6 * (gi + 1) * (1 + (k % 3));
  }
  send({type: 'cache', run, n, base: 0, columns: ['time', 'group', 'metric']},
       [t.buffer, cg.buffer, m.buffer]);
  send({type: 'run_end', run, summary: {}, dropped: {}, errors: []});
  const r = hook.model.current;
  return Array.from({length: groups}, (_, i) => r.group(i).color);
}
"""


def _hex(color: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"#([0-9a-fA-F]{6})", color)
    assert m, color
    v = int(m.group(1), 16)
    return (v >> 16, (v >> 8) & 255, v & 255)


def test_cache_view_draws_one_line_per_group(page: Any, lab: Any) -> None:
    _ready(page, lab, "pv-cache.ipynb")
    page.wait_for_function(f"() => document.querySelector('{CACHE}').width > 0")
    _wait_attr(page, CACHE, "series", "v === '0'")
    empty = canvas_stats(page, CACHE)
    colors = page.evaluate(CACHE_RUN_JS, {"run": "cached", "groups": 4, "per": 12})
    wait_data(page, "run", "v === 'cached'")
    _wait_attr(page, CACHE, "series", "v === '4'")  # four of the six groups have cache rows
    drawn = canvas_stats(page, CACHE)
    assert drawn["filled"] > empty["filled"] + 0.01, (drawn, empty)
    assert drawn["filled"] > 1.5 * empty["filled"], (drawn, empty)
    # each group's line is drawn in that group's colour
    for color in colors:
        assert _count_blend(page, CACHE, _hex(color)) > 30, color
    # the next run without cache rows: no series, back to the empty picture
    _custom_run(page, "nocache", ["x"], ["thread 1"], [(0, 0, 0, 0.0, 0.0, 1.0)])
    wait_data(page, "run", "v === 'nocache'")
    _wait_attr(page, CACHE, "series", "v === '0'")
    assert canvas_stats(page, CACHE)["filled"] < drawn["filled"]


# --- 5. progress ----------------------------------------------------------------------------


def _progress_rows(page: Any) -> dict[str, str]:
    rows = page.locator(".jp-DaskProfile-progressRow")
    out = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        out[row.locator(".jp-DaskProfile-progressName").inner_text()] = row.locator(
            ".jp-DaskProfile-progressText"
        ).inner_text()
    return out


def test_progress_shows_erred_counts_and_groups_not_started(page: Any, lab: Any) -> None:
    _ready(page, lab, "pv-progress.ipynb")
    synthetic_run(page, run="p", n=500, workers=2, groups=3)
    wait_data(page, "run-state", "v === 'finished'")
    rows = _progress_rows(page)
    # the synthetic run's row 0 erred: it is in the first group ("inc")
    assert rows == {
        "inc": "167 / 167 (1 erred)",
        "add": "167 / 167",
        "sum-aggregate": "166 / 166",
    }, rows
    erred = page.locator(".jp-DaskProfile-progressRow", has_text="inc").locator(
        ".jp-DaskProfile-progressErred"
    )
    width = erred.evaluate("e => e.getBoundingClientRect().width")
    assert width > 0, width
    ok_erred = page.locator(".jp-DaskProfile-progressRow", has_text="add").locator(
        ".jp-DaskProfile-progressErred"
    )
    assert ok_erred.evaluate("e => e.getBoundingClientRect().width") == 0

    # a live run: "reduce" is known (total 4) but none of its tasks are done yet
    _send(page, {"type": "run_start", "run": "live", "t0": 0, "wall0": 0, "options": {}})
    _send(
        page,
        {"type": "groups", "run": "live", "ids": [0, 1, 2],
         "names": ["load", "reduce", "store"], "colors": ["", "", ""]},
    )  # fmt: skip
    _send(
        page,
        {"type": "progress", "run": "live", "groups": [0, 1, 2], "total": [10, 4, 6],
         "done": [3, 0, 6], "erred": [0, 0, 5]},
    )  # fmt: skip
    wait_data(page, "run", "v === 'live'")
    _wait_attr(page, ".jp-DaskProfile-progress", "total", "v === '20'")
    assert _attr(page, ".jp-DaskProfile-progress", "done") == "9"
    rows = _progress_rows(page)
    assert rows == {"load": "3 / 10", "reduce": "0 / 4", "store": "6 / 6 (5 erred)"}, rows
    reduce_done = page.locator(".jp-DaskProfile-progressRow", has_text="reduce").locator(
        ".jp-DaskProfile-progressDone"
    )
    assert reduce_done.evaluate("e => e.getBoundingClientRect().width") == 0
    # a later message moves "reduce" on
    _send(
        page,
        {"type": "progress", "run": "live", "groups": [1], "total": [4], "done": [2],
         "erred": [1]},
    )  # fmt: skip
    _wait_attr(page, ".jp-DaskProfile-progress", "done", "v === '11'")
    assert _progress_rows(page)["reduce"] == "2 / 4 (1 erred)"


# --- 6. run switching -----------------------------------------------------------------------


def test_run_select_switches_between_runs(page: Any, lab: Any) -> None:
    _ready(page, lab, "pv-runs.ipynb")
    synthetic_run(page, run="first", n=300, workers=2, groups=2)
    wait_data(page, "run-state", "v === 'finished'")
    synthetic_run(page, run="second", n=1200, workers=4, groups=5)
    wait_data(page, "runs", "v === '2'")
    wait_data(page, "run", "v === 'second'")
    wait_data(page, "run-state", "v === 'finished'")
    assert panel_data(page, "tasks") == "1200"
    select = page.locator(".jp-DaskProfile-runSelect")
    options = select.locator("option").all_inner_texts()
    assert len(options) == 2, options
    assert options[0].startswith("#1"), options
    assert options[1].startswith("#2"), options
    assert select.input_value() == "1"

    select.select_option("0")
    wait_data(page, "run", "v === 'first'")
    assert panel_data(page, "tasks") == "300"
    assert panel_data(page, "workers") == "2"
    assert panel_data(page, "groups") == "2"
    assert _summary_items(page)["Tasks"][0] == "300 (1 failed)"
    assert select.input_value() == "0"
    legend = page.locator(".jp-DaskProfile-legend").inner_text()
    assert "inc" in legend, legend
    assert "sum-aggregate" not in legend, legend
    # the task stream shows the first run: two lanes (at least 40 px), not four
    page.wait_for_function(
        f"() => document.querySelector('{STREAM}').getBoundingClientRect().height === {AXIS + 40}"
    )

    select.select_option("1")
    wait_data(page, "run", "v === 'second'")
    assert panel_data(page, "tasks") == "1200"
    assert panel_data(page, "workers") == "4"
    assert _summary_items(page)["Tasks"][0] == "1,200 (2 failed)"
    assert "sum-aggregate" in page.locator(".jp-DaskProfile-legend").inner_text()
    page.wait_for_function(
        f"() => document.querySelector('{STREAM}').getBoundingClientRect().height === {AXIS + 4 * 18}"
    )


# --- 7. settings ----------------------------------------------------------------------------


@pytest.fixture
def settings(lab: Any) -> Iterator[Any]:
    """Put the panel's settings through the REST API; back to the defaults afterwards."""
    yield lambda raw: put_settings(lab, raw)
    put_settings(lab, {})


FLAME_ROWS_JS = """(sel) => {
    // runs of non-background pixels down the flame canvas's column 1 (left of any text):
    // every depth's first frame starts at x = 0, drawn rowHeight - 1 tall
    const c = document.querySelector(sel);
    const ctx = c.getContext('2d');
    const d = ctx.getImageData(1, 0, 1, c.height).data;
    const bg = [d[(c.height - 1) * 4], d[(c.height - 1) * 4 + 1], d[(c.height - 1) * 4 + 2]];
    const runs = [];
    let n = 0;
    for (let y = 0; y < c.height; y++) {
        const i = y * 4;
        const other = Math.abs(d[i] - bg[0]) + Math.abs(d[i + 1] - bg[1]) + Math.abs(d[i + 2] - bg[2]) > 30;
        if (other) { n++; } else if (n > 0) { runs.push(n); n = 0; }
    }
    if (n > 0) runs.push(n);
    return {runs, height: c.getBoundingClientRect().height, dpr: window.devicePixelRatio};
}"""


def _flame_rows(page: Any) -> dict[str, Any]:
    _wait_attr(page, FLAME, "rects", "Number(v) > 0")
    _next_frames(page)
    return dict(page.evaluate(FLAME_ROWS_JS, FLAME))


DEPTH = 4  # synthetic stacks: all > group > frame > leaf


def _layout_with_settings(page: Any, lab: Any, name: str) -> tuple[dict[str, Any], float]:
    _ready(page, lab, name)
    synthetic_run(page, n=2000, workers=4, groups=3, samples=3)
    wait_data(page, "run-state", "v === 'finished'")
    _wait_attr(page, STREAM, "rects", "Number(v) > 0")
    return _flame_rows(page), page.locator(STREAM).bounding_box()["height"]


def test_default_row_and_lane_heights(page: Any, lab: Any) -> None:
    """The counterpart of the settings tests: 16 px flame rows, 18 px lanes."""
    rows, stream = _layout_with_settings(page, lab, "pv-defaults.ipynb")
    assert rows["dpr"] == 1
    assert rows["runs"] == [15] * DEPTH, rows
    assert rows["height"] == DEPTH * 16 + 4, rows
    assert stream == AXIS + 4 * 18, stream


def test_settings_from_the_rest_api_take_effect(page: Any, lab: Any, settings: Any) -> None:
    settings({"flameRowHeight": 30, "maxLaneHeight": 40})
    rows, stream = _layout_with_settings(page, lab, "pv-settings.ipynb")
    assert rows["runs"] == [29] * DEPTH, rows
    assert rows["height"] == DEPTH * 30 + 4, rows
    assert stream == AXIS + 4 * 40, stream


def test_settings_editor_changes_apply_live(page: Any, lab: Any, settings: Any) -> None:
    rows, _ = _layout_with_settings(page, lab, "pv-editor.ipynb")
    assert rows["runs"] == [15] * DEPTH, rows
    run_command(page, "Settings Editor")
    page.locator(".jp-PluginList-entry", has_text="Dask Profile").first.click()
    form = "jp-SettingsEditor-daskprofile:plugin"
    row_input = page.locator(f'input[id="{form}_flameRowHeight"]')
    row_input.wait_for()
    assert row_input.input_value() == "16"
    row_input.fill("24")
    page.locator(f'input[id="{form}_maxLaneHeight"]').fill("30")
    # the panel (still open in the left sidebar) follows without a reload
    page.wait_for_function(
        f"() => document.querySelector('{FLAME}').getBoundingClientRect().height === {DEPTH * 24 + 4}"
    )
    page.wait_for_function(
        f"() => document.querySelector('{STREAM}').getBoundingClientRect().height === {AXIS + 4 * 30}"
    )
    assert _flame_rows(page)["runs"] == [23] * DEPTH
    # the editor saved them on the server
    saved = wait_server(
        page,
        lab,
        "lab/api/settings/daskprofile:plugin",
        "(j) => j.settings?.flameRowHeight === 24 && j.settings?.maxLaneHeight === 30",
    )
    raw = json.loads(saved["raw"])
    assert (raw["flameRowHeight"], raw["maxLaneHeight"]) == (24, 30), raw


# --- 8. palette commands --------------------------------------------------------------------


def _palette_labels(page: Any, query: str, expect: str) -> list[str]:
    """The command palette's labels for ``query``, once ``expect`` is among them."""
    page.keyboard.press("Escape")
    page.keyboard.press("ControlOrMeta+Shift+c")
    search = page.locator(".lm-CommandPalette-input")
    search.wait_for(state="visible")
    search.fill(query)
    label = page.locator(".lm-CommandPalette-item .lm-CommandPalette-itemLabel")
    label.filter(has_text=expect).first.wait_for()
    labels = label.all_inner_texts()
    page.keyboard.press("Escape")
    return labels


def test_palette_reset_view_and_pause_toggle(page: Any, lab: Any) -> None:
    _ready(page, lab, "pv-commands.ipynb")
    synthetic_run(page, n=5000, workers=4, groups=5)
    wait_data(page, "run-state", "v === 'finished'")
    _wait_attr(page, STREAM, "view", "v !== ''")
    full = _attr(page, STREAM, "view")
    f0, f1 = (float(x) for x in full.split(","))
    box = page.locator(STREAM).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 30)
    page.mouse.wheel(0, -600)
    _wait_attr(
        page,
        STREAM,
        "view",
        f"(([a, b]) => b - a < {(f1 - f0) * 0.6})(v.split(',').map(Number))",
    )
    run_command(page, "Dask Profile: Reset Task Stream View")
    _wait_attr(page, STREAM, "view", f"v === '{full}'")

    # pause: the kernel confirms, the button and the command's label follow
    assert panel_data(page, "paused") == "false"
    labels = _palette_labels(page, "Live Updates", "Dask Profile: Pause Live Updates")
    assert "Dask Profile: Resume Live Updates" not in labels, labels
    run_command(page, "Dask Profile: Pause Live Updates")
    wait_data(page, "paused", "v === 'true'")
    page.wait_for_selector(".jp-DaskProfile-pause[data-paused='true']")
    assert page.locator(".jp-DaskProfile-pause").inner_text() == "Resume"
    labels = _palette_labels(page, "Live Updates", "Dask Profile: Resume Live Updates")
    assert "Dask Profile: Pause Live Updates" not in labels, labels
    run_command(page, "Dask Profile: Resume Live Updates")
    wait_data(page, "paused", "v === 'false'")
    assert page.locator(".jp-DaskProfile-pause").inner_text() == "Pause"


# --- 9. layout restored on reload -------------------------------------------------------------


def test_panel_is_restored_open_and_current_on_reload(page: Any, lab: Any) -> None:
    write_notebook(lab.root, "pv-layout.ipynb", ["1 + 1"])
    open_notebook_in_workspace(page, lab, "pv-layout.ipynb", "pv-layout")
    # a reset workspace shows the file browser (once its layout is restored), not the panel
    assert "lm-mod-current" not in (page.locator(PANEL_TAB).get_attribute("class") or "")
    assert not page.locator(PANEL).is_visible()
    open_panel(page)
    wait_status(page, "connected")

    # JupyterLab saves the layout a while after it changes: wait until the workspace on
    # the server has the panel in front in the sidebar, then reload
    left = wait_server(
        page,
        lab,
        "lab/api/workspaces/pv-layout",
        "(j) => j.data?.['layout-restorer:data']?.left?.current === 'daskprofile'",
    )["data"]["layout-restorer:data"]["left"]
    assert left["collapsed"] is False, left

    # (no /tree/ path in the URL: opening a path can bring the file browser to the front)
    page.goto(f"{lab.url}lab/workspaces/pv-layout?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
    page.locator(PANEL).wait_for(state="visible", timeout=60_000)
    assert "lm-mod-current" in (page.locator(PANEL_TAB).get_attribute("class") or "")
    # shown, so it connects to the notebook's kernel without a click
    wait_status(page, "connected")
    assert page.locator(PANEL).bounding_box()["width"] > 100
