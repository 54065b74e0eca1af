"""A comparison of two runs as text (``repr``, ``daskprofile diff``) and as escaped HTML
tables (``_repr_html_`` and the diff page).

Reads a :class:`daskprofile.comparison.Comparison` through the small protocol below. Every
string from a run (groups, functions, findings) is escaped with :func:`html.escape` in HTML.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import pandas as pd

from ._common import format_bytes, format_seconds

#: rows of each table on the diff page (the rest counted in a note)
PAGE_ROWS = 300
#: widest group or function name shown in the text report
TEXT_NAME = 44

#: one table row, as a record
Mapping_ = dict[str, Any]


class ComparisonLike(Protocol):
    """What the reports read of a comparison."""

    @property
    def groups(self) -> pd.DataFrame: ...

    @property
    def functions(self) -> pd.DataFrame: ...

    @property
    def findings(self) -> pd.DataFrame: ...

    @property
    def before(self) -> Any: ...

    @property
    def after(self) -> Any: ...

    @property
    def notes(self) -> list[str]: ...


# ------------------------------------------------------------------ cells
def signed_seconds(value: float) -> str:
    """``+1.2 s``, ``-340 ms`` (``-`` when unknown)."""
    if not math.isfinite(value):
        return "-"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "-") + format_seconds(abs(value))


def percent(value: float) -> str:
    """``+25%``, ``-3.1%`` (``-`` when unknown)."""
    return f"{value:+.3g}%" if math.isfinite(value * 100) else "-"


def _pct(value: Any) -> str:
    return percent(float(value) * 100) if _finite(value) else "-"


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _seconds(value: Any) -> str:
    if not _finite(value):
        return "-"
    return format_seconds(float(value)) if float(value) else "0"


def _signed(value: Any) -> str:
    return signed_seconds(float(value)) if _finite(value) else "-"


def _count(value: Any) -> str:
    return f"{int(value):,}" if _finite(value) else "-"


def _cache(value: Any) -> str:
    return f"{float(value):,.4g}" if _finite(value) else "-"


def _group_rel(row: Mapping_) -> str:
    if row["status"] == "new":
        return "new"
    if row["status"] == "gone":
        return "gone"
    return _pct(row["time_change_rel"])


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, list | tuple):
        return " -> ".join(map(str, value))
    return str(value)


def _short(text: str, width: int = TEXT_NAME) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


# ------------------------------------------------------------------ the run-wide facts
def facts(c: ComparisonLike) -> list[tuple[str, str, str, str]]:
    """(what, a, b, change) for wall time, tasks and peak memory."""
    a, b = c.before, c.after
    wall = b.wall_time - a.wall_time
    rel = wall / a.wall_time * 100 if a.wall_time else math.nan
    memory = b.peak_memory - a.peak_memory
    return [
        (
            "wall time",
            format_seconds(a.wall_time),
            format_seconds(b.wall_time),
            f"{signed_seconds(wall)}, {percent(rel)}",
        ),
        ("tasks", f"{a.tasks:,}", f"{b.tasks:,}", f"{b.tasks - a.tasks:+,}"),
        (
            "peak memory",
            format_bytes(a.peak_memory),
            format_bytes(b.peak_memory),
            ("+" if memory >= 0 else "-") + format_bytes(abs(memory))
            if math.isfinite(memory)
            else "-",
        ),
    ]


# ------------------------------------------------------------------ table specs
#: (header, cell, field whose sign colours the cell or None) of each table
Column = tuple[str, Callable[[Mapping_], str], str | None]

GROUP_COLUMNS: list[Column] = [
    ("group", lambda r: _text(r["group"]), None),
    ("tasks a", lambda r: _count(r["tasks_a"]), None),
    ("tasks b", lambda r: _count(r["tasks_b"]), None),
    ("time a", lambda r: _seconds(r["time_a"]), None),
    ("time b", lambda r: _seconds(r["time_b"]), None),
    ("change", lambda r: _signed(r["time_change"]), "time_change"),
    ("%", _group_rel, "time_change"),
    ("mean a", lambda r: _seconds(r["mean_a"]), None),
    ("mean b", lambda r: _seconds(r["mean_b"]), None),
    ("peak cache a", lambda r: _cache(r["peak_cache_a"]), None),
    ("peak cache b", lambda r: _cache(r["peak_cache_b"]), None),
]
FINDING_COLUMNS: list[Column] = [
    ("change", lambda r: _text(r["change"]), None),
    ("kind", lambda r: _text(r["kind"]), None),
    ("group", lambda r: _text(r["group"]), None),
    ("impact a", lambda r: _seconds(r["impact_a"]), None),
    ("impact b", lambda r: _seconds(r["impact_b"]), None),
    ("change of impact", lambda r: _signed(r["impact_change"]), "impact_change"),
    ("message", lambda r: _text(r["message"]), None),
]
FUNCTION_COLUMNS: list[Column] = [
    ("function", lambda r: _text(r["function"]), None),
    ("self a", lambda r: _seconds(r["self_s_a"]), None),
    ("self b", lambda r: _seconds(r["self_s_b"]), None),
    ("self change", lambda r: _signed(r["self_change_s"]), "self_change_s"),
    ("inclusive a", lambda r: _seconds(r["inclusive_s_a"]), None),
    ("inclusive b", lambda r: _seconds(r["inclusive_s_b"]), None),
    ("inclusive change", lambda r: _signed(r["inclusive_change_s"]), "inclusive_change_s"),
]


def _sections(c: ComparisonLike) -> list[tuple[str, str, pd.DataFrame, list[Column]]]:
    """(name, title, rows, columns) of the three tables; findings that did not change are
    left out."""
    findings = c.findings[c.findings["change"] != "same"] if len(c.findings) else c.findings
    return [
        ("groups", "Task groups (biggest change of time first)", c.groups, GROUP_COLUMNS),
        ("findings", "Findings that changed", findings, FINDING_COLUMNS),
        (
            "functions",
            "Functions (estimated seconds from stack samples; biggest change first)",
            c.functions,
            FUNCTION_COLUMNS,
        ),
    ]


# ------------------------------------------------------------------ text
def text_report(c: ComparisonLike, rows: int) -> str:
    """The comparison as plain text, ``rows`` rows per table."""
    lines = [f"daskprofile diff  a: {c.before.id}  b: {c.after.id}"]
    lines += [f"  {w:<12} {a:>12} -> {b:<12} {ch}" for w, a, b, ch in facts(c)]
    for name, title, df, columns in _sections(c):
        if name == "findings" and not len(df):
            continue
        lines += ["", title]
        lines += _text_table(df.head(rows).to_dict("records"), columns)
        if len(df) > rows:
            lines.append(f"  ... {len(df) - rows} more")
    lines += [f"note: {n}" for n in c.notes]
    return "\n".join(lines)


def _text_table(records: Sequence[Mapping_], columns: list[Column]) -> list[str]:
    if not records:
        return ["  (none)"]
    cells = [[_short(cell(r)) for _, cell, _ in columns] for r in records]
    heads = [h for h, _, _ in columns]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(heads)]

    def line(values: Sequence[str]) -> str:
        first = values[0].ljust(widths[0])
        rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
        return "  " + "  ".join([first, *rest]).rstrip()

    return [line(heads), *(line(row) for row in cells)]


# ------------------------------------------------------------------ HTML
_STYLE = (
    "table.dp-groups td.dp-up{color:#b2182b}table.dp-groups td.dp-down{color:#2166ac}"
    "table.dp-groups td.dp-msg{text-align:left;max-width:40em}"
)


def html_report(c: ComparisonLike, rows: int | None) -> str:
    """The facts and tables as escaped HTML (``rows`` rows per table; None: the page's
    limit)."""
    limit = PAGE_ROWS if rows is None else rows
    parts = [f"<style>{_STYLE}</style>", _facts_html(c)]
    parts += [f'<p class="dp-note">{html.escape(n)}</p>' for n in c.notes]
    for _, title, df, columns in _sections(c):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(_html_table(df.head(limit).to_dict("records"), columns))
        if len(df) > limit:
            parts.append(f'<p class="dp-note">{len(df) - limit:,} more rows not shown.</p>')
    return "\n".join(parts)


def _facts_html(c: ComparisonLike) -> str:
    runs = (
        f'<p class="dp-note">a (before): <b>{html.escape(str(c.before.id))}</b> \u00b7 '
        f"b (after): <b>{html.escape(str(c.after.id))}</b></p>"
    )
    items = "".join(
        f"<li><b>{html.escape(w)}</b>: {html.escape(a)} \u2192 {html.escape(b)} "
        f"<span>({html.escape(ch)})</span></li>"
        for w, a, b, ch in facts(c)
    )
    return f'{runs}<ul class="dp-facts">{items}</ul>'


def _html_table(records: Sequence[Mapping_], columns: list[Column]) -> str:
    if not records:
        return '<p class="dp-note">None.</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in columns)
    body = "".join(
        "<tr>" + "".join(_html_cell(r, column) for column in columns) + "</tr>" for r in records
    )
    return f'<table class="dp-groups"><tr>{head}</tr>{body}</table>'


def _html_cell(record: Mapping_, column: Column) -> str:
    """One escaped cell; a change red when positive (slower), blue when negative."""
    header, cell, sign_of = column
    cls = "dp-msg" if header == "message" else ""
    if sign_of is not None and _finite(record[sign_of]):
        sign = float(record[sign_of])
        cls = "dp-up" if sign > 0 else "dp-down" if sign < 0 else ""
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{html.escape(cell(record))}</td>"
