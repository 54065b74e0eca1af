"""``%%daskprofile`` / ``%daskprofile`` in a real kernel (nbclient), and their inline view
opened in headless Chromium with every network request refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daskprofile.jupyter.magic import parse_magic_line
from nbkernel import (
    HOSTILE,
    IMG,
    execute,
    html_outputs,
    offline_page_fixture,  # noqa: F401 - the offline_page fixture
    outputs,
    stream,
    widget_views,
)

SETUP = f"""
import threading, time
import dask
from daskprofile import hooks
HOSTILE = {HOSTILE!r}
def inc(x):
    time.sleep(0.005)
    return x + 1
"""

CELLS = {
    "load": "%load_ext daskprofile",
    "setup": SETUP,
    "main": "%%daskprofile -o run1 --html r.html --trace t.json --save r.npz\n"
    "vals = dask.compute(*[dask.delayed(inc)(i, dask_key_name=(HOSTILE, i)) for i in range(40)])\n"
    "sum(vals)",
    "check_var": "print(type(run1).__name__, len(run1.tasks), sorted(set(run1.tasks['group'])))",
    "line": "x = %daskprofile --no-progress sum(dask.compute(*map(dask.delayed(inc), range(5))))\n"
    "print('x =', x)",
    "bad_option": "%%daskprofile --bogus\n1",
    "bad_dt": "%daskprofile --dt 0 1+1",
    "bad_name": "%daskprofile -o 1x 1",
    "no_statement": "%daskprofile",
    "raises": "%%daskprofile -q -o run_err\ndask.compute(dask.delayed(inc)(1))\n1/0",
    "after_raise": "print(run_err.finished, len(run_err.tasks), hooks.installed(),"
    " [t.name for t in threading.enumerate() if t.name.startswith('daskprofile')])",
    "options": "%%daskprofile --no-stacks --no-cache --no-resources --dt 50ms -q -o run_opts\n"
    "dask.compute(dask.delayed(inc)(1))",
    "check_options": "o = run_opts.meta['options']\n"
    "print(o['stacks'], o['cache'], o['resources'], o['dt'])",
    "help": "%daskprofile -h",
    "semicolon": "%%daskprofile -q\n1 + 1;",
    "nested_magic": "%%daskprofile -q\nsquares = %time [i * i for i in range(3)]\nsquares",
    "bokeh": "%%daskprofile --view bokeh --no-progress\ndask.compute(dask.delayed(inc)(1))",
    "bad_view": "%%daskprofile --view svg\n1",
}
INDEX = {name: i for i, name in enumerate(CELLS)}


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """The notebook of ``CELLS`` executed once in a real kernel, and its directory."""
    cwd = tmp_path_factory.mktemp("magic")
    return execute(list(CELLS.values()), cwd), cwd


def _errors(notebook: Any, name: str) -> list[Any]:
    return outputs(notebook, INDEX[name], "error")


def test_cell_magic_shows_progress_then_the_inline_view_and_returns_the_value(
    nb: tuple[Any, Path],
) -> None:
    notebook, _ = nb
    i = INDEX["main"]
    assert _errors(notebook, "main") == []
    assert len(widget_views(notebook, i)) == 1  # the progress bar
    (view,) = html_outputs(notebook, i)
    assert view.startswith('<div class="daskprofile-inline">')  # the light view
    assert "<script src=" not in view  # the views are inline (the browser test checks too)
    assert IMG not in view  # the hostile key is escaped text inside the data
    assert len(view) < 300_000
    (result,) = outputs(notebook, i, "execute_result")
    assert result.data["text/plain"] == "820"
    plain = next(o for o in outputs(notebook, i, "display_data") if "text/html" in o.data)
    assert "40 tasks" in plain.data["text/plain"]


def test_output_variable_and_files(nb: tuple[Any, Path]) -> None:
    notebook, cwd = nb
    out = stream(notebook, INDEX["check_var"])
    assert out.startswith("Run 40 ")
    assert HOSTILE in out  # the group, as text
    assert "<html" in (cwd / "r.html").read_text()
    trace = json.loads((cwd / "t.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert sum(1 for e in events if e.get("ph") == "X") == 40

    import daskprofile

    assert len(daskprofile.load(cwd / "r.npz").tasks) == 40


def test_view_option_shows_the_bokeh_snapshot(nb: tuple[Any, Path]) -> None:
    notebook, _ = nb
    (view,) = html_outputs(notebook, INDEX["bokeh"])
    assert view.startswith('<iframe id="daskprofile-view-')
    assert "srcdoc='" in view
    assert "cdn.bokeh.org" not in view  # BokehJS is inline
    err = stream(notebook, INDEX["bad_view"], "stderr")
    assert "argument --view: invalid choice: 'svg'" in err


def test_line_magic_returns_the_statement_value(nb: tuple[Any, Path]) -> None:
    notebook, _ = nb
    i = INDEX["line"]
    assert "x = 15" in stream(notebook, i)
    assert widget_views(notebook, i) == []  # --no-progress
    assert len(html_outputs(notebook, i)) == 1


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad_option", "unrecognized arguments: --bogus"),
        ("bad_dt", "dt must be > 0"),
        ("bad_name", "-o needs a Python variable name"),
        ("no_statement", "a statement to profile is required"),
    ],
)
def test_wrong_options_print_usage_without_traceback(
    nb: tuple[Any, Path], name: str, message: str
) -> None:
    notebook, _ = nb
    i = INDEX[name]
    err = stream(notebook, i, "stderr")
    assert err.startswith("UsageError:")
    assert message in err
    assert "usage: %" in err
    assert _errors(notebook, name) == []
    assert "Traceback" not in err
    assert html_outputs(notebook, i) == []


def test_cell_exception_propagates_and_the_run_ends_cleanly(nb: tuple[Any, Path]) -> None:
    notebook, _ = nb
    (error,) = _errors(notebook, "raises")
    assert error.ename == "ZeroDivisionError"
    traceback = "\n".join(error.traceback)
    assert "magic.py" not in traceback  # the user's frames only
    assert html_outputs(notebook, INDEX["raises"]) == []  # --quiet
    assert stream(notebook, INDEX["after_raise"]).strip() == "True 1 False []"


def test_collector_options_reach_profile(nb: tuple[Any, Path]) -> None:
    notebook, _ = nb
    assert stream(notebook, INDEX["check_options"]).strip() == "False False False 0.05"


def test_help_semicolon_and_nested_magics(nb: tuple[Any, Path]) -> None:
    notebook, _ = nb
    assert "--no-stacks" in stream(notebook, INDEX["help"])
    assert outputs(notebook, INDEX["semicolon"], "execute_result") == []
    nested = INDEX["nested_magic"]
    assert "Wall time" in stream(notebook, nested)
    (result,) = outputs(notebook, nested, "execute_result")
    assert result.data["text/plain"] == "[0, 1, 4]"


def test_parse_magic_line_keeps_the_statement_verbatim() -> None:
    ns, statement = parse_magic_line("--html 'my report.html' -o r print(\"it's\")  ", cell=False)
    assert (ns.html, ns.name, statement) == ("my report.html", "r", 'print("it\'s")')
    ns, statement = parse_magic_line("--no-stacks -- -x.sum()", cell=False)
    assert (ns.stacks, statement) == (False, "-x.sum()")


# -- the inline view in a browser ---------------------------------------------------------

IDLE = "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents.every(d => d.is_idle)"
JS_CANVASES = """() => { let n = 0; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.tagName === 'CANVAS') n++; if (el.shadowRoot) walk(el.shadowRoot); } };
  walk(document); return n; }"""
LIGHT = ".jp-DaskProfile-inline[data-tasks]"
#: the light view's task stream drew its bars (one data-rects per frame)
JS_DRAWN = """() => [...document.querySelectorAll('.jp-DaskProfile-inline')].map(v =>
  +(v.querySelector('.jp-DaskProfile-taskStream canvas').dataset.rects || 0))"""


def test_inline_view_renders_offline_without_running_hostile_keys(
    nb: tuple[Any, Path], offline_page: tuple[Any, dict[str, list[str]]], tmp_path: Path
) -> None:
    notebook, _ = nb
    (view,) = html_outputs(notebook, INDEX["main"])
    page, seen = offline_page
    path = tmp_path / "output.html"
    path.write_text(f"<!DOCTYPE html><html><body><h1>cell output</h1>{view}</body></html>")
    page.goto(path.as_uri())
    page.wait_for_selector(f"{LIGHT}[data-tasks='40']")
    page.wait_for_function(f"() => ({JS_DRAWN})()[0] > 0")
    text = page.evaluate("() => document.body.innerText")
    assert HOSTILE in text  # the group, as text in the legend
    assert page.evaluate("() => document.querySelectorAll('img[src=x]').length") == 0
    assert seen == {"refused": [], "dialogs": [], "errors": []}


def test_notebook_exported_to_html_shows_the_views_offline(
    nb: tuple[Any, Path], offline_page: tuple[Any, dict[str, list[str]]], tmp_path: Path
) -> None:
    nbconvert = pytest.importorskip("nbconvert")
    notebook, _ = nb
    body, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    path = tmp_path / "notebook.html"
    path.write_text(body)
    page, seen = offline_page
    page.goto(path.as_uri())
    page.wait_for_function(f"() => document.querySelectorAll('{LIGHT}').length === 2")
    page.wait_for_function(f"() => ({JS_DRAWN})().every(n => n > 0)")  # two light views
    frame = page.wait_for_selector("iframe.daskprofile-view").content_frame()
    frame.wait_for_function(IDLE, timeout=30_000)  # and the bokeh one, in its iframe
    assert frame.evaluate(JS_CANVASES) > 0
    assert seen["dialogs"] == []
    assert seen["errors"] == []
    # nbconvert's own template asks CDNs for require.js/MathJax/widgets; the views for nothing
    assert not [url for url in seen["refused"] if "bokeh" in url or "daskprofile" in url]
