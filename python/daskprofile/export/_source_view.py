"""The snapshot's source view: click a flame-graph frame, see its function line by line.

As in the lab panel (``src/views/sourceView.ts``): one row per line of the function's text
(``run.sources``, when it was found), with the line number, a heat bar proportional to the
samples at that line, the samples and the estimated seconds; without the text, the lines
with samples only. A line's samples are the ``lines`` of every node of the function in the
group's tree (all its call paths); seconds scale samples as ``run.hot_lines`` does: a
group's recorded task time over its samples (the sampling interval for a group without
task rows).

The page stays one self-contained file: the data travels once, as a JSON string argument
of a bokeh ``CustomJS``; the JavaScript below is a constant and escapes every string it
puts in the Div's HTML (names, files and source text are data, never markup).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._common import RunLike, Tree

if TYPE_CHECKING:
    from bokeh.models import ColumnDataSource
    from bokeh.models.renderers import GlyphRenderer
    from bokeh.models.ui import UIElement
    from bokeh.models.widgets import Select

#: shown before any frame is clicked
HINT = "Click a frame to see its function\u2019s source, line by line (Escape closes it)."


def function_lines(tree: Tree) -> dict[str, dict[str, Any]]:
    """Per function identifier in ``tree``: ``samples`` (its outermost calls: recursion
    counted once) and ``lines`` (``[[line, samples], ...]`` summed over every node)."""
    samples: dict[str, int] = {}
    lines: dict[str, dict[int, int]] = {}
    todo: list[tuple[Tree, frozenset[str]]] = [(tree, frozenset())]
    while todo:
        node, above = todo.pop()
        ident = str(node.get("identifier", ""))
        if ident != "root":
            if ident not in above:
                samples[ident] = samples.get(ident, 0) + int(node.get("count", 0))
            acc = lines.setdefault(ident, {})
            for line, n in (node.get("lines") or {}).items():
                acc[int(line)] = acc.get(int(line), 0) + int(n)
            above = above | {ident}
        todo.extend((kid, above) for kid in (node.get("children") or {}).values())
    return {
        ident: {"samples": samples.get(ident, 0), "lines": sorted([k, v] for k, v in acc.items())}
        for ident, acc in lines.items()
    }


def seconds_per_sample(run: RunLike) -> dict[str, float | None]:
    """Per stack group: the seconds one sample stands for (None: not known)."""
    tasks = run.tasks
    spent: dict[str, float] = {}
    if len(tasks):
        durations = (tasks["stop"] - tasks["start"]).clip(lower=0)
        sums = durations.groupby(tasks["group"].astype(str)).sum()
        spent = {str(g): float(s) for g, s in sums.items()}
    interval = run.meta.options.get("interval")
    fallback = float(interval) if isinstance(interval, int | float) and interval > 0 else None
    out: dict[str, float | None] = {}
    for group, tree in run.stacks.items():
        n = int(tree.get("count", 0))
        known = spent.get(str(group), 0.0)
        out[str(group)] = known / n if n > 0 and known > 0 else fallback
    return out


def _sources(run: RunLike, idents: set[str]) -> dict[str, dict[str, Any]]:
    """``run.sources`` of the functions sampled (a run without it: none)."""
    found = getattr(run, "sources", None) or {}
    out = {}
    for ident, entry in found.items():
        if ident in idents and isinstance(entry, Mapping):
            out[str(ident)] = {
                "file": str(entry.get("file", "")),
                "name": str(entry.get("name", "")),
                "start": int(entry.get("start", 0)),
                "text": [str(t) for t in entry.get("text", [])],
            }
    return out


def source_payload(run: RunLike) -> dict[str, Any]:
    """What the page's source view reads: per group its scale and functions, the texts."""
    scale = seconds_per_sample(run)
    groups = {}
    idents: set[str] = set()
    for group, tree in run.stacks.items():
        functions = function_lines(tree)
        idents.update(functions)
        groups[str(group)] = {"scale": scale.get(str(group)), "functions": functions}
    return {"groups": groups, "sources": _sources(run, idents)}


_CSS = """
:host{display:block;width:100%}
.dp-src{border:1px solid #ccc;border-radius:3px;font:13px system-ui,-apple-system,sans-serif;
color:#222;background:#fff}
.dp-hint{color:#666;font-size:12px;padding:2px 0}
.dp-hdr{display:flex;flex-wrap:wrap;gap:2px 12px;align-items:baseline;padding:4px 6px;
background:#f3f3f3;border-bottom:1px solid #ddd}
.dp-name{font-weight:600;font-family:monospace}.dp-file,.dp-total{color:#666}
.dp-note{padding:3px 6px;color:#b35900}
.dp-rows{max-height:380px;overflow:auto}
table.dp-lines{border-collapse:collapse;font:12px monospace;min-width:100%}
.dp-lines td{padding:0 6px;line-height:1.5;white-space:nowrap}
.dp-lines td.dp-n{text-align:right;color:#666}
.dp-lines td.dp-code{white-space:pre;width:100%}
.dp-lines td.dp-missing{color:#999;font-style:italic}
.dp-lines tr.dp-hot{background:rgba(232,89,12,.16)}
.dp-heat{display:block;width:64px;height:10px;background:#e6e6e6;border-radius:1px}
.dp-bar{display:block;height:100%;background:#e8590c}
"""

