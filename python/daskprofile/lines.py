"""Hot lines of one function in a run: a table (``run.hot_lines``) and a printed view
like line_profiler's (``run.print_lines``).

Counts come from the stack trees' per-line samples (:func:`.stacktree.line_counts`):
inclusive, summed over every call path. Files are the mapped ones (:mod:`.codemap`), so a
function defined in ``__main__`` or a notebook cell is found under its own file (or
``"Cell In[N]"``) on every scheduler. Seconds are estimated per task group: a line's
share of the group's samples times the group's recorded task time; a group with no task
rows (a cluster's profiler-only samples, ``tasks=False``) falls back to samples x the
sampling interval. The recorded task time is exact, while the number of samples a task
gets depends on the GIL and the sampler's pace, so the first estimate is the truer one.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from . import codemap, stacktree

if TYPE_CHECKING:
    import pandas as pd

#: a :class:`daskprofile.run.Run` (not imported: the run imports this module)
Run = Any

__all__ = ["COLUMNS", "LineView", "hot_lines", "print_lines"]

COLUMNS = ["file", "line", "source", "samples", "seconds", "share"]
#: the sampling interval assumed when a run's options do not say
_DEFAULT_INTERVAL = 0.01

#: (identifier, file, line) -> [samples, seconds]
_Counts = dict[tuple[str, str, int], list[float]]


class LineView(str):
    """The text :func:`print_lines` printed; shown once in a notebook (not again as the
    cell's value)."""

    def _ipython_display_(self) -> None:
        return None


def _groups(run: Run, trees: Mapping[str, Any], group: object) -> dict[str, Any]:
    """The trees of ``group`` (all when None); ``ValueError``/``TypeError`` naming
    ``group`` when it is not a task group of the run."""
    if group is None:
        return dict(trees)
    if not isinstance(group, str):
        raise TypeError(f"group must be a task group name (str), got {type(group).__name__}")
    known = set(trees) | set(run.raw("tasks", keys=False)["groups"])
    if group not in known:
        names = ", ".join(repr(g) for g in sorted(known)[:20]) or "none"
        raise ValueError(f"group {group!r} is not a task group of this run (groups: {names})")
    return {group: trees[group]} if group in trees else {}


def _task_seconds(run: Run) -> dict[str, float]:
    """Recorded task time per group name."""
    tasks = run.raw("tasks", keys=False)
    names = list(tasks["groups"])
    if not names:
        return {}
    gid = np.asarray(tasks["group"], dtype=np.int64)
    duration = np.asarray(tasks["stop"], np.float64) - np.asarray(tasks["start"], np.float64)
    per_id = np.bincount(gid, weights=np.nan_to_num(duration), minlength=len(names))
    out: dict[str, float] = {}
    for name, seconds in zip(names, per_id.tolist(), strict=False):
        out[name] = out.get(name, 0.0) + seconds
    return out


def _seconds_per_sample(run: Run, trees: Mapping[str, Any]) -> dict[str, float]:
    """Per group: its task time / its samples, or the sampling interval (see the module)."""
    interval = run.meta.options.get("interval") or _DEFAULT_INTERVAL
    recorded = _task_seconds(run)
    out = {}
    for group, tree in trees.items():
        samples, seconds = int(tree.get("count", 0)), recorded.get(group, 0.0)
        out[group] = seconds / samples if samples > 0 and seconds > 0 else float(interval)
    return out


def _counts(run: Run, func_or_name: object, group: object) -> _Counts:
    trees = _groups(run, run.stacks, group)
    per_group = stacktree.line_counts(trees, func_or_name)
    scale = _seconds_per_sample(run, trees)
    out: _Counts = {}
    for g, lines in per_group.items():
        for key, n in lines.items():
            row = out.setdefault(key, [0, 0.0])
            row[0] += n
            row[1] += n * scale[g]
    return out


def _text(sources: Mapping[str, Mapping[str, Any]], ident: str, file: str, line: int) -> str:
    entry = sources.get(ident)
    if entry is not None:
        at = line - int(entry["start"])
        if 0 <= at < len(entry["text"]):
            return str(entry["text"][at])
    return codemap.getline(file, line).rstrip("\r\n")


def _totals(counts: _Counts) -> dict[str, float]:
    totals: dict[str, float] = {}
    for (ident, _, _), (n, _) in counts.items():
        totals[ident] = totals.get(ident, 0) + n
    return totals


def hot_lines(run: Run, func_or_name: object, group: object = None) -> pd.DataFrame:
    """See :meth:`daskprofile.run.Run.hot_lines`."""
    import pandas as pd

    counts = _counts(run, func_or_name, group)
    sources = run.sources if counts else {}
    totals = _totals(counts)
    rows = [
        (file, line, _text(sources, ident, file, line), int(n), float(s), n / totals[ident])
        for (ident, file, line), (n, s) in counts.items()
    ]
    rows.sort(key=lambda r: (-r[3], r[0], r[1]))
    types = {"line": "int64", "samples": "int64", "seconds": "float64", "share": "float64"}
    df: pd.DataFrame = pd.DataFrame(rows, columns=COLUMNS).astype(types)
    return df


# ---------------------------------------------------------------- the printed view


def _target_name(func_or_name: object) -> str:
    if isinstance(func_or_name, str):
        return func_or_name
    return str(getattr(func_or_name, "__qualname__", getattr(func_or_name, "co_name", "?")))


def _block(
    ident: str, counts: _Counts, sources: Mapping[str, Mapping[str, Any]], group: object
) -> list[str]:
    mine = {line: v for (i, _, line), v in counts.items() if i == ident}
    total_n = sum(n for n, _ in mine.values())
    total_s = sum(s for _, s in mine.values())
    name, _, rest = ident.partition(";")
    file, _, first = rest.rpartition(";")
    entry = sources.get(ident)
    numbers = set(mine)
    if entry is not None:
        numbers |= set(range(int(entry["start"]), int(entry["start"]) + len(entry["text"])))
    out = [
        f"Function: {name} at {file}:{first}" + (f" (group {group})" if group else ""),
        f"Samples: {int(total_n)}    Estimated time: {total_s:.6g} s",
        "",
        f"{'Line':>6} {'Samples':>9} {'Seconds':>11} {'% Share':>8}  Source",
        "=" * 72,
    ]
    for line in sorted(numbers):
        n, s = mine.get(line, (0, 0.0))
        text = _text(sources, ident, file, line)
        if n:
            out.append(f"{line:>6} {int(n):>9} {s:>11.6f} {100 * n / total_n:>8.1f}  {text}")
        else:
            out.append(f"{line:>6} {'':>9} {'':>11} {'':>8}  {text}")
    if entry is None:
        out.append("(source text not found: only the sampled lines are listed)")
    return out


def print_lines(
    run: Run, func_or_name: object, group: object = None, file: TextIO | None = None
) -> LineView:
    """See :meth:`daskprofile.run.Run.print_lines`."""
    counts = _counts(run, func_or_name, group)
    if counts:
        sources = run.sources
        totals = _totals(counts)
        order = sorted(totals, key=lambda i: -totals[i])
        blocks = [_block(i, counts, sources, group) for i in order]
        lines = [line for block in blocks for line in [*block, ""]][:-1]
    else:
        where = f" in group {group!r}" if group else ""
        lines = [f"No samples of {_target_name(func_or_name)}{where} in this run."]
    text = LineView("\n".join(lines) + "\n")
    print(text, end="", file=file if file is not None else sys.stdout)
    return text
