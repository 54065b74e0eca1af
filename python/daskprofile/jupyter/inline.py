"""The rich inline view of a run in a notebook: the HTML snapshot in a sandboxed iframe.

The snapshot of :mod:`daskprofile.export.html` (summary, task stream, CPU/memory, cache,
flame graph; a cluster's workers, memory and bandwidth; BokehJS inlined) goes into the
``srcdoc`` of an ``<iframe>``, so the output:

* needs no server, no file and no CDN: it renders in JupyterLab, in a notebook exported
  to HTML and offline;
* runs its own BokehJS in its own window: no clash with another BokehJS version on the
  page (JupyterLab's, another cell's, ``bokeh.io.output_notebook``), however many views a
  notebook holds;
* is sandboxed (``allow-scripts`` without ``allow-same-origin``): the snapshot cannot
  touch the notebook page. Its height follows its content through ``postMessage`` to a
  small listener next to the iframe (fixed height if that listener cannot run, e.g. in
  an untrusted notebook).

The price is size: each view carries BokehJS (~1.6 MB of the output; see
``inline_size``).
"""

from __future__ import annotations

import html
import itertools
import os
from typing import Any

__all__ = ["display_run", "inline_html", "summary_text"]

#: height of the iframe before its content reports its own (px)
DEFAULT_HEIGHT = 900
_ids = itertools.count(1)

_RESIZER = """<script>(function(){
var id=%s;function send(){try{parent.postMessage({daskprofile_view:id,
height:document.documentElement.scrollHeight},"*")}catch(e){}}
window.addEventListener("load",send);
if(window.ResizeObserver){new ResizeObserver(send).observe(document.documentElement)}
})();</script>"""

_LISTENER = """<script>(function(){
var f=document.getElementById(%s);if(!f){return}
window.addEventListener("message",function(e){
if(e.source!==f.contentWindow||!e.data||e.data.daskprofile_view!==f.id){return}
var h=Math.min(Math.max(+e.data.height||0,200),6000);f.style.height=(h+8)+"px"});
})();</script>"""


def _view_id() -> str:
    return f"daskprofile-view-{os.getpid()}-{next(_ids)}"


def _with_resizer(page: str, view_id: str) -> str:
    """The snapshot page with the script that reports its height to the notebook."""
    script = _RESIZER % _js_string(view_id)
    head, sep, tail = page.rpartition("</body>")
    return f"{head}{script}{sep}{tail}" if sep else page + script


def _js_string(text: str) -> str:
    """A JavaScript string literal safe inside an HTML ``<script>``."""
    import json

    return json.dumps(text).replace("<", "\\u003c").replace(">", "\\u003e")


def _attribute(text: str) -> str:
    """``text`` for a single-quoted attribute: only ``&`` and ``'`` are special there.

    (``html.escape`` would also escape the ~30,000 double quotes of BokehJS: +12 % size.)
    """
    return text.replace("&", "&amp;").replace("'", "&#39;")


def inline_html(
    run: Any, *, title: str = "Dask profile", code: str | None = None, height: int = DEFAULT_HEIGHT
) -> str:
    """The view of ``run`` as one HTML fragment (iframe + height listener)."""
    from ..export.html import render_html

    view_id = _view_id()
    page = _with_resizer(render_html(run, title, code=code), view_id)
    return (
        f'<iframe id="{view_id}" class="daskprofile-view" title="{html.escape(title)}" '
        f'sandbox="allow-scripts allow-downloads" '
        f'style="width:100%;height:{int(height)}px;border:0;background:#fff" '
        f"srcdoc='{_attribute(page)}'></iframe>"
        f"{_LISTENER % _js_string(view_id)}"
    )


def summary_text(run: Any) -> str:
    """A one-line plain-text summary (the ``text/plain`` form of the view)."""
    s = run.summary()
    wall = s.get("wall_time")
    wall_text = f"{wall:.3f} s" if isinstance(wall, int | float) else "?"
    peak = s.get("peak_memory")
    peak_text = f", peak memory {peak / 1e6:,.0f} MB" if peak else ""
    return (
        f"daskprofile run {s.get('id')}: {s.get('tasks', 0):,} tasks in "
        f"{s.get('computes', 0)} computes, {wall_text}, {s.get('errors', 0)} erred{peak_text}"
    )


def display_run(run: Any, *, title: str = "Dask profile", code: str | None = None) -> None:
    """Display the inline view of ``run`` (``text/html`` with a ``text/plain`` fallback)."""
    from IPython.display import display

    bundle = {
        "text/html": inline_html(run, title=title, code=code),
        "text/plain": summary_text(run),
    }
    display(bundle, raw=True)  # type: ignore[no-untyped-call]
