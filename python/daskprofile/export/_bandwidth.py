"""The Bandwidth tab of a cluster run, as distributed's performance report shows it.

Bytes/s over time (the transfers spread over their durations, in round time bins; red as
transfers are on the task stream), by pair of workers (distributed's "Bandwidth by Worker"
heatmap, source x destination) and by type of data moved (its "Bandwidth by Type" bars),
then both as tables. Read from the receiving
end of each transfer (``run.bandwidth``). Worker addresses and type names reach the page as
bokeh data or escaped in the tables' HTML.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._cluster_stream import ACTION_COLORS
from ._common import RunLike, format_bytes, format_seconds, natural_key
from ._widgets import bytes_hover, bytes_ticks, time_figure

if TYPE_CHECKING:
    from bokeh.models import Range1d
    from bokeh.models.ui import UIElement
    from bokeh.plotting import figure as Figure

#: time bins of the bandwidth over time, at most
TIME_BINS = 200
#: rows of the bandwidth tables
TABLE_ROWS = 50
#: distributed's ``BandwidthWorkers`` palette (light to dark blue) and its bars' colour
BLUES = [f"#{x:02x}{x:02x}ff" for x in range(255, 63, -1)]
BAR = "blue"
#: the bandwidth over time: a transfer's colour, as in the panel
TRANSFER = ACTION_COLORS["transfer"]


def time_step(span: float) -> float:
    """A round bin width (1, 2 or 5 x 10^k s, at least 1 ms) giving at most
    :data:`TIME_BINS` bins over ``span`` seconds."""
    raw = max(span / TIME_BINS, 1e-3)
    scale = 10 ** np.floor(np.log10(raw))
    return float(next(m * scale for m in (1, 2, 5, 10) if m * scale >= raw))


def _bandwidth_over_time(run: RunLike, x_range: Range1d) -> Figure:
    from bokeh.models import ColumnDataSource, HoverTool

    bounds: Any = x_range
    span = float(bounds.end) - float(bounds.start)
    dt = time_step(span)
    rate = run.bandwidth("time", dt=dt)
    fig = time_figure(
        x_range, height=220, title=f"Bandwidth over time (bins of {format_seconds(dt)})"
    )
    fig.yaxis.formatter = bytes_ticks()
    fig.yaxis.axis_label = "bytes/s"
    source = ColumnDataSource(
        {"time": rate["time"].to_numpy(float), "bandwidth": rate["bandwidth"].to_numpy(float)}
    )
    line = fig.step(
        x="time", y="bandwidth", source=source, mode="after", color=TRANSFER, line_width=1.5
    )
    fig.add_tools(
        HoverTool(
            renderers=[line],
            mode="vline",
            tooltips=[("time", "@time{0.000} s"), ("bandwidth", "@bandwidth{custom}")],
            formatters={"@bandwidth": bytes_hover("/s")},
        )
    )
    return fig


def _display(address: Any) -> str:
    return str(address) if isinstance(address, str) and address else "(client)"


_MOVED = [
    ("bandwidth", "@bandwidth{custom}"),
    ("moved", "@bytes{custom} in @transfers transfers"),
]


def _hover(first: list[tuple[str, str]]) -> Any:
    from bokeh.models import HoverTool

    return HoverTool(
        tooltips=[*first, *_MOVED],
        formatters={"@bandwidth": bytes_hover("/s"), "@bytes": bytes_hover()},
        point_policy="follow_mouse",
    )


def _moved(frame: pd.DataFrame) -> dict[str, Any]:
    return {
        "bandwidth": frame["bandwidth"].to_numpy(float),
        "bytes": frame["bytes"].to_numpy(float),
        "transfers": frame["transfers"].to_numpy(np.int64),
    }


def _by_workers_figure(pairs: pd.DataFrame) -> Figure:
    """distributed's "Bandwidth by Worker": a heatmap of source x destination."""
    from bokeh.models import ColumnDataSource, FactorRange, LinearColorMapper
    from bokeh.models.annotations import ColorBar
    from bokeh.plotting import figure

    source_names = [_display(s) for s in pairs["source"]]
    dest_names = [_display(d) for d in pairs["destination"]]
    factors = sorted(set(source_names) | set(dest_names), key=natural_key)
    side = min(max(300, 120 + 40 * len(factors)), 700)
    fig = figure(
        title="Bandwidth by worker",
        x_range=FactorRange(factors=factors),
        y_range=FactorRange(factors=factors[::-1]),
        width=side + 150,
        height=side,
        tools="save",
        toolbar_location="above",
        x_axis_label="source",
        y_axis_label="destination",
    )
    fig.toolbar.logo = None
    fig.xaxis.major_label_orientation = -0.8
    mapper = LinearColorMapper(palette=BLUES, low=0, high=float(pairs["bandwidth"].max()) or 1.0)
    source = ColumnDataSource({"source": source_names, "destination": dest_names, **_moved(pairs)})
    fig.rect(
        x="source",
        y="destination",
        width=1,
        height=1,
        source=source,
        fill_color={"field": "bandwidth", "transform": mapper},
        line_color=None,
    )
    bar = ColorBar(
        color_mapper=mapper, formatter=bytes_ticks(), border_line_color=None, title="bytes/s"
    )
    fig.add_layout(bar, "right")
    fig.add_tools(_hover([("source", "@source"), ("destination", "@destination")]))
    return fig


