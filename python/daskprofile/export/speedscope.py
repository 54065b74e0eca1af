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

from ..stacktree import to_shared_frames
from ._common import (
    PathLike,
    RunLike,
    TaskArrays,
    task_arrays,
    write_text,
)

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def _clean(name: str) -> str:
    """A group name on one line."""
    return name.replace("\n", " ").replace("\r", " ")


def _sampled_profiles(run: RunLike) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The shared frame table, and one sampled profile per group (weights: samples)."""
    flat = to_shared_frames(run.stacks)
    profiles = []
    for group in sorted(flat.profiles):
        samples, weights = flat.profiles[group]
        profiles.append(
            {"type": "sampled", "name": f"{_clean(group)} (stack samples)", "unit": "none",
             "startValue": 0, "endValue": sum(weights), "samples": samples,
             "weights": weights}
        )  # fmt: skip
    return flat.frames, profiles


def _lane_events(arrays: TaskArrays, lane: int, ids: list[int]) -> list[dict[str, Any]]:
    """Open/close events of one lane's tasks (frame ``ids[group]``); overlaps are clipped."""
    rows = np.flatnonzero(arrays.lane == lane)
    rows = rows[np.argsort(arrays.start[rows], kind="stable")]
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


def _evented_profiles(arrays: TaskArrays, frames: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One evented profile per worker lane, spanning the whole run; adds group frames."""
    if not len(arrays):
        return
    ids = list(range(len(frames), len(frames) + len(arrays.groups)))
    frames.extend({"name": _clean(g)} for g in arrays.groups)
    t0 = float(min(0.0, arrays.start.min()))
    t1 = float(arrays.stop.max())
    for lane, label in enumerate(arrays.lanes):
        yield {
            "type": "evented",
            "name": f"tasks on {label}",
            "unit": "seconds",
            "startValue": t0,
            "endValue": t1,
            "events": _lane_events(arrays, lane, ids),
        }


def speedscope(run: RunLike) -> dict[str, Any]:
    """The run as a speedscope file object."""
    frames, profiles = _sampled_profiles(run)
    profiles.extend(_evented_profiles(task_arrays(run), frames))
    name = f"daskprofile run {run.meta.get('id', '')}".strip()
    return {
        "$schema": SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": "daskprofile",
    }


def to_speedscope(run: RunLike, path: PathLike) -> str:
    """Write the run as a speedscope JSON file; return the path written."""
    text = json.dumps(speedscope(run), separators=(",", ":"), allow_nan=False)
    return write_text(path, text)
