"""A cluster run's task stream: actions besides compute, and workers joining or leaving.

Actions (``run.actions``) in distributed's task stream colours (transfer red, disk-read and
disk-write orange, deserialize grey), as the panel draws them: a thinner bar along the
bottom of the lane of the thread that computed the task (the task's own key on that
worker), else of the worker's first lane, else of a lane of its own, over the tasks. Many
actions go through the same level of detail as tasks. A worker that left during the run
has its lanes hatched from then on, a line and ``lost at 3.2 s`` where it left; one that
joined has them greyed until then. The tasks it took with it (``run.reruns``: results it
held, tasks it was running or that failed with it) have their rows there outlined and
cross-hatched, hover ``re-run: lost on tcp://...``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ..cluster_tables import ACTIONS
from ..distributed._common import worker_address
from ._common import RunLike, TaskArrays, format_seconds, natural_key
from ._lod import merge_bounded, split_tasks
from ._widgets import bytes_hover, lookup_hover, seconds_hover

if TYPE_CHECKING:
    from bokeh.plotting import figure as Figure

#: distributed's task stream colours (``distributed.diagnostics.task_stream.colors``), in
#: the panel's shades (``src/clusterTables.ts``)
ACTION_COLORS = {
    "transfer": "#d62728",
    "disk-read": "#ff7f0e",
    "disk-write": "#ff7f0e",
    "deserialize": "#7f7f7f",
}
#: an action's bar: this share of a task's, along the bottom of the lane (as the panel)
ACTION_BAND = 0.4
_TASK_BAR = 0.8  # (the task stream's bar height)
_BAND_HEIGHT = ACTION_BAND * _TASK_BAR
_BAND_OFFSET = (_TASK_BAR - _BAND_HEIGHT) / 2  # lanes grow downwards: + is lower
_LANE_PX = 26
_WARN = "#e65100"  # the panel's warning colour (JupyterLab's --jp-warn-color0)
_JOINING = "#9e9e9e"


def draw_cluster(fig: Figure, run: RunLike, arrays: TaskArrays) -> None:
    """Actions and workers joining/leaving over the task stream ``fig`` of ``run``."""
    actions, members = run.actions, run.workers
    if not len(actions) and not len(members):
        return
    lanes = list(arrays.lanes)
    if len(actions):
        drawn = _action_arrays(actions, arrays, lanes)
        _draw_actions(fig, drawn, actions)
    _draw_members(fig, members, lanes)
    if len(members) and members["left"].notna().any():
        _draw_reruns(fig, arrays, run.reruns)
    _extend_lanes(fig, len(arrays.lanes), lanes)


# -- actions -----------------------------------------------------------------------------


def _rows_with_action(keys: np.ndarray, action_keys: pd.Series) -> np.ndarray:
    """Rows of ``keys`` (the tasks') among ``action_keys``: only those are matched to
    their action's worker (a 100k-task run's tasks all cost ~0.2 s to deduplicate and
    merge; ``Series.isin`` on arrow strings ~0.1 s, a set of Python strings ~10 ms)."""
    wanted = set(action_keys.dropna().to_numpy(object).tolist())
    found = np.fromiter((k in wanted for k in keys.tolist()), bool, len(keys))
    if action_keys.isna().any():  # (a merge matches missing keys with missing keys)
        found |= pd.isna(keys)
    return np.flatnonzero(found)


def _action_lanes(actions: pd.DataFrame, arrays: TaskArrays, lanes: list[str]) -> np.ndarray:
    """Each action's lane: its task's on its worker, else the worker's first, else a new
    lane named after the worker (appended to ``lanes``)."""
    address = [worker_address(label) for label in arrays.lanes]
    keys = arrays.key_column.to_numpy(object)
    mine = _rows_with_action(keys, actions["key"])
    computed = pd.DataFrame(
        {
            "key": keys[mine],
            "worker": np.asarray(address, dtype=object)[arrays.lane[mine]] if len(mine) else [],
            "lane": arrays.lane[mine],
        }
    ).drop_duplicates(["key", "worker"], keep="last")
    found = actions[["key", "worker"]].merge(computed, on=["key", "worker"], how="left")
    lane = found["lane"].to_numpy(float, copy=True)
    missing = ~np.isfinite(lane)
    if missing.any():
        first: dict[str, int] = {}
        for i, a in enumerate(address):
            first.setdefault(a, i)
        others = actions["worker"].to_numpy(object)[missing].astype(str)
        for w in sorted(set(others) - set(first), key=natural_key):
            first[w] = len(lanes)
            lanes.append(w)
        lane[missing] = pd.Series(others).map(first).to_numpy(float)
    out: np.ndarray = lane.astype(np.int32)
    return out


def _action_arrays(actions: pd.DataFrame, arrays: TaskArrays, lanes: list[str]) -> TaskArrays:
    """The actions as task arrays (kinds as groups), for the level of detail of tasks."""
    kinds = [k for k in ACTIONS if k in set(actions["action"])]
    kinds += sorted(set(actions["action"]) - set(kinds))
    kind = pd.Categorical(actions["action"], categories=kinds).codes.astype(np.int32)
    start = actions["start"].to_numpy(float)
    return TaskArrays(
        key_column=actions["key"].reset_index(drop=True),
        group=kind,
        lane=_action_lanes(actions, arrays, lanes),
        submit=start,
        start=start,
        stop=np.maximum(actions["stop"].to_numpy(float), start),
        error=np.zeros(len(start), bool),
        error_type=np.full(len(start), None, object),
        groups=kinds,
        lanes=lanes,
    )


def _kind_mapper(kinds: list[str]) -> Any:
    from bokeh.models import LinearColorMapper

    palette = [ACTION_COLORS.get(k, "purple") for k in kinds]
    return LinearColorMapper(palette=palette, low=0, high=len(palette))


def _draw_actions(fig: Figure, drawn: TaskArrays, actions: pd.DataFrame) -> None:
    """Actions one by one (hover: action, key, worker, from, bytes, duration), merged when
    many, and a legend entry per kind."""
    mapper = _kind_mapper(drawn.groups)
    single, short, pixel = split_tasks(drawn)
    if len(short):
        _draw_merged(fig, drawn, short, pixel, mapper)
    _draw_single(fig, drawn, single, actions, mapper)
    _legend(fig, drawn.groups)


def _draw_single(
    fig: Figure, drawn: TaskArrays, rows: np.ndarray, actions: pd.DataFrame, mapper: Any
) -> None:
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.transform import stack

    peer_codes, peers = pd.factorize(actions["peer"].iloc[rows], use_na_sentinel=False)
    size = actions["bytes"].iloc[rows].astype("Float64").fillna(-1).to_numpy(float)
    source = ColumnDataSource(
        {
            "y": (drawn.lane[rows] + _BAND_OFFSET).astype(np.float32),
            "left": drawn.start[rows],
            "dur": (drawn.stop[rows] - drawn.start[rows]).astype(np.float32),
            "a": drawn.group[rows].astype(np.int8),
            "key": drawn.keys(rows),
            "peer": peer_codes.astype(np.int16),
            "bytes": size,
        }
    )
    bars = fig.hbar(
        y="y",
        left="left",
        right=stack("left", "dur"),
        height=_BAND_HEIGHT,
        source=source,
        fill_color={"field": "a", "transform": mapper},
        line_color=None,
    )
    fig.add_tools(
        HoverTool(
            renderers=[bars],
            tooltips=[
                ("action", "@a{custom}"),
                ("key", "@key"),
                ("worker", "@y{custom}"),
                ("from", "@peer{custom}"),
                ("bytes", "@bytes{custom}"),
                ("duration", "@dur{custom}"),
            ],
            formatters={
                "@a": lookup_hover(drawn.groups),
                "@y": lookup_hover(drawn.lanes),
                "@peer": lookup_hover([str(p) if isinstance(p, str) else "" for p in peers]),
                "@bytes": bytes_hover(),
                "@dur": seconds_hover(),
            },
        )
    )


def _draw_merged(
    fig: Figure, drawn: TaskArrays, rows: np.ndarray, pixel: float, mapper: Any
) -> None:
    """Short actions merged per lane and kind (as short tasks are)."""
    from bokeh.models import ColumnDataSource, HoverTool

    busy, _ = merge_bounded(drawn, rows, pixel)
    width = np.maximum(busy.stop - busy.start, 1e-12)
    source = ColumnDataSource(
        {
            "y": (busy.lane + _BAND_OFFSET).astype(np.float32),
            "left": busy.start,
            "right": busy.stop,
            "a": busy.group.astype(np.int8),
            "count": busy.count.astype(np.int32),
            "busy": busy.busy.astype(np.float32),
            "alpha": (0.35 + 0.65 * np.clip(busy.busy / width, 0, 1)).astype(np.float32),
        }
    )
    merged = fig.hbar(
        y="y",
        left="left",
        right="right",
        height=_BAND_HEIGHT,
        source=source,
        fill_color={"field": "a", "transform": mapper},
        fill_alpha="alpha",
        line_color=None,
    )
    fig.add_tools(
        HoverTool(
            renderers=[merged],
            tooltips=[
                ("action", "@a{custom}"),
                ("count", "@count (merged)"),
                ("busy", "@busy{custom}"),
            ],
            formatters={"@a": lookup_hover(drawn.groups), "@busy": seconds_hover()},
        )
    )


def _legend(fig: Figure, kinds: list[str]) -> None:
    """One entry per kind of action present, under the groups' legend."""
    from bokeh.models.annotations import Legend, LegendItem

    items = []
    for kind in kinds:
        swatch = fig.hbar(  # one invisible row: BokehJS draws no legend glyph for no data
            y=[np.nan],
            left=[np.nan],
            right=[np.nan],
            height=0.8,
            fill_color=ACTION_COLORS.get(kind, "purple"),
            line_color=None,
        )
        items.append(LegendItem(label=kind, renderers=[cast(Any, swatch)]))
    legend = Legend(
        items=items,
        orientation="horizontal",
        label_text_font_size="9pt",
        border_line_color=None,
        name="daskprofile-actions",
    )
    fig.add_layout(legend, "below")
    fig.height = (fig.height or 300) + 30


