"""Bokeh figures of a run, the way ``dask.diagnostics.visualize`` returns them.

``plot(run, kinds, ...)`` gives one figure per kind (``"tasks"``, ``"resources"``,
``"cache"``, ``"stacks"``), stacked on one time axis (a ``gridplot``) when there are
several. Keyword arguments go to every ``bokeh.plotting.figure`` and override the defaults
(an unknown one raises bokeh's ``AttributeError``), as in dask. What is drawn is
daskprofile's: the task stream merges short tasks (level of detail), the cache plot has one
line per task group (dask: one per task), CPU and memory share one plot.

``publish(layout, filename, show, save, mode)`` writes one self-contained file (BokehJS
inlined unless ``mode="cdn"``) and shows the layout inline in a notebook, or in a browser.
"""

from __future__ import annotations

import html
import os
import sys
import tempfile
import warnings
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..files import write_whole
from ._common import RunLike, task_arrays
from ._lod import decimate
from ._plots import cache_lines, flame_panel
from ._stream import task_stream
from ._widgets import tag_tools_added_since

if TYPE_CHECKING:
    from bokeh.models import Range1d
    from bokeh.models.ui import UIElement
    from bokeh.plotting import figure as Figure

__all__ = ["KINDS", "DROPIN_OPTIONS", "plot", "publish"]

KINDS = ("tasks", "resources", "cache", "stacks")
#: dask's own plot options, accepted for compatibility: groups keep daskprofile's stable
#: colours (``palette``) and lane labels are never cut (``label_size``)
DROPIN_OPTIONS = ("palette", "label_size")
_DEFAULTS: dict[str, Any] = {"width": 800, "height": 300, "toolbar_location": "above"}
_TIME_LABEL = "Time (s)"


def _time_range(run: RunLike) -> Range1d:
    """The run's span, from 0 (the run's start) to its end; ``[0, 1]`` when empty."""
    from bokeh.models import Range1d

    t0, t1 = run.meta.t0, run.meta.t1
    end = float(t1 - t0) if isinstance(t0, int | float) and isinstance(t1, int | float) else 0.0
    return Range1d(start=0, end=end if end > 0 else 1.0)


def _user_tools(fig: Figure, kwargs: dict[str, Any]) -> Figure:
    """With ``tools=`` given, keep exactly those; a hover among them gets our tooltips."""
    if "tools" not in kwargs:
        return fig
    from bokeh.models import HoverTool

    mine = [t for t in fig.tools if "daskprofile" not in t.tags]
    ours = [t for t in fig.tools if "daskprofile" in t.tags and isinstance(t, HoverTool)]
    for tool in mine:
        if isinstance(tool, HoverTool) and ours:
            tool.update(
                tooltips=ours[0].tooltips,
                formatters=ours[0].formatters,
                renderers=[r for t in ours for r in t.renderers]
                if all(isinstance(t.renderers, list) for t in ours)
                else "auto",
            )
    fig.tools = mine
    return fig


def _tasks(run: RunLike, x_range: Range1d, kwargs: dict[str, Any]) -> Figure:
    opts = {"sizing_mode": "fixed", **_DEFAULTS, **kwargs}
    fig = task_stream(task_arrays(run), x_range, **opts)
    fig.xaxis.axis_label = _TIME_LABEL
    return _user_tools(fig, kwargs)


def _new_figure(x_range: Range1d, title: str, kwargs: dict[str, Any], **extra: Any) -> Figure:
    from bokeh.plotting import figure

    opts = {
        "title": title,
        "tools": "xpan,xwheel_zoom,xbox_zoom,reset,save",
        **_DEFAULTS,
        **extra,
        **kwargs,
    }
    fig = figure(x_range=x_range, **opts)
    fig.toolbar.logo = None
    fig.xaxis.axis_label = _TIME_LABEL
    return fig


def _resources(run: RunLike, x_range: Range1d, kwargs: dict[str, Any]) -> Figure:
    """CPU (% of one core, left axis) and memory (MB, right axis) of the process tree."""
    from bokeh.models import ColumnDataSource, HoverTool, LinearAxis, Range1d

    res = run.resources
    t = res["time"].to_numpy(float)
    cpu_t, cpu = decimate(t, res["cpu"].to_numpy(float))
    mem_t, mem = decimate(t, res["memory"].to_numpy(float) / 1e6)
    # ranges never collapse: [0, 100] until there is more to show
    y = Range1d(start=0, end=max(100.0, float(cpu.max()) * 1.05 if len(cpu) > 1 else 0.0))
    top_mem = float(mem.max()) * 1.05 if len(mem) > 1 else 0.0
    fig = _new_figure(x_range, "CPU and memory", kwargs, y_range=y)
    before = list(fig.tools)
    fig.extra_y_ranges = {"memory": Range1d(start=0, end=max(100.0, top_mem))}
    fig.yaxis.axis_label = "% CPU"
    fig.add_layout(LinearAxis(y_range_name="memory", axis_label="Memory (MB)"), "right")
    cpu_line = fig.line(
        "x",
        "y",
        source=ColumnDataSource({"x": cpu_t, "y": cpu}),
        color="#1f77b4",
        legend_label="% CPU",
    )
    mem_line = fig.line(
        "x",
        "y",
        source=ColumnDataSource({"x": mem_t, "y": mem}),
        color="#2ca02c",
        y_range_name="memory",
        legend_label="Memory",
    )
    _quiet_legend(fig)
    fig.add_tools(
        HoverTool(
            renderers=[cpu_line, mem_line],
            tooltips=[("value", "@y{0,0.[0]}"), ("time", "@x{0.000} s")],
            mode="vline",
        )
    )
    tag_tools_added_since(fig, before)
    return _user_tools(fig, kwargs)


