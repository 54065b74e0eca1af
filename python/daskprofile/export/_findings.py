"""The snapshot's Findings section: why the run took its time, and a small what-if chart.

Reads only the finished run (``run.findings()`` rows and ``run.what_if()``); every text
from the run (groups, messages built from task and function names) is escaped.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["findings_html", "what_if_figure"]

#: rows shown at most
MOST = 8


def _rows(run: Any) -> list[dict[str, Any]]:
    rows = getattr(run, "_finding_rows", None)
    if rows is None:
        return []
    try:
        out: list[dict[str, Any]] = rows()
    except Exception:  # a snapshot is always written
        return []
    return out


def findings_html(run: Any) -> str:
    """A ``<section class="dp-findings">`` listing the top findings (or saying none)."""
    rows = _rows(run)[:MOST]
    if not rows:
        body = '<p class="dp-note">No finding: nothing stands out as costing time.</p>'
    else:
        items = "\n".join(_row_html(r) for r in rows)
        body = (
            '<table class="dp-findings-table"><thead><tr><th>kind</th><th>group</th>'
            "<th>impact</th><th>what</th><th>what to try</th></tr></thead>"
            f"<tbody>\n{items}\n</tbody></table>"
        )
    return f'<section class="dp-findings">\n<h3>Findings</h3>\n{body}\n</section>'


def _row_html(row: dict[str, Any]) -> str:
    e = html.escape
    impact = f"{row['impact_s']:.3g} s ({100 * row['share']:.0f}%)"
    return (
        f'<tr data-kind="{e(str(row["kind"]))}"><td>{e(str(row["kind"]))}</td>'
        f"<td>{e(str(row['group']))}</td><td>{e(impact)}</td>"
        f"<td>{e(str(row['message']))}</td><td>{e(str(row['suggestion']))}</td></tr>"
    )


def what_if_figure(run: Any) -> Any:
    """A small bokeh chart of the estimated wall time per number of workers (None: no
    replay possible)."""
    what_if = getattr(run, "what_if", None)
    if what_if is None or not getattr(run, "finished", False):
        return None
    try:
        table = what_if()
    except Exception:
        return None
    if not len(table):
        return None
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool
    from bokeh.plotting import figure

    source = ColumnDataSource(
        {"workers": [str(w) for w in table["workers"]], "wall": list(table["wall_time"])}
    )
    fig = figure(
        x_range=FactorRange(*source.data["workers"]),
        height=180,
        width=360,
        title="What if: estimated wall time by number of workers",
        x_axis_label="workers",
        y_axis_label="s",
        toolbar_location=None,
        name="dp-what-if",
    )
    fig.vbar(x="workers", top="wall", width=0.7, source=source, color="#4c78a8")
    fig.add_tools(HoverTool(tooltips=[("workers", "@workers"), ("estimate", "@wall{0.000} s")]))
    return fig
