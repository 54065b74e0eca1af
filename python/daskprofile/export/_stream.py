"""The task stream: a lane per worker, a rectangle per task (merged when many)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ._common import TaskArrays, group_color
from ._lod import Busy, split_tasks
from ._span_filter import add_columns, merge_per_span
from ._widgets import (
    LEGEND_GROUPS,
    lookup_hover,
    seconds_hover,
    tag_tools_added_since,
    time_figure,
)

if TYPE_CHECKING:
    from bokeh.models import Range1d
    from bokeh.plotting import figure as Figure


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
    data = {
        "y": arrays.lane[rows].astype(np.int16),
        "left": arrays.start[rows],
        "dur": (arrays.stop[rows] - arrays.start[rows]).astype(np.float32),
        "g": arrays.group[rows].astype(np.int16 if len(arrays.groups) < 32_000 else np.int32),
        "wait": (arrays.start[rows] - arrays.submit[rows]).astype(np.float32),
        "err": err,
        "key": arrays.keys(rows),
    }
    add_columns(data, None if arrays.span is None else arrays.span[rows])
    source = ColumnDataSource(data)
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
    alpha = "a" if "a" in source.data else 1.0  # "a": dimmed outside the picked span
    color = {"field": "g", "transform": mapper}
    tasks = fig.hbar(**bar, fill_color=color, fill_alpha=alpha, line_color=None)
    failed = np.flatnonzero(arrays.error[rows])
    if len(failed):
        view = CDSView(filter=IndexFilter(indices=failed.tolist()))
        fig.hbar(
            **bar, view=view, fill_alpha=0, line_color="#d00000", line_width=2, line_alpha=alpha
        )
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
                "@g": lookup_hover(arrays.groups),
                "@y": lookup_hover(arrays.lanes),
                "@dur": seconds_hover(),
                "@wait": seconds_hover(),
                "@err": _status_hover(errors),
            },
        )
    )


def _status_hover(errors: list[str]) -> Any:
    """``ok`` or ``error: <type>``."""
    from bokeh.models import CustomJSHover

    code = "const i = Math.round(value); return i ? 'error: ' + (names[i] ?? '') : 'ok';"
    return CustomJSHover(args={"names": errors}, code=code)


def _busy_source(busy: Busy, spans: np.ndarray | None = None) -> Any:
    """One row per merged interval (``spans``: each one's span code, if the run has any)."""
    from bokeh.models import ColumnDataSource

    width = np.maximum(busy.stop - busy.start, 1e-12)
    occupancy = np.clip(busy.busy / width, 0, 1)
    data = {
        "y": busy.lane.astype(np.int16),
        "left": busy.start,
        "right": busy.stop,
        "g": busy.group.astype(np.int32),
        "count": busy.count.astype(np.int32),
        "busy": busy.busy.astype(np.float32),
        "alpha": (0.35 + 0.65 * occupancy).astype(np.float32),
    }
    add_columns(data, spans, data["alpha"])
    return ColumnDataSource(data)


def _draw_busy(
    fig: Figure, arrays: TaskArrays, busy: Busy, mapper: Any, spans: np.ndarray | None = None
) -> None:
    """Merged intervals of short tasks (level of detail), shaded by occupancy."""
    from bokeh.models import HoverTool

    source = _busy_source(busy, spans)
    merged = fig.hbar(
        y="y",
        left="left",
        right="right",
        height=0.8,
        source=source,
        fill_color={"field": "g", "transform": mapper},
        fill_alpha="a" if "a" in source.data else "alpha",
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
                "@g": lookup_hover(arrays.groups),
                "@y": lookup_hover(arrays.lanes),
                "@busy": seconds_hover(),
                "@left": seconds_hover(
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


def task_stream(arrays: TaskArrays, x_range: Range1d, **figure_options: Any) -> Figure:
    """A lane per worker, a rectangle per task coloured by group (merged when many).

    ``figure_options`` override the figure's defaults; tools added to it after creation
    are tagged ``"daskprofile"``.
    """
    lanes = max(len(arrays.lanes), 1)
    options: dict[str, Any] = {
        "height": min(80 + 26 * lanes, 700) + 30 + 22 * min(len(arrays.groups), LEGEND_GROUPS) // 5,
        "title": "Task stream",
        "y_range": (lanes - 0.5, -0.5),
        **figure_options,
    }
    fig = time_figure(x_range, **options)
    created = list(fig.tools)
    try:
        _draw_stream(fig, arrays, keep_title="title" in figure_options)
    finally:
        tag_tools_added_since(fig, created)
    return fig


def _draw_stream(fig: Figure, arrays: TaskArrays, keep_title: bool) -> None:
    from bokeh.models import FixedTicker

    fig.yaxis.ticker = FixedTicker(ticks=list(range(len(arrays.lanes))))
    fig.yaxis.major_label_overrides = dict(enumerate(arrays.lanes))
    fig.ygrid.grid_line_color = None
    if not len(arrays):
        return
    mapper = _group_mapper(arrays)
    single, short, pixel = split_tasks(arrays)
    if len(short):
        busy, spans, pixel = merge_per_span(arrays, short, pixel)
        _draw_busy(fig, arrays, busy, mapper, spans)
        if not keep_title:
            fig.title = (
                f"Task stream: {len(arrays):,} tasks; {len(single):,} long ones drawn one by one, "
                f"{len(short):,} short ones merged per worker and group at {pixel * 1e3:.3g} ms"
            )
    _draw_tasks(fig, arrays, single, mapper)
    _legend(fig, arrays)
