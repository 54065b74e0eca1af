"""The Memory tab of a cluster run, in the colours of distributed's dashboard.

The cluster's memory summed over workers, then each worker's (one figure each up to
:data:`WORKER_FIGURES` workers, a worker selector beyond), stacked as distributed splits
it and in the panel's shades of its colours: managed (blue), unmanaged (light blue; old
and recent in the hover), spilled to disk (grey); the memory limit dashed; the moments a
worker spilled (orange triangles down) or read spilled data back (outlined triangles up).
Samples are thinned to the screen's pixels, extremes kept; a worker that joined or left is
marked where. Worker addresses reach the page only as bokeh data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._common import format_bytes, format_seconds, natural_key
from ._lod import decimate_rows
from ._widgets import bytes_hover, bytes_ticks, time_figure

if TYPE_CHECKING:
    from bokeh.models import ColumnDataSource, Range1d
    from bokeh.models.ui import UIElement
    from bokeh.plotting import figure as Figure

#: distributed's memory layers (``ClusterMemory``), bottom to top, in the panel's colours
#: (``src/views/memory.ts``)
LAYERS = ("managed", "unmanaged", "spilled")
LAYER_LABELS = ("managed", "unmanaged", "spilled to disk")
LAYER_COLORS = ("#1f77b4", "#8fbbe0", "#a6a6a6")
#: one figure per worker up to this many workers; a worker selector beyond
WORKER_FIGURES = 8
#: time bins of the summed memory and its spill moments
TIME_BINS = 1_000
#: samples kept over all workers' figures, at most (thinned per worker: 4 per time bin)
MEMORY_POINTS = 40_000
#: the spill and unspill markers: kind -> (marker, fill, legend label)
MOMENTS = {
    "spill": ("inverted_triangle", "orange", "spill"),
    "unspill": ("triangle", None, "unspill"),
}
#: the limit sets the scale only while the memory peaks above 1/LIMIT_SCALE of it (as the
#: panel: a LocalCluster's default limit, the host's memory, would squash the rest)
LIMIT_SCALE = 3
_COLUMNS = ("time", "process", *LAYERS, "unmanaged_old", "unmanaged_recent", "limit")


def summed_memory(memory: pd.DataFrame, bins: int = TIME_BINS) -> pd.DataFrame:
    """The layers and limits summed over workers on a time grid: each worker counts with
    its last sample, from its first sample until a few sampling intervals after its last
    (a worker that left stops counting)."""
    t = memory["time"].to_numpy(float)
    grid = np.linspace(t.min(), t.max(), bins) if len(t) > 1 else t[:1]
    total = {c: np.zeros(len(grid)) for c in _COLUMNS[1:]}
    present = np.zeros(len(grid), np.int32)
    for _, rows in memory.groupby("worker", sort=False):
        samples = rows.sort_values("time", kind="stable")
        st = samples["time"].to_numpy(float)
        gap = 3 * float(np.median(np.diff(st))) if len(st) > 1 else 1.0
        idx = np.searchsorted(st, grid, side="right") - 1
        alive = (idx >= 0) & (grid <= st[-1] + gap)
        idx = np.clip(idx, 0, len(st) - 1)
        present += alive
        for c in total:
            total[c] += np.where(alive, samples[c].to_numpy(float)[idx], 0.0)
    out: pd.DataFrame = pd.DataFrame({"time": grid, **total, "workers": present})
    return out


def spill_moments(memory: pd.DataFrame) -> pd.DataFrame:
    """Samples where a worker's spill or unspill counter went up: time, worker, kind
    (``spill``, ``unspill``), keys and bytes since its previous sample, ``top`` (the height
    of its stack then)."""
    parts = [pd.DataFrame(columns=["time", "worker", "kind", "keys", "bytes", "top"])]
    for worker, rows in memory.groupby("worker", sort=False):
        samples = rows.sort_values("time", kind="stable")
        top = (samples["process"] + samples["spilled"]).to_numpy(float)
        for kind in MOMENTS:
            count = _floats(samples[f"{kind}_count"])
            size = _floats(samples[f"{kind}_bytes"])
            dc, db = np.diff(count, prepend=np.nan), np.diff(size, prepend=np.nan)
            up = np.flatnonzero(dc > 0)
            if len(up):
                parts.append(
                    pd.DataFrame(
                        {
                            "time": samples["time"].to_numpy(float)[up],
                            "worker": str(worker),
                            "kind": kind,
                            "keys": dc[up],
                            "bytes": db[up],
                            "top": top[up],
                        }
                    )
                )
    out: pd.DataFrame = pd.concat(parts, ignore_index=True)
    return out


def bin_moments(moments: pd.DataFrame, edges: np.ndarray, per_worker: bool) -> pd.DataFrame:
    """Moments merged per time bin (of ``edges``), kind and worker (``per_worker``) or over
    all workers: first time, keys and bytes summed, highest ``top``; ``worker`` names the
    worker, or how many there were."""
    if not len(moments):
        return moments
    bins = len(edges) - 1
    which = np.searchsorted(edges, moments["time"].to_numpy(float), side="right") - 1
    worker, names = pd.factorize(moments["worker"])
    kind, kinds = pd.factorize(moments["kind"])
    group = kind * bins + np.clip(which, 0, bins - 1)
    if per_worker:
        group = group * len(names) + worker
    ids, inverse = np.unique(group, return_inverse=True)
    n = len(ids)
    first = np.argsort(inverse, kind="stable")[np.searchsorted(np.sort(inverse), np.arange(n))]
    when, top = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(when, inverse, moments["time"].to_numpy(float))
    np.maximum.at(top, inverse, moments["top"].to_numpy(float))
    count = np.bincount(np.unique(inverse * len(names) + worker) // len(names), minlength=n)
    label = np.asarray(names, dtype=object)[worker[first]]
    several = count > 1
    label[several] = [f"{c} workers" for c in count[several].tolist()]
    out: pd.DataFrame = pd.DataFrame(
        {
            "time": when,
            "worker": label,
            "kind": np.asarray(kinds, dtype=object)[kind[first]],
            "keys": np.bincount(inverse, np.nan_to_num(moments["keys"].to_numpy(float)), n),
            "bytes": np.bincount(inverse, np.nan_to_num(moments["bytes"].to_numpy(float)), n),
            "top": top,
        }
    )
    return out


def _floats(column: pd.Series) -> np.ndarray:
    """A nullable int column as floats (NaN: not known)."""
    return column.astype("Float64").to_numpy(float, na_value=np.nan)


# -- figures -----------------------------------------------------------------------------


def _memory_source(samples: pd.DataFrame) -> ColumnDataSource:
    from bokeh.models import ColumnDataSource

    columns: dict[str, Any] = {c: samples[c].to_numpy(np.float32) for c in _COLUMNS[1:]}
    columns["top"] = columns["process"] + columns["spilled"]
    columns["time"] = samples["time"].to_numpy(float)
    return ColumnDataSource(columns)


def _moment_sources(moments: pd.DataFrame) -> list[ColumnDataSource]:
    """A source per kind of moment (spill, unspill)."""
    from bokeh.models import ColumnDataSource

    out = []
    for kind in MOMENTS:
        rows = moments[moments["kind"] == kind]
        out.append(
            ColumnDataSource(
                {
                    "time": rows["time"].to_numpy(float),
                    "top": rows["top"].to_numpy(float),
                    "keys": rows["keys"].to_numpy(float),
                    "bytes": rows["bytes"].to_numpy(float),
                    "worker": [str(w) for w in rows["worker"]],
                }
            )
        )
    return out


def _memory_figure(
    x_range: Range1d,
    title: str,
    source: ColumnDataSource,
    moments: list[ColumnDataSource],
    swapped: bool = False,
) -> Figure:
    """Stacked layers, the limit dashed, spill moments (drawn even when none if the data
    is ``swapped`` later); hover on the stack's top."""
    from bokeh.models import HoverTool

    peak = float(np.max(source.data["top"], initial=0.0))
    limit = float(np.max(source.data["limit"], initial=0.0))
    far = limit > LIMIT_SCALE * peak > 0
    if far:
        title = f"{title} (memory limit {format_bytes(limit)}: off the scale)"
    fig = time_figure(x_range, height=230, title=title)
    fig.yaxis.formatter = bytes_ticks()
    fig.yaxis.axis_label = "bytes"
    layers = fig.varea_stack(
        stackers=list(LAYERS),
        x="time",
        source=source,
        fill_color=list(LAYER_COLORS),
        legend_label=list(LAYER_LABELS),
    )
    fig.line(
        x="time",
        y="limit",
        source=source,
        line_dash="dashed",
        color="black",
        line_width=1.5,
        legend_label="memory limit",
    )
    top = fig.line(x="time", y="top", source=source, line_alpha=0)
    y_range: Any = fig.y_range
    y_range.start = 0
    if far:  # the scale follows the memory, not a limit far above it
        y_range.renderers = [*layers, top]
    fig.add_tools(
        HoverTool(
            renderers=[top],
            mode="vline",
            tooltips=[
                ("time", "@time{0.000} s"),
                ("process (RSS)", "@process{custom}"),
                ("managed", "@managed{custom}"),
                ("unmanaged", "@unmanaged{custom}"),
                ("  old", "@unmanaged_old{custom}"),
                ("  recent", "@unmanaged_recent{custom}"),
                ("spilled to disk", "@spilled{custom}"),
                ("limit", "@limit{custom}"),
            ],
            formatters={f"@{c}": bytes_hover() for c in _COLUMNS[1:]},
        )
    )
    _draw_moments(fig, moments, swapped)
    legend = fig.legend[0]
    legend.update(click_policy="hide", label_text_font_size="8pt", spacing=0, padding=4)
    fig.center = [r for r in fig.center if r is not legend]
    fig.add_layout(legend, "right")  # outside: the figures' time axes line up
    return fig


