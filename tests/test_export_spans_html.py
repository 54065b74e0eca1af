"""The snapshot's span selector: a run with spans gets a ``Select`` over its task stream
that dims the tasks of other spans (sub-spans included), offline, in headless Chromium;
span names are text. A run without spans gets no selector."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.export import _lod, _span_filter, to_html
from daskprofile.export._common import task_arrays
from test_export_html import IDLE, assert_rendered

HOSTILE = "<img src=x onerror=alert(1)>"

# the alpha of every rectangle by its span path (null: none), over the stream's sources
JS_ALPHAS = """() => {
  const out = {};
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'ColumnDataSource' || !m.data.s) continue;
    const sel = [...Bokeh.documents[0].all_models].find(x => x.name === 'dp-span');
    const paths = sel.tags[0];
    m.data.s.forEach((s, i) => {
      const path = s >= 0 ? paths[s] : 'none';
      (out[path] = out[path] || new Set()).add(m.data.a[i] === m.data.a0[i] ? 'shown' : 'dim');
    });
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v].sort().join()]));
}"""


def _inc(x: int) -> int:
    return x + 1


@pytest.fixture(scope="module")
def spanned_run() -> Any:
    with daskprofile.profile(resources=False, stacks=False) as run:
        with daskprofile.span("load"):
            a = [dask.delayed(_inc)(i) for i in range(6)]
            with daskprofile.span("clean"):
                b = [dask.delayed(_inc)(i) for i in range(4)]
        with daskprofile.span(HOSTILE):
            c = [dask.delayed(_inc)(i) for i in range(3)]
        d = [dask.delayed(_inc)(i) for i in range(2)]
        dask.compute(a, b, c, d, scheduler="threads")
    return run


def test_the_selector_lists_each_span_with_its_parents() -> None:
    assert _span_filter.options(["load/clean", "b"]) == ["All spans", "b", "load", "load/clean"]


def test_switching_the_span_dims_the_other_spans_tasks(
    spanned_run: Any, tmp_path: Path, open_offline: Any
) -> None:
    path = tmp_path / "spans.html"
    to_html(spanned_run, path)
    opened = open_offline(path)
    page = opened.page
    select = page.locator("select").first
    options = select.evaluate("s => [...s.options].map(o => o.text)")
    assert options == ["All spans", HOSTILE, "load", "load/clean"]  # names as text
    every = {"load": "shown", "load/clean": "shown", HOSTILE: "shown", "none": "shown"}
    assert page.evaluate(JS_ALPHAS) == every
    select.select_option("load")
    page.wait_for_function(IDLE)
    assert page.evaluate(JS_ALPHAS) == {**every, HOSTILE: "dim", "none": "dim"}
    select.select_option("load/clean")
    page.wait_for_function(IDLE)
    assert page.evaluate(JS_ALPHAS) == {
        "load": "dim",
        "load/clean": "shown",
        HOSTILE: "dim",
        "none": "dim",
    }
    select.select_option("All spans")
    page.wait_for_function(IDLE)
    assert page.evaluate(JS_ALPHAS) == every
    body = page.inner_text("body")
    assert "Spans" in body  # the Spans table is still there
    assert HOSTILE in body  # as text
    assert_rendered(opened)


def test_a_run_without_spans_has_no_selector(tmp_path: Path) -> None:
    dsk = {("inc-x", i): (operator.add, i, 1) for i in range(10)}
    with daskprofile.profile(resources=False, stacks=False) as run:
        named_schedulers["sync"](dsk, list(dsk))
    assert task_arrays(run).span is None
    path = tmp_path / "plain.html"
    to_html(run, path)
    assert "dp-span" not in path.read_text()


def test_merged_intervals_keep_to_one_span_each(
    spanned_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_lod, "LOD_THRESHOLD", 0)
    arrays = task_arrays(spanned_run)
    _, short, pixel = _lod.split_tasks(arrays, min_px=1e9)
    busy, codes, _ = _span_filter.merge_per_span(arrays, short, pixel * 1e6)
    assert codes is not None
    assert busy.count.sum() == len(short)
    per_span = {int(c): int(busy.count[codes == c].sum()) for c in np.unique(codes)}
    expected = {int(c): int((arrays.span[short] == c).sum()) for c in np.unique(arrays.span)}
    assert per_span == expected
