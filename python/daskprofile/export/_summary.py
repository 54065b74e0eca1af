"""The summary part of the HTML snapshot: plain HTML, every run-derived string escaped."""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Iterator
from html import escape
from typing import Any

import numpy as np

from ._cluster_summary import cluster_html, is_cluster_run
from ._common import (
    RunLike,
    TaskArrays,
    format_bytes,
    format_seconds,
    group_color,
    task_arrays,
)
from ._sections import exceptions_html, spans_html

#: per-group rows shown before the rest is folded into a note
MAX_GROUP_ROWS = 200
#: failed tasks listed by key
MAX_ERROR_ROWS = 20
_HEX_COLOR = re.compile(r"#[0-9a-fA-F]{6}")
#: longest tasks listed by key
SLOWEST_ROWS = 10


def run_duration(run: RunLike, arrays: TaskArrays) -> float:
    """Wall time of the run: ``t1 - t0`` from its meta, else the last task's stop."""
    t0, t1 = run.meta.t0, run.meta.t1
    if isinstance(t0, int | float) and isinstance(t1, int | float):
        return float(t1 - t0)
    return float(arrays.stop.max()) if len(arrays) else 0.0


def group_stats(arrays: TaskArrays) -> list[dict[str, Any]]:
    """Per group: count, total, mean, max task time and errors; heaviest group first."""
    n = len(arrays.groups)
    duration = np.maximum(arrays.stop - arrays.start, 0.0)
    count = np.bincount(arrays.group, minlength=n)
    total = np.bincount(arrays.group, weights=duration, minlength=n)
    errors = np.bincount(arrays.group, weights=arrays.error, minlength=n)
    longest = np.zeros(n)
    np.maximum.at(longest, arrays.group, duration)
    rows = [
        {
            "group": g,
            "count": int(count[i]),
            "total": float(total[i]),
            "mean": float(total[i] / count[i]) if count[i] else math.nan,
            "max": float(longest[i]),
            "errors": int(errors[i]),
        }
        for i, g in enumerate(arrays.groups)
    ]
    return sorted(rows, key=lambda r: (-r["total"], r["group"]))


def _facts(run: RunLike, arrays: TaskArrays) -> Iterator[tuple[str, str]]:
    """(label, value) pairs of the run's headline figures."""
    wall0 = run.meta.wall0
    if isinstance(wall0, int | float) and math.isfinite(wall0):
        yield "started", f"{_dt.datetime.fromtimestamp(wall0):%Y-%m-%d %H:%M:%S}"
    yield "duration", format_seconds(run_duration(run, arrays))
    yield "tasks", f"{len(arrays):,}"
    yield "errors", f"{int(arrays.error.sum()):,}"
    yield "worker threads" if is_cluster_run(run) else "workers", f"{len(arrays.lanes):,}"
    busy = float(np.maximum(arrays.stop - arrays.start, 0).sum())
    yield "task time", format_seconds(busy)
    res = run.resources
    if len(res):
        yield "peak memory", format_bytes(float(np.nanmax(res["memory"].to_numpy(float))))
        yield "mean CPU", f"{float(np.nanmean(res['cpu'].to_numpy(float))):.0f} %"
    schedulers = run.meta.schedulers
    if schedulers:
        names = schedulers if isinstance(schedulers, list | tuple) else [schedulers]
        yield "schedulers", ", ".join(str(s) for s in names)
    computes = run.meta.computes
    if isinstance(computes, int):
        yield "computes", str(computes)


def _facts_html(run: RunLike, arrays: TaskArrays) -> str:
    items = "".join(
        f"<li>{escape(label)}: <b>{escape(value)}</b></li>" for label, value in _facts(run, arrays)
    )
    return f'<ul class="dp-facts">{items}</ul>'


def _css_color(group: str) -> str:
    """The group's colour, checked to be ``#rrggbb`` before it goes into a style."""
    color = group_color(group)
    return color if _HEX_COLOR.fullmatch(color) else "#888888"


