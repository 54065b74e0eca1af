"""Collapsed stacks (``group;outer;...;inner count``) for flamegraph.pl, inferno, speedscope."""

from __future__ import annotations

from collections.abc import Iterator

from ._common import PathLike, RunLike, frame_name, stack_paths, write_text


def _clean(text: str) -> str:
    """A frame name safe for the folded format: no ``;`` (separator) and no newline."""
    return text.replace(";", ":").replace("\n", " ").replace("\r", " ").strip() or "?"


def folded_lines(run: RunLike) -> Iterator[str]:
    """One ``group;frame;...;frame count`` line per distinct stack, groups in name order."""
    for group in sorted(run.stacks):
        prefix = _clean(str(group))
        for path, count in stack_paths(run.stacks[group]):
            frames = ";".join(_clean(frame_name(node)) for node in path)
            yield f"{prefix};{frames} {count}"


def to_folded(run: RunLike, path: PathLike) -> str:
    """Write the run's sampled stacks as collapsed-stack lines; return the path written."""
    lines = list(folded_lines(run))
    return write_text(path, "".join(f"{line}\n" for line in lines))