def _draw_moments(fig: Figure, sources: list[ColumnDataSource], always: bool) -> None:
    from bokeh.models import HoverTool

    renderers: list[Any] = []
    for (marker, fill, label), source in zip(MOMENTS.values(), sources, strict=True):
        if not always and not len(source.data["time"]):
            continue
        renderers.append(
            fig.scatter(
                x="time",
                y="top",
                source=source,
                marker=marker,
                size=9,
                line_color="darkorange",
                fill_color=fill,
                legend_label=label,
            )
        )
    if renderers:
        fig.add_tools(
            HoverTool(
                renderers=renderers,
                tooltips=[
                    ("worker", "@worker"),
                    ("time", "@time{0.000} s"),
                    ("keys", "@keys{0,0}"),
                    ("bytes", "@bytes{custom}"),
                ],
                formatters={"@bytes": bytes_hover()},
            )
        )


def _mark_membership(fig: Figure, member: Mapping[Any, Any]) -> None:
    """A dotted line where the worker joined or left (``lost at 3.2 s``)."""
    from bokeh.models.annotations import Label, Span

    reason = member["reason"] if isinstance(member["reason"], str) and member["reason"] else "left"
    for when, verb in ((float(member["joined"]), "joined"), (float(member["left"]), reason)):
        if not np.isfinite(when):
            continue
        fig.add_layout(Span(location=when, dimension="height", line_dash="dotted", line_width=1.5))
        fig.add_layout(
            Label(
                x=when,
                y=4,
                y_units="screen",
                x_offset=4,
                text=f"{verb} at {format_seconds(when)}",
                text_font_size="8pt",
            )
        )


