"""A finished run's protocol messages, reduced to fit a notebook output (the inline view).

The inline view (:mod:`daskprofile.jupyter.inline`) draws a run with the panel's own code
from the messages the panel gets when a finished run is replayed (:meth:`Feed.replay`).
A notebook keeps every output, so these messages are bounded here, whatever the run's
size, at the cost of detail the notes name (the view shows them):

* task rows (and a cluster's actions and transfers) beyond a cap are merged, per lane and
  group (and status and span), into busy bars where tasks are closer than a gap, the
  smallest (doubling from a pixel at 64x zoom) that meets the cap; a merged bar's hover
  names how many tasks it holds (:attr:`Light.merged`);
* resource, cache and memory lines keep the first, last, minimum and maximum of each time
  bin (their shape at any zoom the view offers);
* stack samples are binned in time (fewer cycles) and frames below a share of the run's
  samples folded into their caller;
* failures listed, their tracebacks, task keys and function sources are capped.

Everything here is pure (no Jupyter): messages in, messages out.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import stacktree
from ..export._lod import decimate_rows
from ..record.cursors import frozen_cursors
from . import encode
from .feed import Feed

__all__ = ["Budget", "Light", "light_messages", "payload_bytes"]

log = logging.getLogger("daskprofile")
Message = encode.Message
#: columnar types reduced by merging rows into bars
MERGED = ("tasks", "actions", "transfers")
#: columnar types reduced by decimating lines
LINES = ("resources", "cache", "memory")
#: message types rebuilt here (the others pass through in order)
REBUILT = frozenset({*MERGED, *LINES, "stacks", "exceptions", "keys", "sources", "reruns"})
#: merged bars start from a gap of a pixel of a view PIXELS wide zoomed in ZOOM times (the
#: gap doubles until the bars fit their cap)
PIXELS = 2_000
ZOOM = 64


@dataclass(frozen=True)
class Budget:
    """Caps of the reduced messages (bytes are of the JSON the view receives)."""

    tasks: int = 3_000
    actions: int = 1_500
    transfers: int = 1_000
    #: points of all resource, cache and memory lines together
    points: int = 1_600
    stack_bytes: int = 36_000
    stack_bins: int = 24
    keys_bytes: int = 16_000
    exceptions: int = 20
    traceback_chars: int = 2_000
    sources_bytes: int = 24_000

    def scaled(self, factor: float) -> Budget:
        """This budget with every cap times ``factor`` (at least 1)."""

        def s(v: int) -> int:
            return max(1, int(v * factor))

        return Budget(
            tasks=s(self.tasks),
            actions=s(self.actions),
            transfers=s(self.transfers),
            points=s(self.points),
            stack_bytes=s(self.stack_bytes),
            stack_bins=s(self.stack_bins),
            keys_bytes=s(self.keys_bytes),
            exceptions=s(self.exceptions),
            traceback_chars=s(self.traceback_chars),
            sources_bytes=s(self.sources_bytes),
        )


@dataclass
class Light:
    """The reduced messages of a run and what was reduced (sentences for the view)."""

    messages: list[Message]
    notes: list[str] = field(default_factory=list)
    #: tasks in each bar of the ``tasks`` message when some were merged, else None
    merged: np.ndarray | None = None


def light_messages(
    run: Any, title: str | None = None, budget: Budget | None = None, limit: int = 0
) -> Light:
    """The replay of finished ``run``, reduced to ``budget``; with ``limit`` (bytes of
    :func:`payload_bytes`), the budget is scaled down until the messages fit it."""
    budget = budget or Budget()
    cursors = frozen_cursors(run)
    replay = _with_sources(Feed(run, cursors, title).replay(), run)
    keys = cursors.keys
    light = _reduce(replay, budget, keys)
    for _ in range(4):
        size = payload_bytes(light.messages, light.merged)
        if not limit or size <= limit:
            break
        budget = budget.scaled(max(0.2, 0.9 * limit / size))
        light = _reduce(replay, budget, keys)
    return light


def _with_sources(replay: list[Message], run: Any) -> list[Message]:
    """``replay`` with a ``sources`` message (protocol 1.3) of the run's sampled functions
    (the publisher adds it per panel; a replay has none). A lookup that fails leaves the
    view without source text, never without a view."""
    if not replay or any(d["type"] == "sources" for d, _ in replay):
        return replay
    try:
        found = dict(getattr(run, "sources", None) or {})
        if not found:
            return replay
        return [*replay, encode.sources(str(replay[0][0]["run"]), found)]
    except Exception:
        log.warning("daskprofile: no function sources for the inline view", exc_info=True)
        return replay


def payload_bytes(messages: Iterable[Message], merged: np.ndarray | None = None) -> int:
    """Bytes of ``messages`` (and of the ``merged`` counts) as the inline view's JSON holds
    them (buffers in base64)."""
    total = 0 if merged is None else 4 * math.ceil(4 * len(merged) / 3)
    for data, buffers in messages:
        total += len(_json(data)) + sum(4 * math.ceil(len(b) / 3) + 3 for b in buffers) + 8
    return total


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- the reduction


def _reduce(
    replay: list[Message], budget: Budget, keys: Callable[[list[int]], list[str]] | None
) -> Light:
    """Structure first (order kept), then the reduced data, then progress and the end."""
    head = [m for m in replay if m[0]["type"] not in REBUILT | {"progress", "run_end"}]
    tail = [m for m in replay if m[0]["type"] in ("progress", "run_end")]
    by_type: dict[str, list[Message]] = {}
    for m in replay:
        by_type.setdefault(m[0]["type"], []).append(m)
    run = str(replay[0][0]["run"]) if replay else ""
    notes: list[str] = []
    data: list[Message] = []
    tasks = _merge_table("tasks", by_type.get("tasks", []), budget.tasks, run, notes)
    merged: np.ndarray | None = None
    if tasks is not None:
        merged = tasks.count if (tasks.count > 1).any() else None
        data.append(tasks.message)
        data += _keys(run, tasks, keys, budget.keys_bytes)
        data += _reruns(by_type.get("reruns", []), tasks)
        tail = [_finding_bars(m, tasks) if m[0]["type"] == "run_end" else m for m in tail]
    for kind, cap in (("actions", budget.actions), ("transfers", budget.transfers)):
        table = _merge_table(kind, by_type.get(kind, []), cap, run, notes)
        if table is not None:
            data.append(table.message)
    data += _lines(by_type, budget.points, notes)
    data += _exceptions(by_type.get("exceptions", []), budget, notes)
    stacks = _stacks(by_type.get("stacks", []), budget, notes)
    # a function's text comes before the stacks that hold it, as the panel gets it
    data += _sources(by_type.get("sources", []), stacks, budget.sources_bytes, notes)
    data += stacks
    return Light(head + data + tail, notes, merged)


# ---------------------------------------------------------------- bars


@dataclass
class _Merged:
    """A columnar table after merging: its message and where its rows went."""

    message: Message
    count: np.ndarray  # rows merged in each bar
    busy: np.ndarray  # summed duration of each bar's rows
    index: np.ndarray  # protocol row index of each bar's first row (tasks, actions)
    rows: np.ndarray  # protocol row index of every row, in bar order (tasks, actions)

    def bar_of(self) -> dict[int, int]:
        """Protocol row index -> its bar."""
        bars = np.repeat(np.arange(len(self.count)), self.count)
        return dict(zip(self.rows.tolist(), bars.tolist(), strict=True))


#: per merged type: columns that tell bars apart, the start/stop columns, summed column
_MERGE_SPEC: dict[str, tuple[tuple[str, ...], str, str, str | None]] = {
    "tasks": (("worker", "group", "status", "span"), "start", "stop", None),
    "actions": (("worker", "action", "group"), "start", "stop", "bytes"),
    "transfers": (("source", "destination", "incoming", "type"), "start", "stop", "bytes"),
}


def _concat(kind: str, messages: Sequence[Message]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The rows of ``messages`` as float64 times (since t0) and wire-typed columns."""
    parts = [encode.decode(d, b) for d, b in messages]
    names = list(dict.fromkeys(name for p in parts for name in p["columns"]))
    cols = {name: np.concatenate([_column(p, name) for p in parts]) for name in names}
    if kind in ("tasks", "actions"):
        cols["_index"] = np.concatenate(
            [p["first"] + np.arange(p["n"], dtype=np.int64) for p in parts]
        )
    return cols, names


