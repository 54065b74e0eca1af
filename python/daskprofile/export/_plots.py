"""Bokeh models of the HTML snapshot: task stream, CPU/memory, cache, flame graph, memory.

Strings from the run travel only as bokeh data (column values, tick labels, legend labels,
``CustomJSHover`` arguments); the JavaScript snippets here are constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ._common import RunLike, TaskArrays, group_color, task_arrays
from ._flame import flame_columns
from ._lod import Busy, decimate, merge_bounded, split_tasks

if TYPE_CHECKING:
    from bokeh.models import Range1d
    from bokeh.models.ui import UIElement
    from bokeh.plotting import figure as Figure

#: legend entries of the task stream (heaviest groups); the rest only have colours
LEGEND_GROUPS = 20
#: lines of the cache chart (groups with the highest peak), plus a total line
CACHE_GROUPS = 12

_FMT_SECONDS = """
function fmt(s) {
  if (s === null || s === undefined || !isFinite(s)) return "-";
  const a = Math.abs(s);
  if (a >= 1) return s.toPrecision(3) + " s";
  if (a >= 1e-3) return (s * 1e3).toPrecision(3) + " ms";
  return (s * 1e6).toPrecision(3) + " \u00b5s";
}
"""
_TOOLS = "xpan,xwheel_zoom,xbox_zoom,reset,save"


def _seconds_hover(code: str = "return fmt(value);", **args: Any) -> Any:
    """A hover formatter showing seconds as s/ms/us; ``code`` may use ``fmt``."""
    from bokeh.models import CustomJSHover

    return CustomJSHover(args=args, code=_FMT_SECONDS + code)


def _lookup_hover(names: list[str]) -> Any:
    """A hover formatter mapping an integer column to a name."""
    from bokeh.models import CustomJSHover

    return CustomJSHover(
        args={"names": names}, code="const n = names[Math.round(value)]; return n ?? '';"
    )


def _time_figure(x_range: Range1d, height: int, title: str, **kwargs: Any) -> Figure:
    """A figure on the run's shared time axis."""
    from bokeh.plotting import figure

    fig = figure(
        x_range=x_range,
        height=height,
        title=title,
        tools=_TOOLS,
        active_scroll="xwheel_zoom",
        sizing_mode="stretch_width",
        **kwargs,
    )
    fig.toolbar.logo = None
    fig.xaxis.axis_label = "seconds since start"
    return fig


# -- task stream -------------------------------------------------------------------------


def _task_source(arrays: TaskArrays, rows: np.ndarray) -> Any:
    """One row per individually drawn task: lane, start, duration, group, wait, error, key."""
    from bokeh.models import ColumnDataSource

    errors = ["", *sorted({str(e) for e in arrays.error_type[arrays.error] if e is not None})]
    err_index = {e: i for i, e in enumerate(errors)}
    err = np.zeros(len(rows), np.int16)
    for j, i in enumerate(rows.tolist()):
        if arrays.error[i]:
            err[j] = err_index.get(str(arrays.error_type[i]), 0) or len(errors)
    if (err == len(errors)).any():
        errors.append("error")
    source = ColumnDataSource(
        {
            "y": arrays.lane[rows].astype(np.int16),
            "left": arrays.start[rows],
            "dur": (arrays.stop[rows] - arrays.start[rows]).astype(np.float32),
            "g": arrays.group[rows].astype(np.int16 if len(arrays.groups) < 32_000 else np.int32),
            "wait": (arrays.start[rows] - arrays.submit[rows]).astype(np.float32),
            "err": err,
            "key": arrays.keys(rows),
        }
    )
    source.tags = [errors]
    return source


def _group_mapper(arrays: TaskArrays) -> Any:
    """Colour of each group index (a linear mapper over integer codes)."""
    from bokeh.models import LinearColorMapper

    palette = [group_color(g) for g in arrays.groups] or ["#888888"]
    return LinearColorMapper(palette=palette, low=0, high=len(palette))


def _draw_tasks(fig: Figure, arrays: TaskArrays, rows: np.ndarray, mapper: Any) -> None:
    """Individual task rectangles, failed ones outlined in red, with a per-task hover."""
    from bokeh.models import CDSView, HoverTool, IndexFilter
    from bokeh.transform import stack

    source = _task_source(arrays, rows)
    errors = source.tags[0]
    bar = {"y": "y", "left": "left", "right": stack("left", "dur"), "height": 0.8, "source": source}
    tasks = fig.hbar(**bar, fill_color={"field": "g", "transform": mapper}, line_color=None)
    failed = np.flatnonzero(arrays.error[rows])
    if len(failed):
        view = CDSView(filter=IndexFilter(indices=failed.tolist()))
        fig.hbar(**bar, view=view, fill_alpha=0, line_color="#d00000", line_width=2)
    fig.add_tools(
        HoverTool(
            renderers=[tasks],
            tooltips=[
                ("key", "@key"),
                ("group", "@g{custom}"),
                ("worker", "@y{custom}"),
                ("duration", "@dur{custom}"),
                ("wait", "@wait{custom}"),
                ("status", "@err{custom}"),
            ],
            formatters={
                "@g": _lookup_hover(arrays.groups),
                "@y": _lookup_hover(arrays.lanes),
                "@dur": _seconds_hover(),
                "@wait": _seconds_hover(),
                "@err": _status_hover(errors),
            },
        )
    )


