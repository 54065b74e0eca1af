"""The Exceptions and Spans sections of the HTML snapshot: plain HTML, every string escaped.

Exceptions are shown as distributed's dashboard shows them: the exception's type and
message, the task's key, and its traceback folded in a ``<details>``.
"""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np
import pandas as pd

from ._common import RunLike, format_seconds

#: failed tasks shown with their traceback
MAX_EXCEPTION_ROWS = 50
#: spans listed
MAX_SPAN_ROWS = 200


def _exception_item(row: Any) -> str:
    """One failed task: type and message, key, worker and time; traceback folded."""
    message = str(row.message or "")
    where = f"{escape(str(row.worker))} at {escape(format_seconds(float(row.time)))}"
    span = f" · span {escape(str(row.span))}" if isinstance(row.span, str) else ""
    trace = str(row.traceback or "")
    body = f'<pre class="dp-code">{escape(trace)}</pre>' if trace else ""
    return (
        f'<details class="dp-exception"><summary><b class="dp-error">{escape(str(row.type))}'
        f"</b>: {escape(message)}</summary>"
        f"<p>task <code>{escape(str(row.key))}</code> on {where}{span}</p>{body}</details>"
    )


def exceptions_html(run: RunLike) -> str:
    """The Exceptions section: each failed task kept in ``run.exceptions`` (first ones)."""
    table = run.exceptions
    if not len(table):
        return ""
    items = "".join(
        _exception_item(row) for row in table.head(MAX_EXCEPTION_ROWS).itertuples(index=False)
    )
    notes = []
    if len(table) > MAX_EXCEPTION_ROWS:
        notes.append(f"{len(table) - MAX_EXCEPTION_ROWS:,} more failed tasks not shown.")
    dropped = int((run.meta.dropped or {}).get("exceptions", 0) or 0)
    if dropped:
        notes.append(f"{dropped:,} more failed tasks were not kept (only the first ones are).")
    more = "".join(f'<p class="dp-note">{escape(n)}</p>' for n in notes)
    return f'<h3 class="dp-error">Exceptions</h3>\n{items}{more}'


def span_rows(tasks: pd.DataFrame) -> list[dict[str, Any]]:
    """Per span (in order of first task): tasks, total task time and errors."""
    if "span" not in tasks or not len(tasks):
        return []
    named = tasks[tasks["span"].notna()]
    if not len(named):
        return []
    duration = np.maximum(named["stop"].to_numpy(float) - named["start"].to_numpy(float), 0.0)
    frame = pd.DataFrame(
        {
            "span": named["span"].astype(str).to_numpy(object),
            "duration": duration,
            "error": (named["status"] != "ok").to_numpy(bool),
        }
    )
    grouped = frame.groupby("span", sort=False)
    return [
        {
            "span": str(name),
            "tasks": len(rows),
            "total": float(rows["duration"].sum()),
            "errors": int(rows["error"].sum()),
        }
        for name, rows in grouped
    ]


def spans_html(run: RunLike) -> str:
    """The Spans table: tasks, total and errors per span (nothing when no span was used)."""
    rows = span_rows(run.tasks)
    if not rows:
        return ""
    head = "<tr><th>span</th><th>tasks</th><th>total</th><th>errors</th></tr>"
    body = "".join(
        f"<tr><td>{escape(r['span'])}</td><td>{r['tasks']:,}</td>"
        f"<td>{escape(format_seconds(r['total']))}</td>"
        + (f'<td class="dp-error">{r["errors"]:,}</td>' if r["errors"] else "<td>0</td>")
        + "</tr>"
        for r in rows[:MAX_SPAN_ROWS]
    )
    more = ""
    if len(rows) > MAX_SPAN_ROWS:
        more = f'<p class="dp-note">{len(rows) - MAX_SPAN_ROWS:,} more spans not shown.</p>'
    return f'<h3>Spans</h3>\n<table class="dp-groups">{head}{body}</table>{more}'
