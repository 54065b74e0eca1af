"""The snapshot's source view: a click on a flame-graph frame shows its function's lines
(text, heat bar, samples, seconds), opened in headless Chromium with the network refused.
Source text is data: a function holding ``<script>alert(1)</script>`` shows it as text and
runs nothing; a function whose text cannot be found still shows its line counts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.export import to_html
from daskprofile.export._source_view import function_lines, seconds_per_sample, source_payload

SCRIPT = "<script>alert(1)</script>"
# count elements matching a tag (upper case) through open shadow roots
JS_COUNT = """(tag) => { let n = 0; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.tagName === tag) n++; if (el.shadowRoot) walk(el.shadowRoot); } };
  walk(document); return n; }"""
# client coordinates of the first flame frame of function ``name`` (deepest first)
JS_FRAME = """(name) => {
  const v = [...Bokeh.index.all_views()].find(
    v => v.frame && String(v.model.title?.text ?? '').startsWith('Flame graph'));
  const d = v.model.renderers[0].data_source.data;
  const group = [...Bokeh.documents[0].all_models].find(m => m.type === 'GroupFilter').group;
  let best = -1;
  d.name.forEach((n, i) => {
    if (n === name && d.group[i] === group && (best < 0 || d.depth[i] > d.depth[best])) best = i;
  });
  if (best < 0) return null;
  v.el.scrollIntoView(); const r = v.el.getBoundingClientRect();
  return [r.left + v.frame.x_scale.compute((d.left[best] + d.right[best]) / 2),
          r.top + v.frame.y_scale.compute(d.depth[best])]; }"""
# the rows the source view shows (through shadow roots)
JS_ROWS = """() => { const out = []; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.classList && el.classList.contains('dp-row')) {
      const cells = [...el.querySelectorAll('td')].map(td => td.textContent);
      out.push({line: Number(el.dataset.line), samples: Number(el.dataset.samples),
                text: cells[4], shown: cells[2], seconds: cells[3],
                bar: el.querySelector('.dp-bar').style.width}); }
    if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document); return out; }"""
JS_VIEW = """() => { let found = null; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.classList && el.classList.contains('dp-src'))
      found = {...el.dataset, text: el.innerText};
    if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document); return found; }"""


def hostile_spin(seconds: float) -> int:
    """Busy Python whose source holds a script tag in a string."""
    label = "<script>alert(1)</script>"
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += len(label)
    return n


GENERATED = """
def generated_spin(seconds):
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n
"""


def _generated() -> Any:
    """A function compiled from a string: its text is in no file."""
    namespace: dict[str, Any] = {"time": time}
    exec(compile(GENERATED, "<generated>", "exec"), namespace)
    return namespace["generated_spin"]


@pytest.fixture(scope="module")
def spin_run() -> Any:
    generated = _generated()
    graph: dict[Any, Any] = {("hostile", i): (hostile_spin, 0.15) for i in range(4)}
    graph.update({("generated", i): (generated, 0.1) for i in range(2)})
    with daskprofile.profile(stacks=True, interval=0.005) as run:
        named_schedulers["threads"](graph, list(graph), num_workers=2)
    return run


def _open_flame(open_offline: Any, run: Any, path: Path) -> Any:
    to_html(run, path)
    opened = open_offline(path)
    opened.page.get_by_text("Flame graph", exact=True).first.click()
    opened.page.wait_for_function(
        "() => Bokeh.documents.every(d => d.is_idle) && "
        "[...Bokeh.index.all_views()].some(v => v.frame && "
        "String(v.model.title?.text ?? '').startsWith('Flame graph') && "
        "v.el.getBoundingClientRect().width > 0)"
    )
    return opened


def _pick_group(page: Any, group: str) -> None:
    select = page.locator("select").first
    options = select.evaluate("s => [...s.options].map(o => o.text)")
    index = [text.startswith(f"{group} (") for text in options].index(True)
    select.select_option(index=index)


def _click_function(page: Any, name: str) -> None:
    xy = page.evaluate(JS_FRAME, name)
    assert xy is not None, name
    # two taps within BokehJS's 300 ms are one double tap (which selects nothing)
    page.wait_for_function("() => performance.now() - (window.__lastTap ?? -1e9) > 350")
    page.mouse.click(*xy)
    page.evaluate("() => { window.__lastTap = performance.now(); }")
    page.wait_for_function(f"() => ({JS_VIEW})() !== null", timeout=10_000)


def test_clicking_a_frame_shows_its_source_with_a_heat_bar_per_line(
    spin_run: Any, tmp_path: Path, open_offline: Any
) -> None:
    assert "hostile" in spin_run.stacks
    opened = _open_flame(open_offline, spin_run, tmp_path / "source.html")
    page = opened.page
    _pick_group(page, "hostile")
    scripts = page.evaluate(JS_COUNT, "SCRIPT")
    assert page.evaluate(JS_VIEW) is None  # nothing until a click
    _click_function(page, "hostile_spin")
    view = page.evaluate(JS_VIEW)
    assert view["identifier"].startswith("hostile_spin;")
    assert view["hasSource"] == "true"
    assert Path(__file__).name in view["text"]  # the header names the file
    rows = page.evaluate(JS_ROWS)
    texts = [r["text"] for r in rows]
    assert texts[0] == "def hostile_spin(seconds: float) -> int:"
    assert f'    label = "{SCRIPT}"' in texts  # as text
    assert page.evaluate(JS_COUNT, "SCRIPT") == scripts  # ... and no script element added
    assert opened.dialogs == []
    assert opened.errors == []
    # samples where the loop ran; the hottest line's bar is full, seconds beside it
    hot = max(rows, key=lambda r: r["samples"])
    assert hot["samples"] > 0
    assert "perf_counter" in hot["text"] or "len(label)" in hot["text"], hot
    assert hot["bar"] == "100%"
    assert hot["seconds"].endswith("s")
    assert sum(r["samples"] for r in rows) >= hot["samples"]
    page.screenshot(path=str(tmp_path / "snapshot-source.png"))

    # Escape closes it; the close button too
    page.keyboard.press("Escape")
    page.wait_for_function(f"() => ({JS_VIEW})() === null")
    _click_function(page, "hostile_spin")
    page.get_by_text("Close source view").click()
    page.wait_for_function(f"() => ({JS_VIEW})() === null")


def test_a_function_without_source_still_shows_its_line_counts(
    spin_run: Any, tmp_path: Path, open_offline: Any
) -> None:
    sources = spin_run.sources
    assert not any(ident.startswith("generated_spin;") for ident in sources)
    opened = _open_flame(open_offline, spin_run, tmp_path / "nosource.html")
    page = opened.page
    _pick_group(page, "generated")
    _click_function(page, "generated_spin")
    view = page.evaluate(JS_VIEW)
    assert view["hasSource"] == "false"
    assert "Source not available" in view["text"]
    rows = page.evaluate(JS_ROWS)
    assert rows
    assert all(r["text"] == "(source not available)" for r in rows)
    assert all(r["samples"] > 0 for r in rows)
    lines = source_payload(spin_run)["groups"]["generated"]["functions"][view["identifier"]]
    assert [[r["line"], r["samples"]] for r in rows] == lines["lines"]
    # another group closes the view
    _pick_group(page, "hostile")
    page.wait_for_function(f"() => ({JS_VIEW})() === null")
    assert opened.errors == []


def _node(ident: str, count: int, lines: dict[int, int], *kids: dict[str, Any]) -> dict[str, Any]:
    name, filename, first = ident.split(";")
    return {
        "identifier": ident,
        "description": {"filename": filename, "name": name, "line_number": int(first)},
        "count": count,
        "lines": lines,
        "children": {k["identifier"]: k for k in kids},
    }


def test_function_lines_sum_every_call_path_and_count_recursion_once() -> None:
    f = "f;a.py;10"
    recursive = _node(f, 8, {11: 8}, _node(f, 3, {11: 3}))
    main = _node(
        "main;a.py;1",
        12,
        {2: 8, 3: 4},
        recursive,
        _node("g;a.py;20", 4, {21: 4}, _node(f, 4, {12: 4})),
    )
    tree = {
        "identifier": "root",
        "description": {},
        "count": 12,
        "children": {main["identifier"]: main},
    }
    out = function_lines(tree)
    assert out[f] == {"samples": 12, "lines": [[11, 11], [12, 4]]}
    assert out["main;a.py;1"] == {"samples": 12, "lines": [[2, 8], [3, 4]]}
    assert "root" not in out


def test_seconds_per_sample_is_task_time_over_samples(spin_run: Any) -> None:
    scale = seconds_per_sample(spin_run)
    tasks = spin_run.tasks
    for group in ("hostile", "generated"):
        rows = tasks[tasks["group"] == group]
        spent = float((rows["stop"] - rows["start"]).sum())
        samples = spin_run.stacks[group]["count"]
        assert scale[group] == pytest.approx(spent / samples)
