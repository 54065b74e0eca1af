"""Differential flame graph of two runs, in a self-contained HTML page (``daskprofile diff``).

The stack trees of run a (before) and run b (after) are merged node by node (same frame on
the same path). Each node carries its *estimated seconds* in both runs (samples times the
seconds one sample of its group stands for, so runs sampled at different rates compare);
its width is its time in b (a switch shows the widths of a, where what went away is
visible), its colour the change: red slower, blue faster, grey unchanged. Hovering shows
a, b and the change. One view holds every group (a group is the outermost frame), and one
view per group.

Strings from the runs (groups, functions, source lines) reach the page only as bokeh data,
which BokehJS renders as text; the tables above the graph come escaped
(``_diff_tables``). BokehJS is inlined: the page makes no network request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ._common import PathLike, Tree, write_text
from ._diff_tables import percent, signed_seconds
from ._flame import FULL_WIDTH_CHARS, MAX_NODES, MIN_SHARE

if TYPE_CHECKING:
    from bokeh.models.ui import UIElement

#: (trees by group, seconds per sample by group) of one run
Scaled = tuple[Mapping[str, Tree], Mapping[str, float]]
#: groups with a view of their own (the heaviest); all of them are in the "all" view
MAX_VIEWS = 40
#: a change smaller than this share of the view's time is drawn grey
NEUTRAL = 0.005
_GREY, _WHITE = (221, 221, 221), (247, 247, 247)
_RED, _BLUE = (214, 39, 40), (33, 102, 172)

COLUMNS = (
    *("view", "depth", "top", "bottom", "name", "file", "line", "code"),
    *("a", "b", "a_text", "b_text", "change_text", "color"),
    *("left_a", "right_a", "left_b", "right_b", "label_a", "label_b", "left", "right", "label"),
)

Node = dict[str, Any]  # {"desc": {...}, "a": s, "b": s, "kids": {identifier: Node}}


# ------------------------------------------------------------------ merged trees
def _node(desc: Mapping[str, Any]) -> Node:
    return {"desc": dict(desc), "a": 0.0, "b": 0.0, "kids": {}}


def _add(dest: Node, tree: Tree, side: str, per_sample: float) -> None:
    """Add ``tree``'s estimated seconds into ``dest`` as side ``a`` or ``b``."""
    todo = [(dest, tree)]
    while todo:
        node, src = todo.pop()
        node[side] += int(src.get("count", 0)) * per_sample
        for ident, child in (src.get("children") or {}).items():
            kid = node["kids"].get(ident)
            if kid is None:
                kid = node["kids"][ident] = _node(child.get("description") or {"name": ident})
            todo.append((kid, child))


def merged_groups(a: Scaled, b: Scaled) -> dict[str, Node]:
    """Per group, the merged tree of both runs (root: the group's total seconds)."""
    out: dict[str, Node] = {}
    for side, (trees, scale) in (("a", a), ("b", b)):
        for group, tree in trees.items():
            if group in scale:
                root = out.setdefault(str(group), _node({"name": str(group)}))
                _add(root, tree, side, float(scale[group]))
    return out


def _weight(node: Node) -> float:
    return max(float(node["a"]), float(node["b"]))


def _ordered(kids: Mapping[str, Node]) -> list[Node]:
    """Children heaviest first (in either run), ties by identifier: the same order for
    both widths."""
    return [kids[k] for k in sorted(kids, key=lambda k: (-_weight(kids[k]), k))]


# ------------------------------------------------------------------ colours and cells
def diff_color(a: float, b: float, total: float) -> str:
    """Red when b is slower, blue when faster, stronger with the relative change; grey
    when the change is under ``NEUTRAL`` of the view's time."""
    delta, big = b - a, max(a, b)
    if big <= 0 or abs(delta) < NEUTRAL * total:
        return "#{:02x}{:02x}{:02x}".format(*_GREY)
    t = 0.3 + 0.7 * min(1.0, abs(delta) / big)
    end = _RED if delta > 0 else _BLUE
    return "#" + "".join(f"{round(w + (e - w) * t):02x}" for w, e in zip(_WHITE, end, strict=True))