def _groups_html(arrays: TaskArrays) -> str:
    """The per-group table, heaviest group first."""
    rows = group_stats(arrays)
    head = (
        "<tr><th>group</th><th>tasks</th><th>total</th><th>mean</th><th>max</th>"
        "<th>errors</th></tr>"
    )
    body = []
    for r in rows[:MAX_GROUP_ROWS]:
        swatch = f'<span class="dp-sw" style="background:{_css_color(r["group"])}"></span>'
        err = f'<td class="dp-error">{r["errors"]:,}</td>' if r["errors"] else "<td>0</td>"
        body.append(
            f"<tr><td>{swatch}{escape(r['group'])}</td><td>{r['count']:,}</td>"
            f"<td>{format_seconds(r['total'])}</td><td>{format_seconds(r['mean'])}</td>"
            f"<td>{format_seconds(r['max'])}</td>{err}</tr>"
        )
    more = ""
    if len(rows) > MAX_GROUP_ROWS:
        more = f'<p class="dp-note">{len(rows) - MAX_GROUP_ROWS:,} more groups not shown.</p>'
    return f'<h3>Task groups</h3>\n<table class="dp-groups">{head}{"".join(body)}</table>{more}'


def _errors_html(arrays: TaskArrays) -> str:
    """Failed tasks (first few) with their exception type."""
    failed = np.flatnonzero(arrays.error)
    if not len(failed):
        return ""
    shown = failed[:MAX_ERROR_ROWS]
    items = "".join(
        f"<li><code>{escape(key)}</code>: {escape(str(arrays.error_type[i] or 'error'))}</li>"
        for i, key in zip(shown.tolist(), arrays.keys(shown), strict=True)
    )
    more = (
        f"<li>... {len(failed) - MAX_ERROR_ROWS:,} more</li>"
        if len(failed) > MAX_ERROR_ROWS
        else ""
    )
    return f'<h3 class="dp-error">Failed tasks</h3><ul>{items}{more}</ul>'


def _slowest_html(arrays: TaskArrays) -> str:
    """The longest tasks, by key."""
    if not len(arrays):
        return ""
    duration = arrays.stop - arrays.start
    top = np.argsort(-duration, kind="stable")[:SLOWEST_ROWS]
    rows = "".join(
        f"<tr><td><code>{escape(key)}</code></td>"
        f"<td>{escape(arrays.groups[arrays.group[i]])}</td>"
        f"<td>{escape(arrays.lanes[arrays.lane[i]])}</td>"
        f"<td>{format_seconds(float(duration[i]))}</td></tr>"
        for i, key in zip(top.tolist(), arrays.keys(top), strict=True)
    )
    head = "<tr><th>key</th><th>group</th><th>worker</th><th>duration</th></tr>"
    return (
        f"<details open><summary>Longest tasks</summary>"
        f'<table class="dp-groups">{head}{rows}</table></details>'
    )


def _notes_html(run: RunLike) -> str:
    """What the recorder dropped, switched off or recorded in a reduced way: never silent."""
    notes = []
    dropped = run.meta.dropped or {}
    if isinstance(dropped, dict):
        lost = {k: v for k, v in dropped.items() if v}
        if lost:
            what = ", ".join(f"{escape(str(k))}: {int(v):,}" for k, v in lost.items())
            notes.append(f"Records dropped (memory cap): {what}.")
    for err in run.meta.errors or []:
        if isinstance(err, dict):
            text = f"{err.get('collector', '?')}: {err.get('error', '')}"
            notes.append(f"Collector switched off: {escape(text)}")
    reduced = getattr(run.meta, "reduced", None) or {}
    if isinstance(reduced, dict):
        for part, why in reduced.items():
            notes.append(f"Reduced {escape(str(part))}: {escape(str(why))}")
    if run.meta.finished is False:
        notes.append("The run was still recording when this snapshot was taken.")
    return "".join(f'<p class="dp-note">{n}</p>' for n in notes)


def _code_html(code: str | None) -> str:
    """The calling code, as distributed's performance report shows it."""
    if not code:
        return ""
    return (
        f"<details open><summary>Calling code</summary>"
        f'<pre class="dp-code"><code>{escape(code)}</code></pre></details>'
    )


def summary_html(run: RunLike, *, code: str | None = None, arrays: TaskArrays | None = None) -> str:
    """The summary section of one run."""
    arrays = task_arrays(run) if arrays is None else arrays
    parts = [
        _facts_html(run, arrays),
        _notes_html(run),
        exceptions_html(run) or _errors_html(arrays),
        _groups_html(arrays) if len(arrays) else '<p class="dp-note">No tasks recorded.</p>',
        spans_html(run),
        cluster_html(run),
        _slowest_html(arrays),
        _code_html(code),
    ]
    return '<div class="dp-summary">\n' + "\n".join(p for p in parts if p) + "\n</div>"
