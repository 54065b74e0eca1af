"""Clicking a flame-graph frame opens its function's source with a heat bar per line
(real JupyterLab, real Chromium): from a profiled notebook cell on a real kernel, and from
a run fed through the test hook (per-line samples summed over call paths, source text
shown as text, a function without source, Escape and the close button)."""

from __future__ import annotations

import json
from typing import Any

from helpers import (
    PANEL,
    enable_test_hook,
    open_notebook,
    open_notebook_in_workspace,
    open_panel,
    panel_data,
    run_code,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

FLAME = ".jp-DaskProfile-flame canvas"
SOURCE = ".jp-DaskProfile-source"
ROWS = f"{SOURCE} .jp-DaskProfile-sourceRow"
SEARCH_HIT = (0xE0, 0x40, 0xFB)  # colour of frames matching the search (views/flameGraph.ts)

# where the top (or deepest) frame drawn in the search colour is, in page coordinates
FIND_HIT_JS = """([sel, rgb, deepest]) => {
    const c = document.querySelector(sel);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const near = (i) => Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1]) + Math.abs(d[i + 2] - rgb[2]) <= 24;
    for (let k = 0; k < c.height; k++) {
        const y = deepest ? c.height - 1 - k : k;
        for (let x = 0; x < c.width; x++) {
            if (!near((y * c.width + x) * 4)) continue;
            let end = x;
            while (end + 1 < c.width && near((y * c.width + end + 1) * 4)) end++;
            const box = c.getBoundingClientRect();
            const sx = box.width / c.width, sy = box.height / c.height;
            return [box.left + ((x + end) / 2) * sx, box.top + y * sy + (deepest ? -5 : 5)];
        }
    }
    return null;
}"""


def click_frame(page: Any, name: str, deepest: bool = False) -> None:
    """Search the flame graph for ``name`` and click the top frame it highlights (the
    deepest with ``deepest``: a task group's node is named after its function too)."""
    arg = [FLAME, list(SEARCH_HIT), deepest]
    # no frame left in the search colour by an earlier search: the canvas is redrawn on
    # the next animation frame, and a stale hit would be clicked
    page.locator(".jp-DaskProfile-search").fill("")
    page.wait_for_function(f"(a) => ({FIND_HIT_JS})(a) === null", arg=arg, timeout=30_000)
    page.locator(".jp-DaskProfile-search").fill(name)
    page.wait_for_function(f"(a) => ({FIND_HIT_JS})(a) !== null", arg=arg, timeout=30_000)
    x, y = page.evaluate(FIND_HIT_JS, arg)
    page.mouse.click(x, y)


def source_rows(page: Any) -> list[dict[str, str]]:
    """The rows of the source view: line, samples (data), text and figures shown."""
    return page.evaluate(  # type: ignore[no-any-return]
        """(sel) => [...document.querySelectorAll(sel)].map(r => ({
            line: r.dataset.line, samples: r.dataset.samples,
            text: r.querySelector('.jp-DaskProfile-sourceText').textContent,
            shown: r.querySelector('.jp-DaskProfile-sourceSamples').textContent,
            seconds: r.querySelector('.jp-DaskProfile-sourceSeconds').textContent,
            bar: r.querySelector('.jp-DaskProfile-sourceBar').style.width,
        }))""",
        ROWS,
    )


CELL = """import time
import dask


def slow_part(seconds):
    label = "<b>not bold</b>"
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        label.upper()
    return seconds


total = dask.compute(*[dask.delayed(slow_part)(0.4) for _ in range(4)], scheduler="threads")
print("DONE", len(total))"""


def test_clicking_a_frame_of_a_profiled_cell_shows_its_source(
    page: Any, lab: Any, screenshots: Any
) -> None:
    """A function defined in a notebook cell, computed with the panel open: its frame
    opens its source, named as its cell, with samples on the lines that ran."""
    name = write_notebook(lab.root, "source-view.ipynb", [""])
    open_notebook(page, lab, name)
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 760)
    assert "DONE 4" in run_code(page, CELL)
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "flame-nodes", "Number(v) > 1")
    assert panel_data(page, "source") == ""
    assert page.locator(SOURCE).is_hidden()

    click_frame(page, "slow_part", deepest=True)
    wait_data(page, "source", "v.startsWith('slow_part;')")
    view = page.locator(SOURCE)
    view.wait_for(state="visible")
    # named as IPython names the cell, with the function's own text
    header = view.locator(".jp-DaskProfile-sourceHeader").inner_text()
    assert "slow_part" in header, header
    assert "Cell In[" in header, header
    page.wait_for_function(f"() => document.querySelector('{SOURCE}').dataset.hasSource === 'true'")
    rows = source_rows(page)
    texts = [r["text"] for r in rows]
    assert texts[0] == "def slow_part(seconds):", texts
    assert "    while time.perf_counter() < end:" in texts
    assert '    label = "<b>not bold</b>"' in texts  # text, not markup
    assert view.locator("b").count() == 0
    hot = [r for r in rows if int(r["samples"]) > 0]
    assert hot, rows
    assert any("perf_counter" in r["text"] or "upper" in r["text"] for r in hot), hot
    top = max(hot, key=lambda r: int(r["samples"]))
    assert top["bar"] == "100%", top
    assert top["seconds"].endswith("s"), top  # estimated seconds beside the samples
    page.locator(".jp-DaskProfile-search").fill("")  # the picture without the highlight
    page.mouse.move(5, 5)  # ... nor the flame graph's tooltip
    page.locator(PANEL).screenshot(path=str(screenshots / "panel-source-view.png"))
    page.screenshot(path="/tmp/panel-source-view.png")

    view.locator(".jp-DaskProfile-sourceRows").click()  # the keys go to the view again
    page.keyboard.press("Escape")
    wait_data(page, "source", "v === ''")
    assert view.is_hidden()
    assert not [e for e in page.console_errors if "daskprofile" in e]


