"""The inline view of a run in a notebook output: light (the panel's views) or bokeh.

``kind="light"`` (the default): the panel's own views, bundled on their own
(``src/inline``, built into ``static/inline.js``: ~115 KB, no JupyterLab code), draw the
run from its protocol messages (those the panel gets when a finished run is replayed,
reduced to a byte budget by :mod:`.light`: a profiled cell's output stays under ~300 KB
whatever the run's size). The output is a ``<div>`` holding the messages as JSON in a
``<script type="application/json">`` (``<`` escaped, so no text of the run can end it),
then a ``<script>`` with the bundle, inlined in every output: an output renders alone,
whatever other outputs are cleared or reordered, in JupyterLab, in a notebook exported
to HTML, and offline. Every text of the run is set as text, never parsed as HTML.

``kind="bokeh"``: the HTML snapshot of :mod:`daskprofile.export.html` (BokehJS inlined,
~1.7 MB) in the ``srcdoc`` of a sandboxed ``<iframe>`` (``allow-scripts`` without
``allow-same-origin``: it cannot touch the notebook page; its own BokehJS cannot clash
with another on the page). Its height follows its content through ``postMessage`` to a
small listener next to the iframe (fixed height if that listener cannot run, e.g. in an
untrusted notebook). ``%%daskprofile --view bokeh`` shows it.
"""

from __future__ import annotations

import html
import itertools
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "bundle", "display_run", "inline_html", "light_payload", "summary_text"]

#: the views :func:`inline_html` makes
KINDS = ("light", "bokeh")
#: the standalone bundle of the panel's views (git-ignored build output)
BUNDLE = Path(__file__).with_name("static") / "inline.js"
#: how to build the bundle, from a checkout of daskprofile
BUILD_HINT = "jlpm build:inline (or jlpm build, which 'pip install -e .' runs)"
#: bytes of a light view's data at most (the bundle comes on top)
DATA_LIMIT = 170_000
#: height of the bokeh iframe before its content reports its own (px)
DEFAULT_HEIGHT = 900
#: most characters of the cell's code a light view carries
CODE_CHARS = 4_000
_ids = itertools.count(1)
_bundle: tuple[float, str] | None = None


# ---------------------------------------------------------------- the light view


def bundle() -> str:
    """The text of the inline bundle (read once per build); ``FileNotFoundError`` saying
    how to build it when absent."""
    global _bundle
    try:
        mtime = BUNDLE.stat().st_mtime
    except FileNotFoundError:
        raise FileNotFoundError(
            f"daskprofile: the inline view's script {BUNDLE} is missing; build it with "
            f"{BUILD_HINT} in the daskprofile checkout, or install a built wheel"
        ) from None
    if _bundle is None or _bundle[0] != mtime:
        text = BUNDLE.read_text(encoding="utf-8")
        if "</script" in text.lower():  # esbuild escapes it in strings; never in code
            raise ValueError(f"{BUNDLE} contains '</script' and cannot be inlined")
        _bundle = (mtime, text)
    return _bundle[1]


def light_payload(run: Any, *, title: str = "Dask profile", code: str | None = None) -> str:
    """The JSON the light view reads (src/inline/payload.ts), safe inside a ``<script>``."""
    from .light import light_messages

    light = light_messages(run, title, limit=DATA_LIMIT)
    messages = [[data, [_base64(b) for b in buffers]] for data, buffers in light.messages]
    payload: dict[str, Any] = {
        "format": 1,
        "title": title,
        "code": _cut_code(code),
        "notes": light.notes,
        "messages": messages,
    }
    if light.merged is not None:  # tasks per bar of the task stream (uint32, little-endian)
        payload["merged"] = _base64(light.merged.astype("<u4").tobytes())
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # "<" only occurs inside JSON strings: escaped, no "</script" or "<!--" can occur
    return text.replace("<", "\\u003c")


def _base64(buffer: bytes) -> str:
    import base64

    return base64.b64encode(bytes(buffer)).decode("ascii")


def _cut_code(code: str | None) -> str | None:
    if code is None or len(code) <= CODE_CHARS:
        return code
    return code[:CODE_CHARS] + "\n… (cut)"


def light_html(run: Any, *, title: str = "Dask profile", code: str | None = None) -> str:
    """The light view of ``run`` as one HTML fragment (data, fallback text, bundle)."""
    script = bundle()
    data = light_payload(run, title=title, code=code)
    fallback = (
        f"{html.escape(summary_text(run))}. The interactive view needs JavaScript: "
        "run the cell again, or trust the notebook."
    )
    return (
        '<div class="daskprofile-inline">'
        f'<script type="application/json" class="daskprofile-inline-data">{data}</script>'
        f'<div class="daskprofile-inline-fallback">{fallback}</div>'
        f"</div><script>{script}</script>"
    )


# ---------------------------------------------------------------- the bokeh view

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
    return json.dumps(text).replace("<", "\\u003c").replace(">", "\\u003e")


def _attribute(text: str) -> str:
    """``text`` for a single-quoted attribute: only ``&`` and ``'`` are special there.

    (``html.escape`` would also escape the ~30,000 double quotes of BokehJS: +12 % size.)
    """
    return text.replace("&", "&amp;").replace("'", "&#39;")


def bokeh_html(
    run: Any, *, title: str = "Dask profile", code: str | None = None, height: int = DEFAULT_HEIGHT
) -> str:
    """The bokeh snapshot of ``run`` in a sandboxed iframe, with its height listener."""
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


# ---------------------------------------------------------------- both


def _check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: the inline view is one of {', '.join(KINDS)}")
    return str(kind)


def inline_html(
    run: Any,
    *,
    title: str = "Dask profile",
    code: str | None = None,
    height: int = DEFAULT_HEIGHT,
    kind: str = "light",
) -> str:
    """The view of ``run`` as one HTML fragment: ``kind`` ``"light"`` (the panel's views,
    ~300 KB at most) or ``"bokeh"`` (the snapshot in an iframe of ``height`` px at first)."""
    if _check_kind(kind) == "bokeh":
        return bokeh_html(run, title=title, code=code, height=height)
    return light_html(run, title=title, code=code)


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


def display_run(
    run: Any, *, title: str = "Dask profile", code: str | None = None, kind: str = "light"
) -> None:
    """Display the inline view of ``run`` (``text/html`` with a ``text/plain`` fallback);
    ``kind="bokeh"`` for the bokeh snapshot (see :func:`inline_html`)."""
    from IPython.display import display

    bundle_ = {
        "text/html": inline_html(run, title=title, code=code, kind=kind),
        "text/plain": summary_text(run),
    }
    display(bundle_, raw=True)  # type: ignore[no-untyped-call]
