"""Self-contained HTML snapshot of one or more runs (BokehJS inlined, no network request).

Layout per run: a summary written as plain escaped HTML (duration, tasks, exceptions with
their tracebacks, per-group and per-span tables, where a cluster run ran and its workers,
calling code), then bokeh tabs: timeline (task stream with CPU and memory on the same,
linked time axis; a cluster's transfers, disk reads/writes and workers leaving on the task
stream), a cluster's memory and bandwidth, cache occupancy (one line per group), flame
graph per group (group selector) and memory samples. A run without cluster tables (local,
or an older file) has no cluster section or tab. ``run.filter(span=)`` gives the snapshot
of one span. Big runs go through level of detail (see ``_lod``), so the
file size stays bounded by screen pixels rather than by tasks.

Every string that comes from a run (keys, groups, workers, frames, code) reaches the page
either escaped by :func:`html.escape` or as bokeh data, which BokehJS renders as text.
"""

from __future__ import annotations

import datetime as _dt
import html
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ._common import PathLike, RunLike, as_runs, task_arrays, write_text
from ._findings import findings_html, what_if_figure
from ._plots import run_tabs
from ._summary import summary_html

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.2em 2em;
color:#222}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.2em;margin:1.2em 0 .4em}
h3{font-size:1em;margin:.9em 0 .3em}
.dp-facts{display:flex;flex-wrap:wrap;gap:.4em 2em;margin:.4em 0 .8em;padding:0}
.dp-facts li{list-style:none}.dp-facts b{font-weight:600}
table.dp-groups{border-collapse:collapse;font-size:.9em}
table.dp-groups th,table.dp-groups td{padding:.15em .7em;border-bottom:1px solid #ddd;
text-align:right}
table.dp-groups th:first-child,table.dp-groups td:first-child{text-align:left}
.dp-sw{display:inline-block;width:.8em;height:.8em;margin-right:.4em;border-radius:2px;
vertical-align:baseline}
pre.dp-code{background:#f6f8fa;padding:.6em;overflow:auto;max-height:24em;font-size:.85em}
.dp-note{color:#666;font-size:.9em}.dp-error{color:#b00020}
details{margin:.5em 0}summary{cursor:pointer}
details.dp-exception{margin:.3em 0}details.dp-exception p{margin:.2em 0 .2em 1em}
"""


def _page(title: str, body: str, bokeh_js: str, bokeh_css: str) -> str:
    """The HTML page around escaped body content and inlined BokehJS."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n"
        f"{bokeh_css}\n{bokeh_js}\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n{body}\n</body>\n</html>\n"
    )


def _run_heading(run: RunLike, index: int, total: int) -> str:
    """``Run <id> (started ...)`` when the page holds several runs."""
    if total == 1:
        return ""
    wall0 = run.meta.wall0
    when = ""
    if isinstance(wall0, int | float) and np.isfinite(wall0):
        when = f" · started {_dt.datetime.fromtimestamp(wall0):%Y-%m-%d %H:%M:%S}"
    ident = html.escape(str(run.meta.id or index + 1))
    return f"<h2>Run {index + 1} of {total}: {ident}{html.escape(when)}</h2>\n"


def render_html(
    run_or_runs: RunLike | Sequence[RunLike],
    title: str = "Dask profile",
    *,
    code: str | None = None,
    memory_samples: Any = None,
    notes: Sequence[str] = (),
    resources: Literal["inline", "cdn"] = "inline",
) -> str:
    """The snapshot page as a string (see :func:`to_html`)."""
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import CDN, INLINE

    runs = as_runs(run_or_runs)
    arrays = [task_arrays(run) for run in runs]
    roots = [
        run_tabs(r, a, memory_samples=memory_samples) for r, a in zip(runs, arrays, strict=True)
    ]
    charts = [what_if_figure(run) for run in runs]
    shown = [c for c in charts if c is not None]
    script, all_divs = components([*roots, *shown])
    divs, chart_divs = all_divs[: len(roots)], iter(all_divs[len(roots) :])
    bundle = bundle_for_objs_and_resources(
        [*roots, *shown], INLINE if resources == "inline" else CDN
    )
    sections = []
    for i, (run, div, arr) in enumerate(zip(runs, divs, arrays, strict=True)):
        run_code = code if code is not None else run.meta.code
        chart = next(chart_divs) if charts[i] is not None else ""
        sections.append(
            f'<section class="dp-run">\n{_run_heading(run, i, len(runs))}'
            f"{findings_html(run)}\n{chart}\n"
            f"{summary_html(run, code=run_code, arrays=arr)}\n{div}\n</section>"
        )
    note_html = "".join(f'<p class="dp-note">{html.escape(n)}</p>' for n in notes)
    body = note_html + "\n".join(sections) + "\n" + script
    bokeh_js, bokeh_css = bundle  # rendered <script>/<style> (or CDN <link>) tags
    return _page(title, body, bokeh_js, bokeh_css)


def to_html(
    run_or_runs: RunLike | Sequence[RunLike],
    path: PathLike,
    title: str = "Dask profile",
    *,
    code: str | None = None,
    memory_samples: Any = None,
    notes: Sequence[str] = (),
    resources: Literal["inline", "cdn"] = "inline",
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Write one self-contained HTML file for one run or several; return the path written.

    ``code`` is shown as the calling code (default: ``run.meta.code`` if recorded);
    ``memory_samples`` maps a label to ``(time, bytes)`` pairs, or is a ``MemorySampler``;
    ``notes`` are shown at the top; ``resources="cdn"`` loads BokehJS from Bokeh's CDN
    instead of inlining it (smaller, but blank offline).
    """
    page = render_html(
        run_or_runs,
        title,
        code=code,
        memory_samples=memory_samples,
        notes=notes,
        resources=resources,
    )
    return write_text(path, page, storage_options)