def _node(
    name: str, lines: dict[int, int], children: list[dict[str, Any]], first: int = 10
) -> dict[str, Any]:
    """A stack tree node of ``name`` in mod.py with per-line samples."""
    count = max(sum(lines.values()), sum(c["count"] for c in children))
    return {
        "identifier": f"{name};mod.py;{first}",
        "description": {"filename": "mod.py", "name": name, "line_number": first, "line": ""},
        "count": count,
        "lines": {str(k): v for k, v in lines.items()},
        "children": {c["identifier"]: c for c in children},
    }


HOSTILE = '    s = "<img src=x onerror=window.__xss=1>"'


def _feed_run(page: Any) -> None:
    """A run whose `work` is reached from two callers, with its source; `helper` has none."""
    work_a = _node("work", {11: 6, 12: 2}, [_node("helper", {31: 2}, [], first=30)])
    work_b = _node("work", {12: 4}, [])
    main = _node("main", {2: 8, 3: 4}, [work_a, _node("other", {21: 4}, [work_b], 20)], 1)
    root = {
        "identifier": "root",
        "description": {},
        "count": 12,
        "children": {"main;mod.py;1": main},
    }
    source = {
        "file": "Cell In[7]",
        "name": "work",
        "start": 10,
        "text": ["def work(x):", "    y = x + 1", HOSTILE, "    return y"],
    }
    messages = [
        {"type": "run_start", "run": "sv", "t0": 0, "wall0": 0, "options": {"interval": 0.01}},
        {"type": "sources", "run": "sv", "sources": {"work;mod.py;10": source}},
        {"type": "stacks", "run": "sv", "t_start": 0, "t_end": 1, "trees": {"inc": root}},
        {"type": "run_end", "run": "sv", "summary": {}, "dropped": {}, "errors": []},
    ]
    for data in messages:
        assert page.evaluate("(d) => window.daskprofileTestHook.receive(d, [])", data), data


def test_source_view_sums_call_paths_escapes_text_and_closes(page: Any, lab: Any) -> None:
    enable_test_hook(page)
    name = write_notebook(lab.root, "source-synthetic.ipynb", ["1 + 1"])
    open_notebook_in_workspace(page, lab, name, "source-synthetic")
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 760)
    _feed_run(page)
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "flame-nodes", "Number(v) > 1")

    click_frame(page, "work")
    wait_data(page, "source", "v === 'work;mod.py;10'")
    rows = source_rows(page)
    # both call paths of `work`: line 11 has 6 samples, line 12 has 2 + 4
    assert [(r["line"], r["samples"]) for r in rows] == [
        ("10", "0"),
        ("11", "6"),
        ("12", "6"),
        ("13", "0"),
    ]
    assert rows[2]["text"] == HOSTILE  # shown as text, never run
    assert page.locator(f"{SOURCE} img").count() == 0
    assert page.evaluate("() => window.__xss") is None
    assert rows[1]["bar"] == rows[2]["bar"] == "100%"
    assert rows[0]["bar"] == "0%"
    assert rows[1]["seconds"] == "60 ms"  # 6 samples at the run's 10 ms interval
    header = page.locator(f"{SOURCE} .jp-DaskProfile-sourceHeader").inner_text()
    assert "Cell In[7]" in header, header
    assert "work" in header, header
    assert page.locator(f"{SOURCE} .jp-DaskProfile-sourceNote").is_hidden()

    # the close button closes it; a function without source lists its counted lines
    page.locator(f"{SOURCE} .jp-DaskProfile-sourceClose").click()
    wait_data(page, "source", "v === ''")
    click_frame(page, "helper")
    wait_data(page, "source", "v === 'helper;mod.py;30'")
    note = page.locator(f"{SOURCE} .jp-DaskProfile-sourceNote")
    assert note.is_visible()
    assert "not available" in note.inner_text()
    rows = source_rows(page)
    assert [(r["line"], r["samples"]) for r in rows] == [("31", "2")]
    page.keyboard.press("Escape")
    wait_data(page, "source", "v === ''")
    assert page.locator(SOURCE).is_hidden()
    assert json.loads(page.evaluate("() => JSON.stringify(window.__xss ?? null)")) is None