# -- the tab -----------------------------------------------------------------------------


def _per_worker(
    memory: pd.DataFrame, moments: pd.DataFrame
) -> dict[str, tuple[ColumnDataSource, list[ColumnDataSource]]]:
    """Per worker (in natural order): its thinned samples and its moments, as sources;
    :data:`MEMORY_POINTS` samples at most over all workers."""
    groups = dict(list(memory.groupby("worker", sort=False)))
    bins = min(TIME_BINS, max(50, MEMORY_POINTS // (4 * len(groups))))
    t = memory["time"].to_numpy(float)
    moments = bin_moments(moments, np.linspace(t.min(), t.max(), bins + 1), per_worker=True)
    by_worker = dict(list(moments.groupby("worker", sort=False))) if len(moments) else {}
    out = {}
    for worker in sorted(groups, key=lambda w: natural_key(str(w))):
        samples = groups[worker].sort_values("time", kind="stable")
        top = (samples["process"] + samples["spilled"]).to_numpy(float)
        rows = decimate_rows(samples["time"].to_numpy(float), top, bins)
        mine = by_worker.get(worker, moments[:0])
        out[str(worker)] = (_memory_source(samples.iloc[rows]), _moment_sources(mine))
    return out


def _selector(fig: Figure, shown: list[Any], every: dict[str, Any]) -> Any:
    """A worker selector that swaps the data of the one worker figure."""
    from bokeh.models import CustomJS
    from bokeh.models.widgets import Select

    names = list(every)
    options: list[Any] = list(names)
    select = Select(title="Worker", value=names[0], options=options, width=420)
    select.js_on_change(
        "value",
        CustomJS(
            args={
                "shown": shown,
                "every": [[src, *moments] for src, moments in every.values()],
                "names": names,
                "title": fig.title,
            },
            code=(
                "const i = names.indexOf(cb_obj.value); if (i < 0) return;"
                "shown.forEach((s, j) => { s.data = {...every[i][j].data}; });"
                "title.text = 'Worker ' + cb_obj.value;"
            ),
        ),
    )
    return select


def memory_panel(
    memory: pd.DataFrame, x_range: Range1d, members: pd.DataFrame | None = None
) -> UIElement:
    """The cluster's summed memory, then each worker's (a selector beyond a few); when a
    worker joined or left (``members``: ``run.workers``) is marked on its figure."""
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource

    summed = summed_memory(memory)
    moments = spill_moments(memory)
    grid = summed["time"].to_numpy(float)
    merged = bin_moments(moments, np.r_[grid, np.inf], per_worker=False)
    at = np.clip(np.searchsorted(grid, merged["time"]), 0, len(grid) - 1)
    height = (summed["process"] + summed["spilled"]).to_numpy(float)
    total = _memory_figure(
        x_range,
        "Cluster memory (sum over workers)",
        _memory_source(summed),
        _moment_sources(merged.assign(top=height[at])),
    )
    every = _per_worker(memory, moments)
    parts: list[Any] = [total]
    if len(every) <= WORKER_FIGURES:
        known = (
            {} if members is None else {str(m["address"]): m for m in members.to_dict("records")}
        )
        for worker, (source, marks) in every.items():
            fig = _memory_figure(x_range, f"Worker {worker}", source, marks)
            if worker in known:
                _mark_membership(fig, known[worker])
            parts.append(fig)
    else:  # one figure, its data swapped by a selector
        first, (source, marks) = next(iter(every.items()))
        shown = [ColumnDataSource(dict(s.data)) for s in (source, *marks)]
        fig = _memory_figure(x_range, f"Worker {first}", shown[0], shown[1:], swapped=True)
        parts += [_selector(fig, shown, every), fig]
    return column(parts, sizing_mode="stretch_width")
