"""Bokeh models of the HTML snapshot: CPU/memory, cache, flame graph, memory; the tabs
(a cluster run's actions, Memory and Bandwidth tabs: ``_cluster_stream``, ``_cluster``).

Strings from the run travel only as bokeh data (column values, tick labels, legend labels,
``CustomJSHover`` arguments); the JavaScript snippets here are constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ._cluster import cluster_tabs
from ._cluster_stream import draw_cluster
from ._common import RunLike, TaskArrays, group_color, task_arrays
from ._flame import flame_columns
from ._lod import decimate
from ._source_view import source_view
from ._span_filter import span_selector
from ._stream import task_stream
from ._widgets import CACHE_GROUPS, time_figure

if TYPE_CHECKING:
    from bokeh.models import Range1d
    from bokeh.models.ui import UIElement
    from bokeh.plotting import figure as Figure

# -- resources, cache, memory samples ----------------------------------------------------


def _line_figure(
    x_range: Range1d, title: str, y_label: str, lines: Iterable[tuple[str, Any, Any, str]]
) -> Figure:
    """A small time-series figure: one line per (label, x, y, colour), hover on x."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.models.annotations import Legend, LegendItem

    fig = time_figure(x_range, height=190, title=title)
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
    """Flame graph of one group at a time (icicle: outermost frame on top), with a selector;
    a click on a frame shows its function's source under it (``_source_view``)."""
    from bokeh.layouts import column
    from bokeh.models import (
        CDSView,
        ColumnDataSource,
        CustomJS,
        GroupFilter,
        HoverTool,
        Range1d,
        TapTool,
    )
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
    labels = fig.text(
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
        ),
        TapTool(renderers=[rects]),
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
    shown = source_view(run, source, [rects, labels], select)
    return column(select, fig, *shown, sizing_mode="stretch_width")


# -- the tabs of one run -----------------------------------------------------------------


def _time_range(run: RunLike, arrays: TaskArrays) -> Range1d:
    """The run's time span, shared by every time axis of its tabs."""
    from bokeh.models import Range1d

    ends = [0.0, float(arrays.stop.max()) if len(arrays) else 0.0]
    t0, t1 = run.meta.t0, run.meta.t1
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
    stream = task_stream(arrays, x_range)
    draw_cluster(stream, run, arrays)
    selector = span_selector(stream, arrays)
    timeline = [*([selector] if selector else []), stream, *resource_figures(run, x_range)]
    tabs = [TabPanel(title="Timeline", child=column(timeline, sizing_mode="stretch_width"))]
    tabs += cluster_tabs(run, x_range)
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
