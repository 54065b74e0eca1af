"""speedscope's file format (https://www.speedscope.app/file-format-schema.json).

One *sampled* profile per task group, built from the run's stack trees (weights are sample
counts), then one *evented* profile per worker lane: the tasks it ran, in time order, as
frames named after their group (seconds). The second kind lets speedscope's time-order
view show what each worker did even when no stacks were sampled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._common import (
    PathLike,
    RunLike,
    TaskArrays,
    Tree,
    frame_name,
    stack_paths,
    task_arrays,
    write_text,
)
from .folded import _clean

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


class _Frames:
    """The shared frame table: one entry per distinct (name, file, line)."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str, int | None], int] = {}

    def add(self, name: str, file: str = "", line: int | None = None) -> int:
        ident = (name, file, line)
        index = self._index.get(ident)
        if index is None:
            index = self._index[ident] = len(self.frames)
            frame: dict[str, Any] = {"name": name}
            if file:
                frame["file"] = file
            if line is not None:
                frame["line"] = line
            self.frames.append(frame)
        return index

    def add_node(self, node: Tree) -> int:
        desc = node.get("description") or {}
        line = desc.get("line_number")
        number = int(line) if isinstance(line, int | float) and not isinstance(line, bool) else None
        return self.add(frame_name(node), str(desc.get("filename") or ""), number)


def _sampled_profile(group: str, tree: Tree, frames: _Frames) -> dict[str, Any]:
    """A sampled profile of one group: one sample per distinct stack, weighted by count."""
    samples: list[list[int]] = []
    weights: list[int] = []
    for path, count in stack_paths(tree):
        samples.append([frames.add_node(node) for node in path])
        weights.append(count)
    total = sum(weights)
    return {
        "type": "sampled",
        "name": f"{_clean(group)} (stack samples)",
        "unit": "none",
        "startValue": 0,
        "endValue": total,
        "samples": samples,
        "weights": weights,
    }


def _lane_events(arrays: TaskArrays, lane: int, frames: _Frames) -> list[dict[str, Any]]:
    """Open/close events of one lane's tasks; overlaps (clock noise) are clipped away."""
    rows = np.flatnonzero(arrays.lane == lane)
    rows = rows[np.argsort(arrays.start[rows], kind="stable")]
    ids = [frames.add(_clean(g)) for g in arrays.groups]
    events: list[dict[str, Any]] = []
    last = -np.inf
    for i in rows.tolist():
        start = max(float(arrays.start[i]), last)
        stop = float(arrays.stop[i])
        if stop <= start:
            continue
        frame = ids[arrays.group[i]]
        events.append({"type": "O", "at": start, "frame": frame})
        events.append({"type": "C", "at": stop, "frame": frame})
        last = stop
    return events


def _evented_profiles(arrays: TaskArrays, frames: _Frames) -> Iterator[dict[str, Any]]:
    """One evented profile per worker lane, spanning the whole run."""
    if not len(arrays):
        return
    t0 = float(min(0.0, arrays.start.min()))
    t1 = float(arrays.stop.max())
    for lane, label in enumerate(arrays.lanes):
        yield {
            "type": "evented",
            "name": f"tasks on {label}",
            "unit": "seconds",
            "startValue": t0,
            "endValue": t1,
            "events": _lane_events(arrays, lane, frames),
        }


def speedscope(run: RunLike) -> dict[str, Any]:
    """The run as a speedscope file object."""
    frames = _Frames()
    profiles = [
        _sampled_profile(str(group), run.stacks[group], frames) for group in sorted(run.stacks)
    ]
    profiles.extend(_evented_profiles(task_arrays(run), frames))
    name = f"daskprofile run {run.meta.get('id', '')}".strip()
    return {
        "$schema": SCHEMA,
        "shared": {"frames": frames.frames},
        "profiles": profiles,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": "daskprofile",
    }


def to_speedscope(run: RunLike, path: PathLike) -> str:
    """Write the run as a speedscope JSON file; return the path written."""
    text = json.dumps(speedscope(run), separators=(",", ":"), allow_nan=False)
    return write_text(path, text)