# Builds the view of frame `i` of `src` (bokeh data) as HTML, every string escaped.
_SHOW_JS = """
const i = src.selected.indices.length ? src.selected.indices[0] : -1;
if (i < 0 || !src.data.identifier || src.data.identifier[i] === undefined) { return; }
const data = JSON.parse(payload);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => (
  {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
const secs = (s) => {
  if (s === null || !isFinite(s)) { return ''; }
  const a = Math.abs(s), p = (v) => Number(v.toPrecision(3));
  return a >= 1 ? p(s) + ' s' : a >= 1e-3 ? p(s * 1e3) + ' ms'
    : a > 0 ? p(s * 1e6) + ' \\u00b5s' : '0 s';
};
const count = (n) => n.toLocaleString('en-US');
const ident = String(src.data.identifier[i]), group = String(src.data.group[i]);
const g = data.groups[group] || {scale: null, functions: {}};
const fn = g.functions[ident] || {samples: 0, lines: []};
const known = Object.prototype.hasOwnProperty.call(data.sources, ident);
const source = known ? data.sources[ident] : null;
const parts = ident.split(';');
const name = source ? source.name : (src.data.name[i] || parts[0]);
const file = source ? source.file : (src.data.file[i] || parts.slice(1, -1).join(';'));
const k = g.scale;
const at = new Map(fn.lines.map(([l, n]) => [l, n]));
const rows = [];
const covered = new Set();
if (source) {
  source.text.forEach((text, j) => {
    covered.add(source.start + j); rows.push([source.start + j, text]);
  });
}
for (const [l, n] of fn.lines) { if (!covered.has(l)) { rows.push([l, null]); } }
rows.sort((a, b) => a[0] - b[0]);
const max = rows.reduce((m, r) => Math.max(m, at.get(r[0]) || 0), 0);
let html = '<div class="dp-src" data-identifier="' + esc(ident) + '" data-rows="' + rows.length +
  '" data-has-source="' + (source !== null) + '"><div class="dp-hdr"><span class="dp-name">' +
  esc(name) + '</span><span class="dp-file">' + esc(file) + '</span><span class="dp-total">' +
  count(fn.samples) + ' samples' + (k === null ? '' : ' \\u00b7 ~' + secs(fn.samples * k)) +
  ' \\u00b7 group ' + esc(group) + '</span></div>';
if (!source) {
  html += '<div class="dp-note">Source not available: the lines with samples only.</div>';
}
html += '<div class="dp-rows"><table class="dp-lines">';
for (const [line, text] of rows) {
  const n = at.get(line) || 0;
  const w = max > 0 ? (100 * n / max).toFixed(1) : '0';
  html += '<tr class="dp-row' + (n > 0 && n === max ? ' dp-hot' : '') + '" data-line="' + line +
    '" data-samples="' + n + '"><td class="dp-n">' + line + '</td><td><span class="dp-heat">' +
    '<span class="dp-bar" style="width:' + w + '%"></span></span></td><td class="dp-n">' +
    (n > 0 ? count(n) : '') + '</td><td class="dp-n">' + (n > 0 && k !== null ? secs(n * k) : '') +
    '</td>' + (text === null ? '<td class="dp-code dp-missing">(source not available)</td>'
    : '<td class="dp-code">' + esc(text) + '</td>') + '</tr>';
}
view.text = html + '</table></div></div>';
close.visible = true;
if (!close.tags.includes('dp-escape')) {  // once per view: Escape closes it
  close.tags = [...close.tags, 'dp-escape'];
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && close.visible) {
      src.selected.indices = []; view.text = hint; close.visible = false;
    }
  });
}
"""

_CLOSE_JS = "src.selected.indices = []; view.text = hint; close.visible = false;"


def source_view(
    run: RunLike, source: ColumnDataSource, renderers: list[GlyphRenderer], select: Select
) -> list[UIElement]:
    """The view under the flame figure (a close button and a Div), filled on a tap on a
    frame of ``source`` (tap selection); a group change or Escape closes it."""
    from bokeh.models import CustomJS, InlineStyleSheet
    from bokeh.models.widgets import Button, Div

    view = Div(
        text=f'<div class="dp-hint">{HINT}</div>',
        stylesheets=[InlineStyleSheet(css=_CSS)],
        sizing_mode="stretch_width",
    )
    close = Button(label="Close source view", visible=False, width=160)
    for renderer in renderers:  # a selected frame keeps its look: the view says which
        renderer.nonselection_glyph = None
    args = {"src": source, "view": view, "close": close, "hint": view.text}
    show = CustomJS(args=args | {"payload": json.dumps(source_payload(run))}, code=_SHOW_JS)
    source.selected.js_on_change("indices", show)
    reset = CustomJS(args=args, code=_CLOSE_JS)
    close.js_on_event("button_click", reset)
    select.js_on_change("value", reset)
    return [close, view]
