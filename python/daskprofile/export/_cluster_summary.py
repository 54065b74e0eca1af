"""Where a cluster run ran: the summary's "Where it ran" and Workers sections (plain HTML).

As the Summary of distributed's performance report: the scheduler's address, number of
workers, threads and memory, the dask, distributed and Python versions (the kernel's, and
each worker's where it differs, said loudly), the workers' clock offsets when not 0; then
one row per worker seen: address, name, host, threads, memory limit, when it joined and
left and why, the tasks run again because of it. Every string is escaped. Nothing is
written for a run that did not run on a cluster.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from html import escape
from typing import Any

import pandas as pd

from ._common import RunLike, format_bytes, format_seconds, natural_key

#: worker rows listed
MAX_WORKER_ROWS = 200
#: versions told first, in this order (then the other libraries recorded)
FIRST_VERSIONS = ("python", "dask", "distributed")


def _described(run: RunLike) -> Mapping[str, Any]:
    described = run.meta.distributed
    return described if isinstance(described, Mapping) else {}


def _infos(run: RunLike) -> dict[str, Mapping[str, Any]]:
    """``meta.distributed["workers"]``: address -> what the client learnt of the worker."""
    workers = _described(run).get("workers")
    if not isinstance(workers, Mapping):
        return {}
    return {str(a): i for a, i in workers.items() if isinstance(i, Mapping)}


def is_cluster_run(run: RunLike) -> bool:
    """Whether ``run`` ran (also) on a distributed cluster."""
    return bool(_described(run)) or len(run.workers) > 0


def _ordered(versions: Mapping[str, Any]) -> list[str]:
    first = [k for k in FIRST_VERSIONS if k in versions]
    return first + sorted(k for k in versions if k not in FIRST_VERSIONS)


def _versions_text(versions: Mapping[str, Any]) -> str:
    return " · ".join(f"{k} {versions[k]}" for k in _ordered(versions))


def _facts(run: RunLike, members: pd.DataFrame) -> Iterator[tuple[str, str]]:
    """Scheduler, workers, threads, memory: distributed's "Scheduler Information"."""
    scheduler = _described(run).get("scheduler")
    if scheduler:
        yield "scheduler", str(scheduler)
    if len(members):
        gone = int(members["left"].notna().sum())
        seen = f"{len(members):,}" + (f" ({gone:,} left during the run)" if gone else "")
        yield "workers", seen
        yield "threads", f"{int(members['threads'].sum()):,}"
        yield "memory", format_bytes(float(members["memory_limit"].sum()))
    else:
        infos = _infos(run).values()
        yield "workers", f"{len(infos):,}"
        yield "threads", f"{sum(int(i.get('nthreads') or 0) for i in infos):,}"
        yield "memory", format_bytes(float(sum(int(i.get("memory_limit") or 0) for i in infos)))


def _version_notes(run: RunLike) -> str:
    """The kernel's versions, then each worker's that differ (or are not known)."""
    kernel = dict(run.meta.versions or {})
    lines = []
    if kernel:
        lines.append(f"<p>Versions (kernel): {escape(_versions_text(kernel))}</p>")
    differ, unknown = [], []
    for address, info in sorted(_infos(run).items(), key=lambda kv: natural_key(kv[0])):
        theirs = info.get("versions")
        if not isinstance(theirs, Mapping):
            unknown.append(address)
            continue
        changed = [k for k in _ordered(theirs) if k in kernel and str(theirs[k]) != str(kernel[k])]
        if changed:
            what = ", ".join(f"{k} {theirs[k]} (kernel: {kernel[k]})" for k in changed)
            differ.append(f"<li><code>{escape(address)}</code>: {escape(what)}</li>")
    if differ:
        lines.append(
            '<p class="dp-error"><b>Workers run other versions than the kernel:</b></p>'
            f'<ul class="dp-error">{"".join(differ)}</ul>'
        )
    elif kernel and len(unknown) < len(_infos(run)):
        lines.append('<p class="dp-note">The workers run the same versions as the kernel.</p>')
    if unknown:
        lines.append(
            f'<p class="dp-note">Versions not known for {len(unknown):,} worker(s) '
            "(without daskprofile).</p>"
        )
    return "".join(lines)