def _column(part: Mapping[str, Any], name: str) -> np.ndarray:
    """Column ``name`` of a decoded batch: times in seconds since t0, zeros if absent (a
    ``span`` column that only later batches carry)."""
    if name in part["times"]:
        return np.asarray(part["times"][name])
    if name in part["arrays"]:
        return np.asarray(part["arrays"][name])
    return np.zeros(int(part["n"]), np.int64)


def _merge_table(
    kind: str, messages: Sequence[Message], cap: int, run: str, notes: list[str]
) -> _Merged | None:
    """One message of ``kind`` with at most ``cap`` rows (close rows merged into bars)."""
    if not messages:
        return None
    cols, names = _concat(kind, messages)
    n = len(cols[names[0]])
    identity, start_col, stop_col, _ = _MERGE_SPEC[kind]
    start, stop = cols[start_col], cols[stop_col]
    code = _codes([cols[c] for c in identity if c in cols], n)
    order, first, gap = _bars(code, start, stop, cap)
    if gap is not None:
        notes.append(_merge_note(kind, n, len(first), gap))
    out = _reduced_columns(kind, cols, names, order, first)
    extra = _table_extra(kind, messages)
    message = encode.table(kind, run, out, 0 if kind != "transfers" else None, **extra)
    index = cols.get("_index", np.arange(n))[order]
    count = np.diff(np.append(first, n))
    duration = np.maximum(stop[order] - start[order], 0.0)
    busy = np.add.reduceat(duration, first) if n else duration
    return _Merged(message, count, busy, index[first], index)