# -- workers joining and leaving ---------------------------------------------------------


def _member_rows(members: pd.DataFrame, lanes: list[str], end: float) -> dict[str, Any]:
    """Per lane of a worker that joined or left: the span before it joined or after it
    left (``gone``), where, and the label (``joined at 1.2 s``, ``lost at 3.2 s``)."""
    by_address: dict[str, list[int]] = {}
    for i, label in enumerate(lanes):
        by_address.setdefault(worker_address(label), []).append(i)
    names = ("y", "left", "right", "x", "text", "align", "dx", "gone")
    rows: dict[str, Any] = {k: [] for k in names}
    for m in members.to_dict("records"):
        mine = by_address.get(str(m["address"]), [])
        left, joined = float(m["left"]), float(m["joined"])
        spans = []
        if np.isfinite(joined):
            spans.append((-end, joined, f"joined at {format_seconds(joined)}", "right", False))
        if np.isfinite(left):
            why = m["reason"] if isinstance(m["reason"], str) and m["reason"] else "left"
            spans.append((left, end, f"{why} at {format_seconds(left)}", "left", True))
        for lo, hi, text, align, gone in spans:
            x = hi if align == "right" else lo
            for y in mine:
                for name, value in zip(
                    names, (y, lo, hi, x, text, align, 8 if gone else -8, gone), strict=True
                ):
                    rows[name].append(value)
    return rows


