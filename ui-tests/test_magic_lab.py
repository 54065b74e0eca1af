"""``%%daskprofile --view bokeh`` in a real JupyterLab: the progress widget and the bokeh
snapshot's iframe render (the default light view: test_inline_view.py)."""

from __future__ import annotations

from typing import Any

from helpers import open_notebook

from conftest import write_notebook

HOSTILE = "/<img src=x onerror=alert(1)></script><script>alert(2)</script>"
CELLS = [
    "%load_ext daskprofile",
    "%%daskprofile -o run --view bokeh\n"
    "import time, dask\n"
    "def work(i):\n"
    "    time.sleep(0.02)\n"
    "    return i\n"
    f"parts = [dask.delayed(work)(i, dask_key_name=({HOSTILE!r}, i)) for i in range(40)]\n"
    "total = dask.delayed(sum)(parts, dask_key_name='total')\n"
    "total.compute()",
]
IDLE = "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents.every(d => d.is_idle)"
JS_CANVASES = """() => { let n = 0; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.tagName === 'CANVAS') n++; if (el.shadowRoot) walk(el.shadowRoot); } };
  walk(document); return n; }"""


def _run_all(page: Any) -> None:
    # the execution indicator is idle before the session's kernel is connected; the status
    # bar's kernel status is not
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=60_000)
    page.locator(".jp-Cell .cm-content").first.click()
    for _ in CELLS:
        page.keyboard.press("Shift+Enter")


def test_magic_shows_widget_and_view_in_lab(page: Any, lab: Any, screenshots: Any) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    name = write_notebook(lab.root, "magic.ipynb", CELLS)
    open_notebook(page, lab, name)
    _run_all(page)

    page.get_by_text("Completed 41 / 41 tasks").wait_for(timeout=60_000)
    page.locator(".jp-OutputArea-output .progress-bar-success").wait_for(timeout=5_000)
    groups = page.locator(".jp-OutputArea-output table.dp-pb").first
    assert HOSTILE in groups.inner_text()

    iframe = page.locator("iframe.daskprofile-view")
    iframe.wait_for(state="attached", timeout=60_000)
    frame = iframe.element_handle().content_frame()
    frame.wait_for_function(IDLE, timeout=60_000)
    assert frame.evaluate(JS_CANVASES) > 0
    assert HOSTILE in frame.evaluate("() => document.body.innerText")
    page.wait_for_function(  # the height listener ran in Lab (trusted output)
        "() => document.querySelector('iframe.daskprofile-view').style.height !== '900px'"
    )
    frame.locator("canvas").first.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "magic-inline-view.png"))
    assert dialogs == []
    assert page.locator("img[src=x]").count() == 0