def _status_hover(errors: list[str]) -> Any:
    """``ok`` or ``error: <type>``."""
    from bokeh.models import CustomJSHover

    code = "const i = Math.round(value); return i ? 'error: ' + (names[i] ?? '') : 'ok';"
    return CustomJSHover(args={"names": errors}, code=code)


def _busy_source(busy: Busy) -> Any:
    """One row per merged interval."""
    from bokeh.models import ColumnDataSource

    width = np.maximum(busy.stop - busy.start, 1e-12)
    occupancy = np.clip(busy.busy / width, 0, 1)
    return ColumnDataSource(
        {
            "y": busy.lane.astype(np.int16),
            "left": busy.start,
            "right": busy.stop,
            "g": busy.group.astype(np.int32),
            "count": busy.count.astype(np.int32),
            "busy": busy.busy.astype(np.float32),
            "alpha": (0.35 + 0.65 * occupancy).astype(np.float32),
        }
    )


def _draw_busy(fig: Figure, arrays: TaskArrays, busy: Busy, mapper: Any) -> None:
    """Merged intervals of short tasks (level of detail), shaded by occupancy."""
    from bokeh.models import HoverTool

    source = _busy_source(busy)
    merged = fig.hbar(
        y="y",
        left="left",
        right="right",
        height=0.8,
        source=source,
        fill_color={"field": "g", "transform": mapper},
        fill_alpha="alpha",
        line_color=None,
    )
    fig.add_tools(
        HoverTool(
            renderers=[merged],
            tooltips=[
                ("group", "@g{custom}"),
                ("tasks", "@count (merged)"),
                ("busy", "@busy{custom}"),
                ("span", "@left{custom}"),
                ("worker", "@y{custom}"),
            ],
            formatters={
                "@g": _lookup_hover(arrays.groups),
                "@y": _lookup_hover(arrays.lanes),
                "@busy": _seconds_hover(),
                "@left": _seconds_hover(
                    "const i = special_vars.index; "
                    "return fmt(src.data.right[i] - src.data.left[i]);",
                    src=source,
                ),
            },
        )
    )


def _legend(fig: Figure, arrays: TaskArrays) -> None:
    """A legend of the heaviest groups (empty renderers carry the colours)."""
    from bokeh.models.annotations import Legend, LegendItem

    total = np.bincount(
        arrays.group, np.maximum(arrays.stop - arrays.start, 0), minlength=len(arrays.groups)
    )
    order = np.argsort(-total, kind="stable")[:LEGEND_GROUPS]
    items = []
    for i in order.tolist():
        name = arrays.groups[i]
        swatch = fig.hbar(  # one invisible row: BokehJS draws no legend glyph for no data
            y=[np.nan],
            left=[np.nan],
            right=[np.nan],
            height=0.8,
            fill_color=group_color(name),
            line_color=None,
        )
        items.append(LegendItem(label=name, renderers=[cast(Any, swatch)]))
    if len(arrays.groups) > LEGEND_GROUPS:
        extra = len(arrays.groups) - LEGEND_GROUPS
        items.append(LegendItem(label=f"+{extra} more groups", renderers=[]))
    legend = Legend(
        items=items,
        orientation="horizontal",
        ncols=min(len(items), 5),
        label_text_font_size="9pt",
        border_line_color=None,
    )
    fig.add_layout(legend, "below")  # below, not beside: time axes stay aligned