def _draw_members(fig: Figure, members: pd.DataFrame, lanes: list[str]) -> None:
    """Lanes of a worker that left end there (hatched from then on, a line and ``lost at
    3.2 s``); those of one that joined begin there (greyed before)."""
    from bokeh.models import CDSView, ColumnDataSource, IndexFilter

    if not len(members):
        return
    x_range: Any = fig.x_range
    end = abs(float(x_range.end)) * 10 + 10  # beyond any zoom
    rows = _member_rows(members, lanes, end)
    if not rows["y"]:
        return
    source = ColumnDataSource(rows)
    gone = np.asarray(rows["gone"], bool)
    span: dict[str, Any] = {
        "y": "y",
        "left": "left",
        "right": "right",
        "height": 1.0,
        "source": source,
    }
    fig.hbar(
        **span,
        view=CDSView(filter=IndexFilter(indices=np.flatnonzero(gone).tolist())),
        fill_alpha=0,
        hatch_pattern="/",
        hatch_color=_WARN,
        hatch_alpha=0.6,
        hatch_scale=8,
        line_color=None,
    )
    fig.hbar(
        **span,
        view=CDSView(filter=IndexFilter(indices=np.flatnonzero(~gone).tolist())),
        fill_color=_JOINING,
        fill_alpha=0.2,
        line_color=None,
    )
    fig.rect(x="x", y="y", width=0, height=1.0, source=source, line_color=_WARN, line_width=2)
    fig.text(
        x="x",
        y="y",
        text="text",
        source=source,
        text_align="align",
        text_baseline="middle",
        x_offset="dx",
        text_font_size="8pt",
        text_color="black",
        background_fill_color="white",
        background_fill_alpha=0.8,
    )