def _bars(
    code: np.ndarray, start: np.ndarray, stop: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """(row order, first sorted row of each bar, the gap used or None: no merging) for
    at most ``cap`` bars, merging with the smallest gap that meets it."""
    n = len(code)
    if n <= cap:
        every = np.arange(n)
        return every, every, None
    span = float(np.nanmax(stop) - min(float(np.nanmin(start)), 0.0)) or 1.0
    gap = span / (PIXELS * ZOOM)
    order, first = _merge(code, start, stop, gap)
    while len(first) > cap:
        gap *= 2
        order, first = _merge(code, start, stop, gap)
    return order, first, gap


def _reduced_columns(
    kind: str, cols: Mapping[str, np.ndarray], names: Sequence[str], order: Any, first: Any
) -> dict[str, np.ndarray]:
    """Each column per bar: the latest stop, the earliest submit, summed bytes, else the
    first row's value."""
    _, _, stop_col, summed = _MERGE_SPEC[kind]
    out: dict[str, np.ndarray] = {}
    for name in names:
        values = cols[name][order]
        if not len(values):
            out[name] = values
        elif name == stop_col:
            out[name] = np.maximum.reduceat(values, first)
        elif name == "submit":
            out[name] = np.fmin.reduceat(values, first)
        elif name == summed:
            out[name] = np.add.reduceat(np.nan_to_num(values), first)
        else:
            out[name] = values[first]
    return out


def _table_extra(kind: str, messages: Sequence[Message]) -> dict[str, Any]:
    if kind != "transfers":
        return {}
    addresses: list[str] = []
    types: list[str] = []  # protocol 1.3: type names of the data moved
    for data, _ in messages:
        addresses += list(data.get("addresses") or [])
        types += list(data.get("types") or [])
    return {"addresses": addresses, "types": types}


def _codes(columns: Sequence[np.ndarray], n: int) -> np.ndarray:
    """One int64 per row telling its identity columns' values apart."""
    code = np.zeros(n, np.int64)
    for col in columns:
        values = np.asarray(col, np.int64)
        code = code * (int(values.max(initial=0)) + 1) + values
    return code


def _merge(
    code: np.ndarray, start: np.ndarray, stop: np.ndarray, gap: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by (code, start), and the first sorted position of each bar: rows of
    one code whose start is within ``gap`` of the bar's furthest stop so far join it."""
    order = np.lexsort((start, code))
    c, s, e = code[order], start[order], stop[order]
    n = len(order)
    new = np.ones(n, bool)
    if n > 1:
        same = c[1:] == c[:-1]
        seg = np.cumsum(np.r_[True, ~same]) - 1
        # running max of stops within each code: offset codes so maxima never leak across
        lo = min(float(np.nanmin(s)), 0.0)
        width = float(np.nanmax(e)) - lo + 1.0
        reach = np.maximum.accumulate(np.nan_to_num(e - lo) + seg * width) - seg * width + lo
        new[1:] = ~same | (s[1:] > reach[:-1] + gap)
    return order, np.flatnonzero(new)


def _merge_note(kind: str, n: int, bars: int, gap: float) -> str:
    what, where = {
        "tasks": ("tasks", "on each lane, tasks of a group"),
        "actions": ("worker actions", "on each lane, actions of a kind"),
        "transfers": ("transfers", "between two workers, transfers"),
    }[kind]
    return (
        f"{n:,} {what} drawn as {bars:,} bars: {where} closer than {_duration(gap)} "
        "are merged (hover a bar for how many it holds)."
        if kind == "tasks"
        else f"{n:,} {what} drawn as {bars:,} bars: {where} closer than {_duration(gap)} "
        "are merged."
    )


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def _keys(
    run: str,
    tasks: _Merged,
    keys: Callable[[list[int]], list[str]] | None,
    budget: int,
) -> list[Message]:
    """A ``keys`` message: the keys of bars of one task, the longest first, while the
    budget lasts (merged bars are named by :attr:`Light.merged`)."""
    bars: list[int] = []
    labels: list[str] = []
    single = np.flatnonzero(tasks.count == 1)
    if keys is not None and len(single):
        longest = single[np.argsort(-tasks.busy[single], kind="stable")]
        used = 0
        step = 256
        for lo in range(0, len(longest), step):
            part = longest[lo : lo + step].tolist()
            names = keys([int(tasks.index[b]) for b in part])
            for b, name in zip(part, names, strict=True):
                used += len(name.encode()) + 8
                if used > budget:
                    break
                bars.append(b)
                labels.append(name)
            if used > budget:
                break
    if not bars:
        return []
    return [encode.keys(run, bars, labels)]


def _reruns(messages: Sequence[Message], tasks: _Merged) -> list[Message]:
    """``reruns`` with their rows renumbered as bars (one entry per bar)."""
    out = []
    bar_of = tasks.bar_of() if messages else {}
    for data, _ in messages:
        seen: set[int] = set()
        rows, why, workers = [], [], []
        for row, w, worker in zip(data["rows"], data["why"], data["workers"], strict=True):
            bar = bar_of.get(int(row))
            if bar is not None and bar not in seen:
                seen.add(bar)
                rows.append(bar)
                why.append(w)
                workers.append(worker)
        if rows:
            out.append(encode.reruns(str(data["run"]), rows, why, workers))
    return out


def _finding_bars(message: Message, tasks: _Merged) -> Message:
    """``run_end`` with the task ``rows`` of its summary's findings renumbered as bars (a
    chain's bars in order, each once), so that the view highlights the right ones."""
    data, buffers = message
    summary = data.get("summary")
    if not isinstance(summary, Mapping):
        return message
    found = summary.get("findings")
    if not isinstance(found, list) or not any(
        isinstance(f, Mapping) and "rows" in f for f in found
    ):
        return message
    order = np.argsort(tasks.rows, kind="stable")
    sorted_rows = tasks.rows[order]
    bars = np.repeat(np.arange(len(tasks.count)), tasks.count)[order]
    renumbered = [
        {**f, "rows": _as_bars(f["rows"], sorted_rows, bars)}
        if isinstance(f, Mapping) and isinstance(f.get("rows"), list)
        else f
        for f in found
    ]
    return {**data, "summary": {**summary, "findings": renumbered}}, buffers


def _as_bars(rows: list[int], sorted_rows: np.ndarray, bars: np.ndarray) -> list[int]:
    """The bars of protocol rows ``rows`` (``bars[i]``: the bar of ``sorted_rows[i]``), in
    order, each once; rows not there are left out."""
    if not len(sorted_rows) or not rows:
        return []
    wanted = np.asarray(rows, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_rows, wanted), len(sorted_rows) - 1)
    hit = bars[at][sorted_rows[at] == wanted]
    return list(dict.fromkeys(hit.tolist()))


# ---------------------------------------------------------------- lines


#: per line type: the value columns whose extremes are kept
_LINE_VALUES = {
    "resources": ("cpu", "memory"),
    "cache": ("metric",),
    "memory": ("managed", "unmanaged", "spilled"),
}


def _lines(by_type: Mapping[str, list[Message]], points: int, notes: list[str]) -> list[Message]:
    """Resource, cache and memory batches, one per series, within ``points`` rows."""
    series: list[tuple[str, dict[str, Any], list[Message]]] = []
    for kind in LINES:
        groups: dict[Any, list[Message]] = {}
        for m in by_type.get(kind, []):
            groups.setdefault(m[0].get("source"), []).append(m)
        for messages in groups.values():
            series.append((kind, messages[0][0], messages))
    if not series:
        return []
    per = max(64, points // len(series))
    out: list[Message] = []
    before = after = 0
    for kind, head, messages in series:
        cols, names = _concat(kind, messages)
        n = len(cols["time"])
        keep = _line_rows(kind, cols, per)
        before += n
        after += len(keep)
        reduced = {name: cols[name][keep] for name in names}
        extra: dict[str, Any] = {"source": head.get("source")}
        if kind == "memory":
            extra["limit"] = int(head.get("limit") or 0)
        out.append(encode.table(kind, str(head["run"]), reduced, **extra))
    if after < before:
        notes.append(
            f"CPU, memory and cache lines: {after:,} of {before:,} samples kept "
            "(the first, last, lowest and highest of each time bin)."
        )
    return out


def _line_rows(kind: str, cols: Mapping[str, np.ndarray], points: int) -> np.ndarray:
    """Rows of one series to keep: all if few, else per value column the extremes of
    ``points / 4`` time bins (per group for cache lines)."""
    n = len(cols["time"])
    if n <= points:
        return np.arange(n)
    order = np.argsort(cols["time"], kind="stable")
    keep: list[np.ndarray] = []
    parts = [order]
    if kind == "cache":
        group = cols["group"][order]
        parts = [order[group == g] for g in np.unique(group)]
    bins = max(1, points // (4 * len(parts) * len(_LINE_VALUES[kind])))
    for rows in parts:
        x = cols["time"][rows]
        for name in _LINE_VALUES[kind]:
            keep.append(rows[decimate_rows(x, np.nan_to_num(cols[name][rows]), bins)])
    rows = np.unique(np.concatenate(keep))
    return rows[np.argsort(cols["time"][rows], kind="stable")]


# ---------------------------------------------------------------- failures, stacks, sources


def _exceptions(messages: Sequence[Message], budget: Budget, notes: list[str]) -> list[Message]:
    """The first failures (tracebacks cut), counting the others as not kept."""
    if not messages:
        return []
    rows: list[dict[str, Any]] = []
    dropped = 0
    for data, _ in messages:
        rows += data["rows"]
        dropped = max(dropped, int(data.get("dropped") or 0))
    kept = [_cut_failure(r, budget.traceback_chars) for r in rows[: budget.exceptions]]
    left = len(rows) - len(kept)
    if left:
        notes.append(f"Failures: the first {len(kept):,} of {len(rows):,} are listed.")
    first = int(messages[0][0].get("first") or 0)
    run = str(messages[0][0]["run"])
    return [encode.exceptions(run, kept, first, dropped + left)]


def _cut_failure(row: Mapping[str, Any], chars: int) -> dict[str, Any]:
    out = dict(row)
    for name, limit in (("traceback", chars), ("message", max(200, chars // 4))):
        text = out.get(name)
        if isinstance(text, str) and len(text) > limit:
            out[name] = text[: limit // 2] + "\n… (cut) …\n" + text[-limit // 2 :]
    return out


#: shares of the run's samples below which frames are folded into their caller, tried in
#: turn with the number of time bins until the stacks fit their budget
_PRUNE_STEPS = ((1.0, 0.0), (1.0, 1 / 4000), (0.34, 1 / 2000), (0.34, 1 / 500), (0.0, 1 / 500),
                (0.0, 1 / 100), (0.0, 1 / 30))  # fmt: skip


def _stacks(messages: Sequence[Message], budget: Budget, notes: list[str]) -> list[Message]:
    """``stacks`` in at most ``stack_bins`` time bins, small frames folded, within bytes."""
    if not messages:
        return []
    run = str(messages[0][0]["run"])
    total = stacktree.merge_groups(*(d["trees"] for d, _ in messages))
    samples = sum(int(t.get("count", 0)) for t in total.values())
    out: list[Message] = []
    for share_bins, share in _PRUNE_STEPS:
        bins = max(1, min(len(messages), round(budget.stack_bins * share_bins) or 1))
        keep = _kept_paths(total, samples * share) if share else None
        out = [
            encode.stacks(run, t0, t1, {g: _pruned(t, keep, g) for g, t in trees.items()})
            for t0, t1, trees in _binned(messages, bins)
        ]
        if payload_bytes(out) <= budget.stack_bytes:
            break
    if len(out) < len(messages):
        notes.append(
            f"Stack samples: {len(messages):,} sampler cycles grouped into {len(out):,} "
            f"time bin{'' if len(out) == 1 else 's'} (a selected range picks whole bins)."
        )
    if _folded(out, total):
        notes.append("Flame graph: frames with very few samples are folded into their caller.")
    return out


def _binned(messages: Sequence[Message], bins: int) -> list[tuple[float, float, dict[str, Any]]]:
    """Consecutive cycles merged into ``bins`` groups of about equal counts."""
    edges = np.linspace(0, len(messages), bins + 1).round().astype(int)
    out = []
    for lo, hi in itertools.pairwise(edges.tolist()):
        part = [d for d, _ in messages[lo:hi]]
        if part:
            trees = stacktree.merge_groups(*(d["trees"] for d in part))
            out.append((float(part[0]["t_start"]), float(part[-1]["t_end"]), trees))
    return out


def _kept_paths(total: Mapping[str, Any], least: float) -> set[tuple[str, ...]]:
    """Paths ``(group, identifier, ...)`` of the merged trees' nodes with >= ``least``."""
    keep: set[tuple[str, ...]] = set()
    todo: list[tuple[tuple[str, ...], Any]] = [((g,), tree) for g, tree in total.items()]
    while todo:
        path, node = todo.pop()
        keep.add(path)
        for ident, child in node.get("children", {}).items():
            if child.get("count", 0) >= least:
                todo.append(((*path, ident), child))
    return keep


def _pruned(tree: Mapping[str, Any], keep: set[tuple[str, ...]] | None, group: str) -> Any:
    """``tree`` without the nodes whose path is not in ``keep`` (all kept when None)."""
    if keep is None:
        return tree

    def walk(node: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        children = {
            ident: walk(child, (*path, ident))
            for ident, child in node.get("children", {}).items()
            if (*path, ident) in keep
        }
        return {**node, "children": children}

    return walk(tree, (group,))


def _folded(out: Sequence[Message], total: Mapping[str, Any]) -> bool:
    """Whether some node of ``total`` is missing from every bin of ``out``."""

    def count(trees: Iterable[Any]) -> int:
        n, todo = 0, list(trees)
        while todo:
            node = todo.pop()
            n += 1
            todo += list(node.get("children", {}).values())
        return n

    binned = stacktree.merge_groups(*(d["trees"] for d, _ in out))
    return count(binned.values()) < count(total.values())


def source_bytes(ident: str, source: Any) -> int:
    """Bytes one function's entry of a ``sources`` message costs the budget."""
    return len(_json(source)) + len(ident) + 4


def _sources(
    messages: Sequence[Message], stacks: Sequence[Message], budget: int, notes: list[str]
) -> list[Message]:
    """``sources`` (protocol 1.3) of the functions still in the stacks, the most sampled
    first, within ``budget`` bytes."""
    if not messages:
        return []
    sources: dict[str, Any] = {}
    for data, _ in messages:
        sources.update(data.get("sources") or {})
    weight: dict[str, int] = {}
    todo = [t for d, _ in stacks for t in d["trees"].values()]
    while todo:
        node = todo.pop()
        ident = node.get("identifier")
        weight[ident] = weight.get(ident, 0) + int(node.get("count", 0))
        todo += list(node.get("children", {}).values())
    ranked = sorted((i for i in sources if i in weight), key=lambda i: -weight[i])
    kept: dict[str, Any] = {}
    used = 0
    for ident in ranked:
        used += source_bytes(ident, sources[ident])
        if used > budget:
            break
        kept[ident] = sources[ident]
    if len(kept) < len(sources):
        notes.append(
            f"Source text kept for the {len(kept):,} most sampled function"
            f"{'' if len(kept) == 1 else 's'}."
        )
    if not kept:
        return []
    data = dict(messages[0][0], sources=kept)
    return [(data, [])]