def task_stream(arrays: TaskArrays, x_range: Range1d) -> Figure:
    """A lane per worker, a rectangle per task coloured by group (merged when many)."""
    from bokeh.models import FixedTicker

    lanes = max(len(arrays.lanes), 1)
    fig = _time_figure(
        x_range,
        height=min(80 + 26 * lanes, 700) + 30 + 22 * min(len(arrays.groups), LEGEND_GROUPS) // 5,
        title="Task stream",
        y_range=(lanes - 0.5, -0.5),
    )
    fig.yaxis.ticker = FixedTicker(ticks=list(range(len(arrays.lanes))))
    fig.yaxis.major_label_overrides = dict(enumerate(arrays.lanes))
    fig.ygrid.grid_line_color = None
    if not len(arrays):
        return fig
    mapper = _group_mapper(arrays)
    single, short, pixel = split_tasks(arrays)
    if len(short):
        busy, pixel = merge_bounded(arrays, short, pixel)
        _draw_busy(fig, arrays, busy, mapper)
        fig.title = (
            f"Task stream: {len(arrays):,} tasks; {len(single):,} long ones drawn one by one, "
            f"{len(short):,} short ones merged per worker and group at {pixel * 1e3:.3g} ms"
        )
    _draw_tasks(fig, arrays, single, mapper)
    _legend(fig, arrays)
    return fig


# -- resources, cache, memory samples ----------------------------------------------------


def _line_figure(
    x_range: Range1d, title: str, y_label: str, lines: Iterable[tuple[str, Any, Any, str]]
) -> Figure:
    """A small time-series figure: one line per (label, x, y, colour), hover on x."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.models.annotations import Legend, LegendItem

    fig = _time_figure(x_range, height=190, title=title)
    fig.yaxis.axis_label = y_label
    items: list[LegendItem] = []
    renderers: list[Any] = []
    for label, x, y, color in lines:
        source = ColumnDataSource({"x": np.asarray(x, float), "y": np.asarray(y, float)})
        r = fig.step(x="x", y="y", source=source, mode="after", color=color, line_width=1.5)
        items.append(LegendItem(label=label, renderers=[cast(Any, r)]))
        renderers.append(r)
    if len(items) > 1:
        legend = Legend(items=items, click_policy="hide", label_text_font_size="9pt")
        fig.add_layout(legend, "right")
    fig.add_tools(
        HoverTool(
            renderers=renderers,
            tooltips=[(y_label, "@y{0,0.[00]}"), ("time", "@x{0.000} s")],
            mode="vline",
        )
    )
    return fig


def resource_figures(run: RunLike, x_range: Range1d) -> list[Figure]:
    """CPU and memory of the process tree, on the task stream's time axis."""
    res = run.resources
    if not len(res):
        return []
    t = res["time"].to_numpy(float)
    cpu = decimate(t, res["cpu"].to_numpy(float))
    mem = decimate(t, res["memory"].to_numpy(float) / 1e6)
    return [
        _line_figure(
            x_range, "CPU (% of one core, all processes)", "CPU %", [("cpu", *cpu, "#1f77b4")]
        ),
        _line_figure(x_range, "Memory (RSS, all processes)", "MB", [("memory", *mem, "#2ca02c")]),
    ]


def cache_lines(run: RunLike) -> list[tuple[str, np.ndarray, np.ndarray, str]]:
    """Occupancy per group (the heaviest by peak) and in total, decimated."""
    cache = run.cache
    if not len(cache):
        return []
    by_time = np.argsort(cache["time"].to_numpy(float), kind="stable")
    t = cache["time"].to_numpy(float)[by_time]
    metric = cache["metric"].to_numpy(float)[by_time]
    codes, names = pd.factorize(cache["group"].iloc[by_time], use_na_sentinel=False)
    # the previous occupancy of the same group, to sum changes into a total
    by_group = np.argsort(codes, kind="stable")
    prev = np.zeros(len(metric))
    same = codes[by_group[1:]] == codes[by_group[:-1]]
    prev[by_group[1:][same]] = metric[by_group[:-1][same]]
    total = np.cumsum(metric - prev)
    peak = np.full(len(names), -np.inf)
    np.maximum.at(peak, codes, metric)
    lines = [("total", *decimate(t, total), "#444444")]
    for i in np.argsort(-peak, kind="stable")[:CACHE_GROUPS].tolist():
        mask = codes == i
        name = str(names[i])
        lines.append((name, *decimate(t[mask], metric[mask]), group_color(name)))
    return lines


def memory_sample_lines(samples: Any) -> list[tuple[str, np.ndarray, np.ndarray, str]]:
    """Lines from a MemorySampler (``.samples``) or ``{label: [(time, bytes), ...]}``."""
    data = getattr(samples, "samples", samples)
    if not isinstance(data, Mapping) or not data:
        return []
    series = {}
    for label, points in data.items():
        arr = np.asarray(getattr(points, "values", points), float).reshape(-1, 2)
        series[str(label)] = arr
    t0 = min((float(a[:, 0].min()) for a in series.values() if len(a)), default=0.0)
    return [(label, a[:, 0] - t0, a[:, 1] / 1e6, group_color(label)) for label, a in series.items()]


# -- flame graph -------------------------------------------------------------------------