def rerun_rows(arrays: TaskArrays, reruns: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Task rows a worker that left took with it (their key in ``reruns``, on that
    worker), and why each ran again: ``lost on tcp://...`` (``interrupted``, ``killed``).
    Decodes only the keys of rows on such workers."""
    taken = reruns[reruns["worker"].notna()] if len(reruns) else reruns
    if not len(taken) or not len(arrays):
        return np.empty(0, np.int64), []
    address = np.asarray([worker_address(label) for label in arrays.lanes], dtype=object)
    where = address[arrays.lane]
    rows = np.flatnonzero(pd.Series(where).isin(set(taken["worker"])).to_numpy())
    found = pd.DataFrame({"key": arrays.keys(rows), "worker": where[rows], "row": rows}).merge(
        taken[["key", "worker", "why", "killed"]], on=["key", "worker"]
    )
    killed = found["killed"].astype("boolean").fillna(False).to_numpy(bool)
    why = np.where(killed, "killed", found["why"].to_numpy(object))
    text = [f"{w} on {a}" for w, a in zip(why.tolist(), found["worker"].tolist(), strict=True)]
    return found["row"].to_numpy(np.int64), text


def _draw_reruns(fig: Figure, arrays: TaskArrays, reruns: pd.DataFrame) -> None:
    """The rows of :func:`rerun_rows` outlined and cross-hatched, hover ``re-run``."""
    from bokeh.models import ColumnDataSource, HoverTool

    rows, why = rerun_rows(arrays, reruns)
    if not len(rows):
        return
    source = ColumnDataSource(
        {
            "y": arrays.lane[rows].astype(np.float32),
            "left": arrays.start[rows],
            "right": np.maximum(arrays.stop[rows], arrays.start[rows]),
            "key": arrays.keys(rows),
            "rerun": why,
        }
    )
    marks = fig.hbar(
        y="y",
        left="left",
        right="right",
        height=_TASK_BAR,
        source=source,
        fill_alpha=0,
        hatch_pattern="x",
        hatch_color=_WARN,
        hatch_alpha=0.7,
        hatch_scale=6,
        line_color=_WARN,
        line_width=1.5,
        line_dash="dashed",
        name="daskprofile-reruns",
    )
    fig.add_tools(HoverTool(renderers=[marks], tooltips=[("re-run", "@rerun"), ("key", "@key")]))


def _lanes_px(lanes: int) -> int:
    """Height of the lanes in the task stream (as ``_stream.task_stream`` sizes them)."""
    return min(80 + _LANE_PX * lanes, 700)


def _extend_lanes(fig: Figure, before: int, lanes: list[str]) -> None:
    """Lanes added for actions of workers that computed nothing: ticks, range, height."""
    from bokeh.models import FixedTicker

    if len(lanes) == before:
        return
    fig.yaxis.ticker = FixedTicker(ticks=list(range(len(lanes))))
    fig.yaxis.major_label_overrides = dict(enumerate(lanes))
    y_range: Any = fig.y_range
    y_range.start = len(lanes) - 0.5
    fig.height = (fig.height or 300) + _lanes_px(len(lanes)) - _lanes_px(before)