def _change_text(a: float, b: float) -> str:
    if a <= 0 and b > 0:
        return f"{signed_seconds(b - a)} (new)"
    if b <= 0 < a:
        return f"{signed_seconds(b - a)} (gone)"
    return f"{signed_seconds(b - a)} ({percent((b - a) / a * 100 if a else 0.0)})"


def _label(name: str, share: float) -> str:
    fits = int(share * FULL_WIDTH_CHARS)
    if fits < 4:
        return ""
    return name if len(name) <= fits else name[: fits - 1] + "\u2026"


def _seconds_text(value: float) -> str:
    from ._common import format_seconds

    return format_seconds(value)


# ------------------------------------------------------------------ layout
def _threshold(tops: list[Node], total: float) -> float:
    """Smallest weight drawn: the MAX_NODES-th heaviest node, at least MIN_SHARE of total."""
    weights: list[float] = []
    todo = list(tops)
    while todo:
        node = todo.pop()
        weights.append(_weight(node))
        todo.extend(node["kids"].values())
    weights.sort(reverse=True)
    kth = weights[MAX_NODES - 1] if len(weights) >= MAX_NODES else 0.0
    return max(kth, total * MIN_SHARE, 1e-12)


def _append(data: dict[str, list[Any]], view: str, node: Node, depth: int, **cols: Any) -> None:
    desc = node["desc"]
    a, b = node["a"], node["b"]
    name = str(desc.get("name") or "?")
    row = {
        "view": view,
        "depth": depth,
        "top": depth - 0.45,
        "bottom": depth + 0.45,
        "name": name,
        "file": str(desc.get("filename") or ""),
        "line": str(desc.get("line_number", "")),
        "code": str(desc.get("line") or "").strip(),
        "a": a,
        "b": b,
        "a_text": _seconds_text(a),
        "b_text": _seconds_text(b),
        "change_text": _change_text(a, b),
        "label_a": _label(name, cols["right_a"] - cols["left_a"]),
        "label_b": _label(name, cols["right_b"] - cols["left_b"]),
        **cols,
    }
    row |= {"left": row["left_b"], "right": row["right_b"], "label": row["label_b"]}
    for column in COLUMNS:
        data[column].append(row[column])


def _add_view(data: dict[str, list[Any]], view: str, tops: list[Node]) -> None:
    """Rectangles of one view: ``tops`` at depth 0, x in [0, 1] of each run's total."""
    total_a = sum(n["a"] for n in tops)
    total_b = sum(n["b"] for n in tops)
    big = max(total_a, total_b)
    if big <= 0:
        return
    keep = _threshold(tops, big)
    scale_a = 1 / total_a if total_a > 0 else 0.0
    scale_b = 1 / total_b if total_b > 0 else 0.0
    todo: list[tuple[Node, float, float, int]] = []
    xa = xb = 0.0
    for node in _ordered({str(i): n for i, n in enumerate(tops)}):
        todo.append((node, xa, xb, 0))
        xa, xb = xa + node["a"] * scale_a, xb + node["b"] * scale_b
    while todo:
        node, la, lb, depth = todo.pop()
        if _weight(node) < keep:
            continue
        ra, rb = la + node["a"] * scale_a, lb + node["b"] * scale_b
        color = diff_color(node["a"], node["b"], big)
        cols = {"left_a": la, "right_a": ra, "left_b": lb, "right_b": rb, "color": color}
        _append(data, view, node, depth, **cols)
        for kid in _ordered(node["kids"]):
            todo.append((kid, la, lb, depth + 1))
            la, lb = la + kid["a"] * scale_a, lb + kid["b"] * scale_b


def diff_columns(a: Scaled, b: Scaled) -> tuple[dict[str, list[Any]], list[tuple[str, str]]]:
    """Rectangles of every view, and the views as (id, label): ``all`` first (a group is
    the outermost frame), then the groups that changed most."""
    groups = merged_groups(a, b)
    data: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    tops = []
    for group, root in groups.items():
        top = dict(root)
        top["desc"] = {"name": group, "filename": "(task group)", "line_number": ""}
        tops.append(top)
    _add_view(data, "all", tops)
    views = [("all", "All groups")]
    ranked = sorted(groups, key=lambda g: (-abs(groups[g]["b"] - groups[g]["a"]), g))
    for i, group in enumerate(ranked[:MAX_VIEWS]):
        root = groups[group]
        _add_view(data, f"g{i}", _ordered(root["kids"]))
        change = _change_text(root["a"], root["b"])
        views.append((f"g{i}", f"{group} ({change})"))
    return data, views