def flame_panel(run: RunLike) -> UIElement:
    """Flame graph of one group at a time (icicle: outermost frame on top), with a selector."""
    from bokeh.layouts import column
    from bokeh.models import CDSView, ColumnDataSource, CustomJS, GroupFilter, HoverTool, Range1d
    from bokeh.models.widgets import Div, Select
    from bokeh.plotting import figure

    data, totals = flame_columns(run.stacks)
    if not totals:
        return Div(text="<p>No stack samples in this run (profile with stacks=True).</p>")
    groups = sorted(totals, key=lambda g: -totals[g])
    source = ColumnDataSource(dict(data))
    view = CDSView(filter=GroupFilter(column_name="group", group=groups[0]))
    depth = int(max(data["depth"], default=0)) + 1
    fig = figure(
        height=min(60 + 22 * depth, 900),
        x_range=Range1d(start=0, end=1, bounds=(0, 1)),
        y_range=Range1d(start=depth - 0.5, end=-0.5),
        tools="xpan,xwheel_zoom,xbox_zoom,reset,save",
        active_scroll="xwheel_zoom",
        sizing_mode="stretch_width",
        title="Flame graph (width: share of the group's stack samples)",
    )
    fig.toolbar.logo = None
    fig.yaxis.visible = fig.xaxis.visible = False
    fig.grid.grid_line_color = None
    rects = fig.quad(
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=source,
        view=view,
        fill_color="color",
        line_color="white",
        line_width=0.5,
    )
    fig.text(
        x="left",
        y="depth",
        text="label",
        source=source,
        view=view,
        x_offset=3,
        text_font_size="8pt",
        text_baseline="middle",
    )
    fig.add_tools(
        HoverTool(
            renderers=[rects],
            tooltips=[
                ("function", "@name"),
                ("where", "@file:@line"),
                ("line", "@code"),
                ("samples", "@count (@share{0.0%})"),
            ],
        )
    )
    options: list[Any] = [(g, f"{g} ({totals[g]:,} samples)") for g in groups]
    select = Select(title="Task group", value=groups[0], options=options, width=420)
    select.js_on_change(
        "value",
        CustomJS(
            args={"f": view.filter, "src": source},
            code="f.group = cb_obj.value; src.change.emit();",
        ),
    )
    return column(select, fig, sizing_mode="stretch_width")


# -- the tabs of one run -----------------------------------------------------------------


def _time_range(run: RunLike, arrays: TaskArrays) -> Range1d:
    """The run's time span, shared by every time axis of its tabs."""
    from bokeh.models import Range1d

    ends = [0.0, float(arrays.stop.max()) if len(arrays) else 0.0]
    t0, t1 = run.meta.get("t0"), run.meta.get("t1")
    if isinstance(t0, int | float) and isinstance(t1, int | float):
        ends.append(float(t1 - t0))
    start = min(0.0, float(arrays.start.min()) if len(arrays) else 0.0)
    end = max(ends) or 1.0
    pad = (end - start) * 0.01
    return Range1d(start=start - pad, end=end + pad, bounds=(start - pad, end + pad))


def _note(text: str) -> UIElement:
    from bokeh.models.widgets import Div

    return Div(text=f"<p>{text}</p>")


def run_tabs(
    run: RunLike, arrays: TaskArrays | None = None, *, memory_samples: Any = None
) -> UIElement:
    """All plots of one run as bokeh tabs."""
    from bokeh.layouts import column
    from bokeh.models import TabPanel, Tabs

    arrays = task_arrays(run) if arrays is None else arrays
    x_range = _time_range(run, arrays)
    timeline = [task_stream(arrays, x_range), *resource_figures(run, x_range)]
    tabs = [TabPanel(title="Timeline", child=column(timeline, sizing_mode="stretch_width"))]
    lines = cache_lines(run)
    cache = (
        _line_figure(x_range, "Cache occupancy by group", "occupancy", lines)
        if lines
        else _note("No cache data in this run (profile with cache=True).")
    )
    tabs.append(TabPanel(title="Cache", child=cache))
    tabs.append(TabPanel(title="Flame graph", child=flame_panel(run)))
    samples = memory_samples if memory_samples is not None else getattr(run, "memory_samples", None)
    mem_lines = memory_sample_lines(samples) if samples is not None else []
    if mem_lines:
        from bokeh.models import Range1d

        end = max(float(x.max()) for _, x, _, _ in mem_lines if len(x)) or 1.0
        fig = _line_figure(Range1d(start=0, end=end), "Memory samples", "MB", mem_lines)
        fig.xaxis.axis_label = "seconds since first sample"
        tabs.append(TabPanel(title="Memory samples", child=fig))
    return Tabs(tabs=tabs, sizing_mode="stretch_width")
