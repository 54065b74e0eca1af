"""Level of detail for big runs: merge short tasks into busy intervals, decimate lines.

The task stream of a run with many tasks is drawn from two parts:

- tasks at least ``min_px`` pixels wide at full view (drawn and hovered one by one, capped
  at ``max_tasks``, the longest kept);
- every other task merged, per lane and per group, into busy intervals: consecutive tasks
  whose gap is below one pixel become one interval that remembers how many tasks it holds
  and how long they ran. Its size is bounded by lanes x groups x pixels, whatever the
  number of tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import TaskArrays

#: below this many tasks every task is drawn individually
LOD_THRESHOLD = 50_000
#: the resolution merged intervals are computed at (a wide screen, with zoom headroom)
PIXELS = 4_000
#: merged intervals kept at most (coarser than a pixel beyond)
MAX_INTERVALS = 100_000


@dataclass(frozen=True)
class Busy:
    """Merged busy intervals: one row per (lane, group, run of close tasks)."""

    lane: np.ndarray  # int32
    group: np.ndarray  # int32
    start: np.ndarray  # float64
    stop: np.ndarray  # float64
    count: np.ndarray  # int64: tasks merged
    busy: np.ndarray  # float64: summed task time

    def __len__(self) -> int:
        return len(self.start)


def split_tasks(
    arrays: TaskArrays,
    *,
    threshold: int | None = None,
    pixels: int | None = None,
    min_px: float = 2.0,
    max_tasks: int = 20_000,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Indices of tasks drawn individually and of tasks to merge, and the pixel width (s).

    Below ``threshold`` tasks, all are individual and nothing is merged.
    """
    threshold = LOD_THRESHOLD if threshold is None else threshold
    pixels = PIXELS if pixels is None else pixels
    n = len(arrays)
    everything = np.arange(n)
    if n <= threshold:
        return everything, everything[:0], 0.0
    span = float(arrays.stop.max() - min(arrays.start.min(), 0.0)) or 1.0
    pixel = span / pixels
    duration = arrays.stop - arrays.start
    wide = np.flatnonzero(duration >= min_px * pixel)
    if len(wide) > max_tasks:
        wide = wide[np.argsort(duration[wide], kind="stable")[-max_tasks:]]
        wide.sort()
    short = np.ones(n, bool)
    short[wide] = False
    return wide, np.flatnonzero(short), pixel


def merge_busy(arrays: TaskArrays, rows: np.ndarray, gap: float) -> Busy:
    """Merge tasks ``rows`` per (lane, group) into intervals where gaps are <= ``gap``."""
    if not len(rows):
        empty_i, empty_f = np.empty(0, np.int32), np.empty(0)
        return Busy(empty_i, empty_i, empty_f, empty_f, np.empty(0, np.int64), empty_f)
    lane, group = arrays.lane[rows], arrays.group[rows]
    start, stop = arrays.start[rows], arrays.stop[rows]
    order = np.lexsort((start, group, lane))
    lane, group, start, stop = lane[order], group[order], start[order], stop[order]
    segment = np.ones(len(order), bool)
    segment[1:] = (lane[1:] != lane[:-1]) | (group[1:] != group[:-1])
    # running max of stops within each segment: offset segments so maxima never leak across
    seg_id = np.cumsum(segment) - 1
    span = float(max(stop.max(), start.max()) - min(start.min(), 0.0)) + 1.0
    base = min(float(start.min()), 0.0)
    reach = np.maximum.accumulate((stop - base) + seg_id * span) - seg_id * span + base
    new = segment.copy()
    new[1:] |= start[1:] > reach[:-1] + gap
    first = np.flatnonzero(new)
    return Busy(
        lane=lane[first].astype(np.int32),
        group=group[first].astype(np.int32),
        start=start[first],
        stop=np.maximum.reduceat(stop, first),
        count=np.diff(np.append(first, len(order))).astype(np.int64),
        busy=np.add.reduceat(np.maximum(stop - start, 0.0), first),
    )


def merge_bounded(
    arrays: TaskArrays, rows: np.ndarray, gap: float, cap: int | None = None
) -> tuple[Busy, float]:
    """:func:`merge_busy`, coarsening the gap 4x at a time until at most ``cap`` intervals.

    Sparse, interleaved groups can leave one interval per task at pixel resolution; the cap
    keeps the file bounded whatever the shape of the run. Returns the gap used.
    """
    cap = MAX_INTERVALS if cap is None else cap
    busy = merge_busy(arrays, rows, gap)
    while len(busy) > cap and gap > 0:
        gap *= 4
        busy = merge_busy(arrays, rows, gap)
    return busy, gap


def decimate(x: np.ndarray, y: np.ndarray, bins: int = 2_000) -> tuple[np.ndarray, np.ndarray]:
    """Keep a line's shape with few points: first, min, max and last per time bin, in order.

    Lines with fewer than ``4 * bins`` points are returned unchanged.
    """
    if len(x) <= 4 * bins:
        return x, y
    order = np.argsort(x, kind="stable")
    idx = decimate_rows(x[order], y[order], bins)
    return x[order][idx], y[order][idx]


def decimate_rows(x: np.ndarray, y: np.ndarray, bins: int = 2_000) -> np.ndarray:
    """Rows of a line sorted by ``x`` that :func:`decimate` keeps (all below ``4 * bins``):
    whole rows, so that several columns (stacked areas) can be thinned together."""
    n = len(x)
    if n <= 4 * bins:
        return np.arange(n)
    edges = np.linspace(x[0], x[-1], bins + 1)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    first = np.flatnonzero(np.r_[True, which[1:] != which[:-1]])
    last = np.r_[first[1:] - 1, n - 1]
    keep = [first, last]
    for reduce in (np.minimum, np.maximum):
        extreme = reduce.reduceat(y, first)
        member = y == np.repeat(extreme, np.diff(np.r_[first, n]))
        pos = np.flatnonzero(member)
        # the first index reaching the extreme in each bin
        bin_of = np.searchsorted(first, pos, side="right") - 1
        keep.append(pos[np.r_[True, bin_of[1:] != bin_of[:-1]]])
    rows: np.ndarray = np.unique(np.concatenate(keep))
    return rows