# ------------------------------------------------------------------ bokeh
_WIDTH_JS = """
const m = cb_obj.active === 0 ? "b" : "a";
const d = Object.assign({}, src.data);
d.left = d["left_" + m]; d.right = d["right_" + m]; d.label = d["label_" + m];
src.data = d;
"""
_VIEW_JS = "f.group = cb_obj.value; src.change.emit();"
LEGEND = (
    "Width: estimated seconds in b (after), or in a (before) with the switch. "
    "Colour: red = slower in b, blue = faster, grey = about the same."
)


def diff_flame(a: Scaled, b: Scaled) -> UIElement:
    """The differential flame graph with its view selector and width switch."""
    from bokeh.layouts import column, row
    from bokeh.models import CDSView, ColumnDataSource, CustomJS, GroupFilter, Range1d
    from bokeh.models.widgets import Div, RadioButtonGroup, Select

    data, views = diff_columns(a, b)
    if not data["view"]:
        return Div(text="<p>No stack samples in either run (profile with stacks=True).</p>")
    source = ColumnDataSource(cast(Any, data))
    view = CDSView(filter=GroupFilter(column_name="view", group="all"))
    depth = int(max(data["depth"])) + 1
    fig = _figure(source, view, depth, Range1d)
    options: list[Any] = list(views)
    select = Select(title="View", value="all", options=options, width=520)
    select.js_on_change("value", CustomJS(args={"f": view.filter, "src": source}, code=_VIEW_JS))
    width = RadioButtonGroup(labels=["width: b (after)", "width: a (before)"], active=0)
    width.js_on_change("active", CustomJS(args={"src": source}, code=_WIDTH_JS))
    legend = Div(text=f'<p class="dp-note">{LEGEND}</p>')
    return column(row(select, width), legend, fig, sizing_mode="stretch_width")


def _figure(source: Any, view: Any, depth: int, range_type: Any) -> Any:
    from bokeh.models import HoverTool
    from bokeh.plotting import figure

    fig = figure(
        height=min(60 + 22 * depth, 900),
        x_range=range_type(start=0, end=1, bounds=(0, 1)),
        y_range=range_type(start=depth - 0.5, end=-0.5),
        tools="xpan,xwheel_zoom,xbox_zoom,reset,save",
        active_scroll="xwheel_zoom",
        sizing_mode="stretch_width",
        title="Differential flame graph (a \u2192 b)",
    )
    fig.toolbar.logo = None
    fig.yaxis.visible = fig.xaxis.visible = False
    fig.grid.grid_line_color = None
    rects = fig.quad(
        *("left", "right", "bottom", "top"),
        source=source,
        view=view,
        fill_color="color",
        line_color="white",
        line_width=0.5,
    )
    fig.text(
        *("left", "depth", "label"),
        source=source,
        view=view,
        x_offset=3,
        text_font_size="8pt",
        text_baseline="middle",
    )
    tooltips = [("function", "@name"), ("where", "@file:@line"), ("line", "@code")]
    tooltips += [("a (before)", "@a_text"), ("b (after)", "@b_text"), ("change", "@change_text")]
    fig.add_tools(HoverTool(renderers=[rects], tooltips=tooltips))
    return fig


# ------------------------------------------------------------------ the page
def render_html(title: str, tables_html: str, a: Scaled, b: Scaled) -> str:
    """The diff page: escaped tables (made by the caller), then the flame graph."""
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    from .html import _page

    root = diff_flame(a, b)
    script, div = components(root)
    bokeh_js, bokeh_css = bundle_for_objs_and_resources([root], INLINE)
    body = f"{tables_html}\n<h2>Differential flame graph</h2>\n{div}\n{script}"
    return _page(title, body, bokeh_js, bokeh_css)


def to_html(path: PathLike, title: str, tables_html: str, a: Scaled, b: Scaled) -> str:
    """Write the diff page to ``path``; returns the path."""
    return write_text(path, render_html(title, tables_html, a, b))
