"""Compare two finished runs: what got slower or faster, where, and which findings changed.

``compare(a, b)`` (``a`` the baseline, ``b`` the run after a change) returns a
:class:`Comparison`: per task group the change in tasks, time, mean duration and peak cache
occupancy; per function (from the stack samples) the change in self and inclusive time;
the findings that appeared, went away or changed impact; the wall time, task count and
peak memory of both. It reads the two finished runs only and is computed once, eagerly.

Stack samples are compared as *estimated seconds*, never raw counts, so runs sampled at
different rates compare: a node's samples are its share of its group's samples times the
group's recorded task time (samples times the sampling interval for a group without
recorded tasks). The module is named ``comparison`` (not ``compare``) so that the
submodule never shadows the ``daskprofile.compare`` function.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .stacktree import frame_label, self_count

if TYPE_CHECKING:
    from .run import Run

Tree = dict[str, Any]

#: the findings columns compared (those of ``run.findings()``)
FINDING_COLUMNS = ("kind", "group", "impact_s", "share", "evidence", "message", "suggestion")
#: a finding's impact "changed" when it moved by more than this share of the larger one...
CHANGED_SHARE = 0.1
#: ... and by more than this many seconds
CHANGED_MIN_S = 1e-3
#: default stack sampling interval (s) when a run does not record one
DEFAULT_INTERVAL = 0.01
#: rows of each table shown in the text and inline views
SHOWN = 15


# ------------------------------------------------------------------ inputs
def as_run(value: Any, name: str) -> Run:
    """A run from a :class:`~daskprofile.Run` or the path of a saved one; ``ValueError``
    naming the file if it cannot be read, ``TypeError`` naming ``name`` otherwise."""
    from .run import Run, load

    if isinstance(value, Run):
        return value
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"{name} must be a daskprofile.Run or a run file path, got {value!r}")
    path = os.fspath(value)
    if not os.path.isfile(path):
        raise ValueError(f"{name}: no such run file: {path}")
    try:
        return load(path)
    except (OSError, ValueError) as exc:  # unreadable, not a run, newer (names the file)
        raise ValueError(f"{name}: {exc}") from exc


def wall_time(run: Run) -> float:
    """Seconds from the start to the end of the block (NaN while live)."""
    t1 = run.meta.t1
    return float(t1) - run.t0 if t1 is not None else math.nan


def peak_memory(run: Run) -> float:
    """The highest RSS sampled (bytes; NaN without resource samples)."""
    memory = run.raw("resources")["memory"]
    return float(np.max(memory)) if len(memory) else math.nan


# ------------------------------------------------------------------ groups
def group_stats(run: Run) -> pd.DataFrame:
    """Per group: tasks, time (s, summed durations), mean (s), peak_cache (highest cache
    occupancy, in the cache metric's unit; NaN if not recorded); indexed by group."""
    from .run import _group_table  # the columnar per-group table of Run.summary()

    rows = _group_table(run.raw("tasks", keys=False))
    stats = pd.DataFrame(rows, columns=["group", "tasks", "total", "mean"]).set_index("group")
    stats = stats.rename(columns={"total": "time"})
    cache = run.cache
    peaks = cache.groupby("group")["metric"].max() if len(cache) else pd.Series(dtype=float)
    joined: pd.DataFrame = stats.join(peaks.rename("peak_cache"), how="outer")
    return joined


def compare_groups(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per group of either table (from :func:`group_stats`), the biggest absolute
    change of time first; ``status`` is ``both``, ``new`` (only in b) or ``gone``."""
    both = a.merge(b, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    in_a, in_b = both["tasks_a"].notna(), both["tasks_b"].notna()
    for side in ("a", "b"):
        both[f"tasks_{side}"] = both[f"tasks_{side}"].fillna(0).astype(np.int64)
        both[f"time_{side}"] = both[f"time_{side}"].fillna(0.0)
    out = pd.DataFrame(index=both.index)
    out["status"] = np.where(in_a & in_b, "both", np.where(in_b, "new", "gone"))
    for name in ("tasks", "time", "mean"):
        out[f"{name}_a"], out[f"{name}_b"] = both[f"{name}_a"], both[f"{name}_b"]
        out[f"{name}_change"] = both[f"{name}_b"] - both[f"{name}_a"]
    out["time_change_rel"] = _relative(out["time_change"], out["time_a"])
    out["mean_change_rel"] = _relative(out["mean_change"], out["mean_a"])
    out["peak_cache_a"], out["peak_cache_b"] = both["peak_cache_a"], both["peak_cache_b"]
    out = out.rename_axis("group").reset_index()
    out["group"] = out["group"].astype(object)
    order = np.argsort(-out["time_change"].abs().to_numpy(float), kind="stable")
    ranked: pd.DataFrame = out.iloc[order].reset_index(drop=True)
    return ranked


def _relative(change: pd.Series, base: pd.Series) -> pd.Series:
    """``change / base``, NaN where the base is zero or unknown."""
    base = base.astype(float)
    ratio: pd.Series = change.astype(float) / base.where(base > 0)
    return ratio


# ------------------------------------------------------------------ functions
def seconds_per_sample(run: Run) -> dict[str, float]:
    """Per stack group, the seconds one sample stands for (see the module docstring)."""
    times = group_stats(run)["time"].dropna().to_dict()
    interval = run.meta.options.get("interval")
    fallback = float(interval) if isinstance(interval, int | float) and interval > 0 else None
    out = {}
    for group, tree in run.stacks.items():
        samples = int(tree.get("count", 0))
        if samples <= 0:
            continue
        known = times.get(group)
        out[group] = known / samples if known else (fallback or DEFAULT_INTERVAL)
    return out


def _walk_functions(tree: Tree) -> Iterator[tuple[Tree, bool]]:
    """(node, first of its function on its path) below the root: recursion counts once
    in inclusive time."""
    todo: list[tuple[Tree, frozenset[str]]] = [(c, frozenset()) for c in _kids(tree)]
    while todo:
        node, above = todo.pop()
        ident = str(node["identifier"])
        yield node, ident not in above
        todo.extend((c, above | {ident}) for c in _kids(node))


def _kids(node: Tree) -> list[Tree]:
    return list((node.get("children") or {}).values())


def function_stats(run: Run) -> pd.DataFrame:
    """Per function (stack-tree identifier): label, samples and estimated seconds, self and
    inclusive, summed over groups."""
    scale = seconds_per_sample(run)
    acc: dict[str, list[Any]] = {}
    for group, tree in run.stacks.items():
        per_sample = scale.get(group)
        if per_sample is None:
            continue
        for node, first in _walk_functions(tree):
            row = acc.setdefault(str(node["identifier"]), [frame_label(node), 0, 0, 0.0, 0.0])
            own = self_count(node)
            row[1] += own
            row[3] += own * per_sample
            if first:
                row[2] += int(node["count"])
                row[4] += int(node["count"]) * per_sample
    columns = ["function", "self_samples", "samples", "self_s", "inclusive_s"]
    table: pd.DataFrame = pd.DataFrame.from_dict(acc, orient="index", columns=columns)
    return table


def compare_functions(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per function of either table (from :func:`function_stats`), the biggest
    absolute change of self time first."""
    both = a.merge(b, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    out = pd.DataFrame({"function": both["function_b"].fillna(both["function_a"])})
    for name in ("self_samples", "samples", "self_s", "inclusive_s"):
        for side in ("a", "b"):
            out[f"{name}_{side}"] = both[f"{name}_{side}"].fillna(0)
    for name in ("self_samples", "samples"):
        for side in ("a", "b"):
            out[f"{name}_{side}"] = out[f"{name}_{side}"].astype(np.int64)
    out["self_change_s"] = out["self_s_b"] - out["self_s_a"]
    out["inclusive_change_s"] = out["inclusive_s_b"] - out["inclusive_s_a"]
    key = out["self_change_s"].abs().to_numpy(float)
    order = np.lexsort((-out["inclusive_change_s"].abs().to_numpy(float), -key))
    ranked: pd.DataFrame = out.iloc[order].rename_axis("identifier").reset_index()
    return ranked


# ------------------------------------------------------------------ findings
def run_findings(run: Run) -> pd.DataFrame | None:
    """``run.findings()`` where the Run has it (None otherwise)."""
    findings = getattr(run, "findings", None)
    return findings() if callable(findings) else None


def compare_findings(a: pd.DataFrame | None, b: pd.DataFrame | None) -> pd.DataFrame:
    """Findings of two runs matched by (kind, group): ``change`` is ``appeared``, ``went
    away``, ``changed`` (impact moved by more than 10% and 1 ms) or ``same``; the biggest
    change of impact first."""
    fa, fb = _findings_by_key(a), _findings_by_key(b)
    rows = []
    for key in dict.fromkeys([*fa, *fb]):
        ra, rb = fa.get(key), fb.get(key)
        ia = float(ra["impact_s"]) if ra is not None else 0.0
        ib = float(rb["impact_s"]) if rb is not None else 0.0
        shown = rb if rb is not None else ra
        assert shown is not None
        rows.append(
            {
                "kind": shown["kind"],
                "group": shown["group"],
                "change": _finding_change(ra, rb, ia, ib),
                "impact_a": ia if ra is not None else math.nan,
                "impact_b": ib if rb is not None else math.nan,
                "impact_change": ib - ia,
                "message": shown["message"],
            }
        )
    columns = ["kind", "group", "change", "impact_a", "impact_b", "impact_change", "message"]
    out = pd.DataFrame(rows, columns=columns)
    order = np.argsort(-out["impact_change"].abs().to_numpy(float), kind="stable")
    ranked: pd.DataFrame = out.iloc[order].reset_index(drop=True)
    return ranked


def _finding_change(ra: Any, rb: Any, ia: float, ib: float) -> str:
    if ra is None:
        return "appeared"
    if rb is None:
        return "went away"
    moved = abs(ib - ia)
    return "changed" if moved > CHANGED_MIN_S and moved > CHANGED_SHARE * max(ia, ib) else "same"


def _findings_by_key(df: pd.DataFrame | None) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The highest-impact finding per (kind, group)."""
    if df is None or not len(df):
        return {}
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for record in df.to_dict("records"):
        row: dict[str, Any] = {c: record.get(c) for c in FINDING_COLUMNS}
        row["impact_s"] = _number(row["impact_s"])
        key = (str(row["kind"]), _text(row["group"]))
        if key not in out or row["impact_s"] > out[key]["impact_s"]:
            out[key] = row
    return out


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _text(value: Any) -> str:
    """A cell as text ("" for None/NaN; lists joined, as for a chain of groups)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, list | tuple | np.ndarray):
        return " -> ".join(map(str, value))
    return str(value)


# ------------------------------------------------------------------ the value
@dataclass(frozen=True)
class Side:
    """The run-wide figures of one side of a comparison."""

    id: str
    wall_time: float
    tasks: int
    peak_memory: float

    @classmethod
    def of(cls, run: Run) -> Side:
        """The figures of ``run``."""
        n = len(run.raw("tasks", keys=False)["start"])
        return cls(str(run.meta.id), wall_time(run), n, peak_memory(run))


@dataclass(frozen=True, repr=False)
class Comparison:
    """Two runs compared (``a`` the baseline, ``b`` after); see :func:`compare`."""

    a: Run
    b: Run
    #: per group (see :func:`compare_groups`), biggest change of time first
    groups: pd.DataFrame
    #: per function (see :func:`compare_functions`), biggest change of self time first
    functions: pd.DataFrame
    #: findings matched by kind and group (see :func:`compare_findings`)
    findings: pd.DataFrame
    before: Side
    after: Side
    #: what could not be compared (e.g. findings that failed), in plain words
    notes: list[str] = field(default_factory=list)

    @property
    def wall_time_change(self) -> float:
        """Seconds of wall time gained (positive: ``b`` took longer)."""
        return self.after.wall_time - self.before.wall_time

    @property
    def tasks_change(self) -> int:
        """Tasks in ``b`` minus tasks in ``a``."""
        return self.after.tasks - self.before.tasks

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable dict: the run-wide changes and the three tables (NaN as
        None; the functions table cut to its first 50 rows)."""
        wa, wb = self.before.wall_time, self.after.wall_time
        summary: dict[str, Any] = _clean(
            {
                "a": vars(self.before),
                "b": vars(self.after),
                "wall_time": {"a": wa, "b": wb, "change": wb - wa, "relative": _ratio(wb - wa, wa)},
                "tasks": {
                    "a": self.before.tasks,
                    "b": self.after.tasks,
                    "change": self.tasks_change,
                },
                "peak_memory": {
                    "a": self.before.peak_memory,
                    "b": self.after.peak_memory,
                    "change": self.after.peak_memory - self.before.peak_memory,
                },
                "groups": self.groups.to_dict("records"),
                "functions": self.functions.head(50).to_dict("records"),
                "findings": self.findings.to_dict("records"),
                "notes": list(self.notes),
            }
        )
        return summary

    def to_text(self, rows: int = SHOWN) -> str:
        """A plain-text report: run-wide changes, then the groups, findings and functions
        that changed most (``rows`` of each)."""
        from .export._diff_tables import text_report

        return text_report(self, rows)

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        from .export._diff_tables import html_report

        return f'<div class="dp-compare">{html_report(self, SHOWN)}</div>'

    def to_html(self, path: str | os.PathLike[str], title: str | None = None) -> str:
        """A self-contained HTML page (tables and a differential flame graph, no network
        request); returns the path written."""
        from .export._diff import to_html
        from .export._diff_tables import html_report

        heading = title or f"daskprofile diff: {self.before.id} \u2192 {self.after.id}"
        return to_html(
            path,
            heading,
            html_report(self, rows=None),
            (self.a.stacks, seconds_per_sample(self.a)),
            (self.b.stacks, seconds_per_sample(self.b)),
        )


def _ratio(change: float, base: float) -> float:
    return change / base if base and math.isfinite(base) else math.nan


def _clean(value: Any) -> Any:
    """NaN/inf -> None and numpy scalars -> Python, recursively (for JSON)."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def compare(a: Run | str | os.PathLike[str], b: Run | str | os.PathLike[str]) -> Comparison:
    """Compare run ``a`` (the baseline) with run ``b`` (after a change); each a Run or the
    path of a saved run (``ValueError`` naming a file that cannot be read)."""
    ra, rb = as_run(a, "a"), as_run(b, "b")
    notes: list[str] = []
    found = []
    for name, run in (("a", ra), ("b", rb)):
        try:
            found.append(run_findings(run))
        except Exception as exc:  # the rest of the comparison stands without them
            notes.append(f"findings of run {name} could not be computed: {exc!r}")
            found.append(None)
    return Comparison(
        a=ra,
        b=rb,
        groups=compare_groups(group_stats(ra), group_stats(rb)),
        functions=compare_functions(function_stats(ra), function_stats(rb)),
        findings=compare_findings(*found),
        before=Side.of(ra),
        after=Side.of(rb),
        notes=notes,
    )


__all__ = ["Comparison", "compare", "compare_findings"]