def _clock_notes(run: RunLike) -> str:
    """Workers whose wall clock differs from the kernel's (their times were corrected)."""
    clocks = _described(run).get("clocks")
    if not isinstance(clocks, Mapping):
        return ""
    off = {str(a): float(c) for a, c in clocks.items() if isinstance(c, int | float) and c}
    if not off:
        return ""
    items = ", ".join(
        f"<code>{escape(a)}</code> {escape(f'{c:+.3f} s')}"
        for a, c in sorted(off.items(), key=lambda kv: natural_key(kv[0]))
    )
    return (
        '<p class="dp-note">Clock offsets (worker wall clock minus the kernel\'s; task '
        f"times are corrected): {items}</p>"
    )


def _text(value: Any) -> str:
    """A string cell: ``""`` for None or NaN."""
    if isinstance(value, str):
        return value
    return "" if value is None or pd.isna(value) else str(value)


def _when(value: float, empty: str) -> str:
    return format_seconds(value) if math.isfinite(value) else empty


def _left(m: Mapping[str, Any]) -> str:
    left = float(m["left"])
    if not math.isfinite(left):
        return "-"
    reason, cause = _text(m["reason"]), _text(m["cause"])
    why = " ".join(x for x in (reason, cause and f"({cause})") if x)
    return format_seconds(left) + (f", {why}" if why else "")


def _worker_row(m: Mapping[str, Any], again: str) -> str:
    limit = int(m["memory_limit"] or 0)
    cells = [
        f"<code>{escape(str(m['address']))}</code>",
        escape(_text(m["name"])),
        escape(_text(m["host"])),
        f"{int(m['threads'] or 0):,}",
        escape(format_bytes(float(limit)) if limit else "-"),
        escape(_when(float(m["joined"]), "before the run")),
        escape(_left(m)),
        escape(again),
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _took_tasks(members: pd.DataFrame) -> bool:
    """Whether a worker took tasks with it (keys it held, ran or was killed with): the
    only re-runs with a worker, so a run without any needs no ``run.reruns`` (grouping
    every task by key: ~0.3 s at 100k tasks)."""
    columns = [members[f] for f in ("lost", "processing", "killed") if f in members]
    return any(isinstance(keys, list | tuple) and len(keys) > 0 for c in columns for keys in c)


def _reruns_by_worker(run: RunLike, members: pd.DataFrame) -> dict[str, str]:
    """Per worker that left: what was run again because of it, in words."""
    if not _took_tasks(members):
        return {}
    reruns = run.reruns
    if not len(reruns):
        return {}
    out = {}
    for worker, rows in reruns[reruns["worker"].notna()].groupby("worker", sort=False):
        killed = int(rows["killed"].sum())
        parts = [
            f"{n:,} {why}"
            for why, n in rows[~rows["killed"].astype(bool)]["why"].value_counts().items()
        ]
        if killed:
            parts.append(f"{killed:,} failed (KilledWorker)")
        out[str(worker)] = ", ".join(parts)
    return out


def _workers_table(run: RunLike, members: pd.DataFrame) -> str:
    head = (
        "<tr><th>address</th><th>name</th><th>host</th><th>threads</th><th>memory limit</th>"
        "<th>joined</th><th>left</th><th>tasks run again</th></tr>"
    )
    again = _reruns_by_worker(run, members)
    records: list[dict[str, Any]] = members.to_dict("records")  # type: ignore[assignment]
    ordered = sorted(records, key=lambda m: natural_key(str(m["address"])))
    rows = "".join(
        _worker_row(m, again.get(str(m["address"]), "")) for m in ordered[:MAX_WORKER_ROWS]
    )
    more = ""
    if len(ordered) > MAX_WORKER_ROWS:
        more = f'<p class="dp-note">{len(ordered) - MAX_WORKER_ROWS:,} more workers not shown.</p>'
    return (
        f"<details open><summary>Workers</summary>"
        f'<table class="dp-groups dp-workers">{head}{rows}</table>{more}</details>'
    )


def cluster_html(run: RunLike) -> str:
    """The "Where it ran" and Workers sections ("" for a run that used no cluster)."""
    if not is_cluster_run(run):
        return ""
    members = run.workers
    facts = "".join(
        f"<li>{escape(label)}: <b>{escape(value)}</b></li>" for label, value in _facts(run, members)
    )
    parts = [
        "<h3>Where it ran</h3>",
        f'<ul class="dp-facts">{facts}</ul>',
        _version_notes(run),
        _clock_notes(run),
        _workers_table(run, members) if len(members) else "",
    ]
    return "\n".join(p for p in parts if p)
