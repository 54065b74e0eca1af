"""A span selector over the snapshot's task stream (only for runs with spans).

Every task rectangle (and every merged interval, merged per span too) carries its span's
code (``s``) and an alpha (``a``); a bokeh ``Select`` lists "All spans" and each span path
with its parents, and a ``CustomJS`` dims the rectangles of other spans (a span includes
its sub-spans). Self-contained: no server. Span names reach the page as bokeh data and
option labels, which BokehJS renders as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._common import TaskArrays
from ._lod import Busy, merge_bounded

if TYPE_CHECKING:
    from bokeh.models.widgets import Select
    from bokeh.plotting import figure as Figure

ALL = "All spans"
#: alpha of the rectangles of other spans
DIMMED = 0.08

_FILTER_JS = """
const picked = select.value === all ? null : select.value;
const inside = (i) => {
    if (picked === null) return true;
    const p = i >= 0 ? paths[i] : null;
    return p !== null && (p === picked || p.startsWith(picked + '/'));
};
for (const src of sources) {
    const s = src.data.s, base = src.data.a0, a = src.data.a.slice();
    for (let i = 0; i < s.length; i++) a[i] = inside(s[i]) ? base[i] : dimmed;
    src.data = Object.assign({}, src.data, {a: a});
}
"""


def options(spans: list[str]) -> list[str]:
    """``All spans``, then every span path and its parents, sorted."""
    paths = {"/".join(s.split("/")[:i]) for s in spans for i in range(1, s.count("/") + 2)}
    return [ALL, *sorted(paths)]


def add_columns(data: dict[str, Any], codes: np.ndarray | None, alpha: Any = 1.0) -> None:
    """Give a source's columns the span codes ``s`` and alphas ``a`` (and their base)."""
    if codes is None:
        return
    n = len(codes)
    base = np.broadcast_to(np.asarray(alpha, np.float32), (n,)).copy()
    data.update({"s": codes.astype(np.int32), "a": base, "a0": base.copy()})


def merge_per_span(
    arrays: TaskArrays, rows: np.ndarray, gap: float
) -> tuple[Busy, np.ndarray | None, float]:
    """Merged intervals of ``rows`` (see ``merge_bounded``), per span when the run has
    spans: the intervals, each one's span code (None without spans) and the gap used."""
    if arrays.span is None:
        busy, gap = merge_bounded(arrays, rows, gap)
        return busy, None, gap
    parts, codes, used = [], [], gap
    for code in np.unique(arrays.span[rows]).tolist():
        busy, used_here = merge_bounded(arrays, rows[arrays.span[rows] == code], gap)
        parts.append(busy)
        codes.append(np.full(len(busy), code, np.int32))
        used = max(used, used_here)
    merged = Busy(*(np.concatenate([getattr(b, f) for b in parts]) for f in _BUSY_FIELDS))
    return merged, np.concatenate(codes), used


_BUSY_FIELDS = ("lane", "group", "start", "stop", "count", "busy")


def span_selector(fig: Figure, arrays: TaskArrays) -> Select | None:
    """A ``Select`` that dims the stream's rectangles of other spans (None: no spans)."""
    from bokeh.models import ColumnDataSource, CustomJS
    from bokeh.models.widgets import Select

    if arrays.span is None or not arrays.spans:
        return None
    sources = []
    for renderer in fig.renderers:
        source = getattr(renderer, "data_source", None)
        if isinstance(source, ColumnDataSource) and "s" in source.data and source not in sources:
            sources.append(source)
    choices: list[Any] = options(arrays.spans)
    select = Select(title="Span", value=ALL, options=choices, name="dp-span")
    select.tags = [list(arrays.spans)]  # the paths the ``s`` codes index
    args = {"sources": sources, "paths": arrays.spans, "all": ALL, "dimmed": DIMMED}
    select.js_on_change("value", CustomJS(args={**args, "select": select}, code=_FILTER_JS))
    return select