def _quiet_legend(fig: Figure) -> None:
    """A small, see-through legend in a corner; click an entry to hide its line."""
    legend = fig.legend[0]
    legend.update(
        location="top_left",
        click_policy="hide",
        label_text_font_size="8pt",
        background_fill_alpha=0.6,
        spacing=0,
        padding=4,
    )


def _cache(run: RunLike, x_range: Range1d, kwargs: dict[str, Any], metric_name: str) -> Figure:
    """Occupancy per task group (the heaviest ones) and in total: a step line each."""
    from bokeh.models import ColumnDataSource, HoverTool

    fig = _new_figure(x_range, "Cache occupancy by task group", kwargs)
    before = list(fig.tools)
    fig.yaxis.axis_label = f"Cache Size ({metric_name})"
    renderers: list[Any] = []
    for label, x, yv, color in cache_lines(run):
        source = ColumnDataSource(
            {"x": np.asarray(x, float), "y": np.asarray(yv, float), "g": [label] * len(x)}
        )
        renderers.append(
            fig.step("x", "y", source=source, mode="after", color=color, legend_label=label)
        )
    if renderers:
        _quiet_legend(fig)
        fig.add_tools(
            HoverTool(
                renderers=renderers,
                tooltips=[("group", "@g"), (metric_name, "@y{0,0.[00]}"), ("time", "@x{0.000} s")],
            )
        )
    tag_tools_added_since(fig, before)
    return _user_tools(fig, kwargs)


def plot(
    run: RunLike, kinds: Sequence[str], *, metric_name: str = "count", **kwargs: Any
) -> UIElement:
    """One figure per kind, stacked on the run's time axis (dask's ``visualize`` layout)."""
    from bokeh.layouts import column, gridplot

    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"kinds must be among {KINDS}, got {unknown!r}")
    for name in DROPIN_OPTIONS:
        kwargs.pop(name, None)
    x_range = _time_range(run)
    parts: list[Any] = []
    for kind in kinds:
        if kind == "tasks":
            parts.append(_tasks(run, x_range, kwargs))
        elif kind == "resources":
            parts.append(_resources(run, x_range, kwargs))
        elif kind == "cache":
            parts.append(_cache(run, x_range, kwargs, metric_name))
        else:
            parts.append(flame_panel(run))
    if len(parts) == 1:
        only: UIElement = parts[0]
        return only
    figures = [p for p in parts if hasattr(p, "xaxis")]
    for fig in figures:  # equal borders: the stacked time axes line up
        fig.min_border_left, fig.min_border_right = 90, 70
    for fig in figures[1:]:
        fig.title = None
    for fig in figures[:-1]:
        fig.xaxis.axis_label = None
    layout: UIElement = (
        gridplot([[f] for f in parts], merge_tools=False, toolbar_options={"logo": None})
        if len(figures) == len(parts)
        else column(parts)
    )
    return layout


# ------------------------------------------------------------------------- output
def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _document(layout: UIElement, mode: str | None, title: str) -> str:
    from bokeh.embed import file_html
    from bokeh.resources import CDN, INLINE

    if mode not in (None, "inline", "cdn"):
        raise ValueError(f"mode must be 'inline' or 'cdn', got {mode!r}")
    return file_html(layout, CDN if mode == "cdn" else INLINE, title)


def publish(
    layout: UIElement,
    filename: str | os.PathLike[str] | None = None,
    *,
    show: bool = True,
    save: bool | None = None,
    mode: str | None = None,
    title: str = "Dask profile",
) -> str | None:
    """Save and/or show ``layout``; returns the file written, if any.

    ``save`` defaults to "not in a notebook" (as dask), ``filename`` to ``profile.html``.
    ``show`` displays it inline in a notebook (a sandboxed iframe, works offline and in
    exported notebooks), else opens the saved file in a browser.
    """
    kernel = _in_kernel()
    if save is None:
        save = not kernel
    doc: str | None = None
    written = None
    if save:
        doc = _document(layout, mode, title)
        path = Path(filename if filename is not None else "profile.html")
        write_whole(path, lambda f: f.write(doc))  # whole or not at all
        written = str(path)
    if show:
        doc = doc if doc is not None and mode != "cdn" else _document(layout, None, title)
        if kernel:
            from IPython.display import display

            frame = (
                f'<iframe srcdoc="{html.escape(doc, quote=True)}" sandbox="allow-scripts" '
                'style="width: 100%; height: 700px; border: 0"></iframe>'
            )
            display({"text/html": frame}, raw=True)  # type: ignore[no-untyped-call]
        else:
            target = written
            if target is None:
                with tempfile.NamedTemporaryFile(
                    "w", suffix=".html", delete=False, encoding="utf-8"
                ) as f:
                    f.write(doc)
                    target = f.name
            try:
                webbrowser.open(Path(target).resolve().as_uri())
            except Exception as exc:  # no browser here: the file is still there
                warnings.warn(f"could not open a browser on {target}: {exc}", stacklevel=3)
    return written
