"""Collapsed stacks (``group;outer;...;inner count``) for flamegraph.pl, inferno, speedscope."""

from __future__ import annotations

from ..stacktree import to_folded_lines
from ._common import PathLike, RunLike, write_text


def to_folded(run: RunLike, path: PathLike) -> str:
    """Write the run's sampled stacks as collapsed-stack lines; return the path written.

    One line per distinct stack: the task group, then frames outermost first as
    ``function (file:line)``, then the samples whose innermost frame it is.
    """
    lines = to_folded_lines(run.stacks)
    return write_text(path, "".join(f"{line}\n" for line in lines))
