"""The light inline view of ``%%daskprofile`` with the network blocked: drawn in JupyterLab
(hover names a task's key, the wheel zooms once clicked), then the saved notebook exported
with nbconvert and opened from a file, where it draws the same with nothing fetched."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import nbformat
from helpers import canvas_stats, open_notebook, settle
from test_source_view import click_frame, source_rows

from conftest import write_notebook

HOSTILE = "/<img src=x onerror=alert(1)></script><script>alert(2)</script>"
CELLS = [
    "%load_ext daskprofile",
    "%%daskprofile\n"
    "import time, dask\n"
    "def work(i):\n"
    "    end = time.perf_counter() + 0.03\n"
    "    while time.perf_counter() < end:\n"
    "        pass\n"
    "    return i\n"
    f"parts = [dask.delayed(work)(i, dask_key_name=({HOSTILE!r}, i)) for i in range(40)]\n"
    "total = dask.delayed(sum)(parts, dask_key_name='total')\n"
    "total.compute()",
]
VIEW = ".jp-DaskProfile-inline"
STREAM = f"{VIEW} .jp-DaskProfile-taskStream canvas"
FLAME = f"{VIEW} .jp-DaskProfile-flame canvas"
#: the hosts nbconvert's own HTML template asks for (require.js, MathJax, widgets)
TEMPLATE_HOSTS = {"cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net"}


def _block_network(page: Any, allowed: tuple[str, ...]) -> list[str]:
    """Abort every request whose URL does not start with one of ``allowed``; returns the
    list of aborted URLs (filled as the page runs)."""
    refused: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(allowed):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return refused


def _run_all(page: Any) -> None:
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=60_000)
    page.locator(".jp-Cell .cm-content").first.click()
    for _ in CELLS:
        page.keyboard.press("Shift+Enter")


def _wait_drawn(page: Any) -> None:
    """The view mounted, its task stream drew bars and its flame graph has frames."""
    page.wait_for_selector(f"{VIEW}[data-tasks='41']", timeout=120_000)
    page.wait_for_function(
        f"""() => {{
            const v = document.querySelector('{VIEW}');
            const c = v.querySelector('.jp-DaskProfile-taskStream canvas');
            return +(c.dataset.rects || 0) > 0 && +v.dataset.flameNodes > 1;
        }}""",
        timeout=30_000,
    )
    settle(page)
    for selector in (STREAM, FLAME):
        stats = canvas_stats(page, selector)
        assert stats["filled"] > 0.02, (selector, stats)


def _hover_a_task(page: Any) -> str:
    """Move over the task stream until a task's tooltip shows; returns its text."""
    box = page.locator(STREAM).bounding_box()
    tooltip = page.locator(f"{VIEW} .jp-DaskProfile-taskStream .jp-DaskProfile-tooltip")
    for y in range(22, int(box["height"]) - 4, 6):
        for x in range(80, int(box["width"]) - 4, 12):
            page.mouse.move(box["x"] + x, box["y"] + y)
            if tooltip.is_visible() and "key" in tooltip.inner_text():
                return str(tooltip.inner_text())
    raise AssertionError("no task tooltip anywhere on the task stream")


def _zoom(page: Any) -> None:
    """The wheel scrolls the page until the view is clicked; then it zooms."""
    canvas = page.locator(STREAM)
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 30)
    before = canvas.get_attribute("data-view")
    page.mouse.wheel(0, -400)
    settle(page)
    assert canvas.get_attribute("data-view") == before  # not clicked yet: not zoomed
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + 30)
    page.mouse.wheel(0, -400)
    page.wait_for_function(
        "([sel, v]) => document.querySelector(sel).dataset.view !== v", arg=[STREAM, before]
    )


def _save(page: Any, path: Path, tries: int = 6) -> Any:
    """Save the notebook (its keys, not the view's: a cell prompt is clicked first) and
    return the file once it holds the view's output (a save right after a run can be
    skipped: it is asked again)."""
    for _ in range(tries):
        page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt").first.click()
        page.keyboard.press("ControlOrMeta+s")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            text = path.read_text()
            if "daskprofile-inline" in text:
                return nbformat.reads(text, as_version=4)
            time.sleep(0.2)
    raise AssertionError("the notebook was not saved with its outputs")


def test_inline_view_draws_offline_in_lab_and_in_exported_html(
    page: Any, lab: Any, browser: Any, screenshots: Path, tmp_path: Path
) -> None:
    origin = lab.url.rstrip("/")
    lab_refused = _block_network(page, (origin, "data:", "blob:"))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    name = write_notebook(lab.root, "inline.ipynb", CELLS)
    open_notebook(page, lab, name)
    _run_all(page)

    _wait_drawn(page)
    view = page.locator(VIEW)
    assert view.get_attribute("data-theme") == "lab"  # JupyterLab's theme variables
    assert HOSTILE in view.inner_text()  # the group name, as text in the legend
    tip = _hover_a_task(page)
    assert HOSTILE in tip, tip  # the task's key, fetched with the view: no kernel asked
    _zoom(page)
    view.scroll_into_view_if_needed()
    view.screenshot(path=str(screenshots / "inline-view-lab.png"))
    notebook = _save(page, lab.root / name)
    assert dialogs == []
    assert page.locator("img[src=x]").count() == 0
    assert page.console_errors == []  # type: ignore[attr-defined]
    assert lab_refused == []

    import nbconvert

    body, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    exported = tmp_path / "inline.html"
    exported.write_text(body)
    size = len(json.dumps(notebook.cells[1].outputs))
    assert size < 300_000, size
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    try:
        offline = context.new_page()
        refused = _block_network(offline, ("file:", "data:", "blob:"))
        errors: list[str] = []
        offline.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        offline.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
        offline.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        offline.goto(exported.as_uri())
        _wait_drawn(offline)
        offline.locator(VIEW).screenshot(path=str(screenshots / "inline-view-exported.png"))
        assert offline.locator(VIEW).get_attribute("data-rejected") == "0"
        # a flame frame opens its function's source, from the output alone
        click_frame(offline, "work", deepest=True)
        offline.wait_for_function(
            f"() => document.querySelector('{VIEW}').dataset.source.startsWith('work;')"
        )
        rows = source_rows(offline)
        assert rows[0]["text"] == "def work(i):", rows
        assert any(int(r["samples"]) > 0 for r in rows), rows
        assert dialogs == []
        assert offline.locator("img[src=x]").count() == 0
        # only nbconvert's template asked for something (require.js, MathJax, widgets)
        assert {urlparse(u).hostname for u in refused} <= TEMPLATE_HOSTS, refused
        others = [e for e in errors if not e.startswith("Failed to load resource")]
        assert others == []
        assert len(errors) <= len(refused)
    finally:
        context.close()