def _by_type_figure(types: pd.DataFrame) -> Figure:
    """distributed's "Bandwidth by Type": a bar per type of data moved."""
    from bokeh.models import ColumnDataSource, DataRange1d, FactorRange
    from bokeh.plotting import figure

    names = [str(t) or "(unknown)" for t in types["type"]]
    fig = figure(
        title="Bandwidth by type",
        x_range=DataRange1d(start=0),
        y_range=FactorRange(factors=names[::-1]),
        width=520,
        height=min(170 + 30 * len(names), 700),
        tools="save",
        toolbar_location="above",
        x_axis_label="bytes/s",
    )
    fig.toolbar.logo = None
    fig.xaxis.formatter = bytes_ticks()
    fig.ygrid.grid_line_color = None
    source = ColumnDataSource({"type": names, **_moved(types)})
    fig.hbar(y="type", right="bandwidth", height=0.8, source=source, color=BAR)
    fig.add_tools(_hover([("type", "@type")]))
    return fig


def _cell(column: str, value: Any) -> str:
    if column == "type":
        return escape(str(value) or "(unknown)")
    return escape(_display(value))


def _table(frame: pd.DataFrame, columns: list[str], title: str) -> str:
    """An escaped HTML table of the first rows (bytes and rates formatted)."""
    names = [*columns, "bytes", "transfers", "bandwidth"]
    head = "<tr>" + "".join(f"<th>{escape(c)}</th>" for c in names) + "</tr>"
    rows = []
    for r in frame.head(TABLE_ROWS).to_dict("records"):
        cells = [_cell(c, r[c]) for c in columns]
        cells += [
            escape(format_bytes(float(r["bytes"]))),
            f"{int(r['transfers']):,}",
            escape(format_bytes(float(r["bandwidth"]))) + "/s",
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    more = ""
    if len(frame) > TABLE_ROWS:
        more = f'<p class="dp-note">{len(frame) - TABLE_ROWS:,} more rows not shown.</p>'
    return f'<h3>{escape(title)}</h3><table class="dp-groups">{head}{"".join(rows)}</table>{more}'


_TABLE_STYLE = (
    "<style>table.dp-groups{border-collapse:collapse;font-size:.9em}"
    "table.dp-groups th,table.dp-groups td{padding:.15em .7em;border-bottom:1px solid #ddd;"
    "text-align:right}table.dp-groups th:first-child,table.dp-groups td:first-child,"
    "table.dp-groups th:nth-child(2),table.dp-groups td:nth-child(2){text-align:left}"
    "h3{font-size:1em;margin:.9em 0 .3em}.dp-note{color:#666;font-size:.9em}</style>"
)


def bandwidth_panel(run: RunLike, x_range: Range1d) -> UIElement:
    """Bytes/s over time; by pair of workers and by type (figures and tables)."""
    from bokeh.layouts import column, row
    from bokeh.models.widgets import Div

    pairs, types = run.bandwidth("workers"), run.bandwidth("type")
    parts: list[Any] = [_bandwidth_over_time(run, x_range)]
    charts = []
    if len(pairs):
        charts.append(_by_workers_figure(pairs))
    if len(types):
        charts.append(_by_type_figure(types))
    if charts:
        parts.append(row(charts))
    tables = _table(pairs, ["source", "destination"], "Bandwidth by worker") + _table(
        types, ["type"], "Bandwidth by type"
    )
    parts.append(Div(text=_TABLE_STYLE + tables, sizing_mode="stretch_width"))
    return column(parts, sizing_mode="stretch_width")
