"""Helpers shared by the exporters: the Run surface they read, task arrays, colours, files.

Exporters read a Run through the small protocol below and nothing else.
"""

from __future__ import annotations

import colorsys
import hashlib
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

import numpy as np
import pandas as pd

from ..files import write_whole
from ..meta import RunMeta

PathLike: TypeAlias = "str | os.PathLike[str]"
Tree: TypeAlias = dict[str, Any]


class RunLike(Protocol):
    """The public surface of :class:`daskprofile.Run` that exporters read."""

    @property
    def meta(self) -> RunMeta: ...

    @property
    def tasks(self) -> pd.DataFrame: ...

    @property
    def resources(self) -> pd.DataFrame: ...

    @property
    def cache(self) -> pd.DataFrame: ...

    @property
    def exceptions(self) -> pd.DataFrame: ...

    @property
    def stacks(self) -> Mapping[str, Tree]: ...

    # cluster runs (empty tables elsewhere): see daskprofile.cluster_views
    @property
    def actions(self) -> pd.DataFrame: ...

    @property
    def transfers(self) -> pd.DataFrame: ...

    @property
    def memory(self) -> pd.DataFrame: ...

    @property
    def workers(self) -> pd.DataFrame: ...

    @property
    def reruns(self) -> pd.DataFrame: ...

    def bandwidth(self, by: str = "workers", dt: float = 1.0) -> pd.DataFrame: ...


@dataclass(frozen=True)
class TaskArrays:
    """The tasks of a run as numpy columns, lanes and groups as small integer codes."""

    key_column: pd.Series  # str keys, read through ``keys`` (converting all is costly)
    group: np.ndarray  # int32 index into ``groups``
    lane: np.ndarray  # int32 index into ``lanes``
    submit: np.ndarray  # float64 seconds since t0 (NaN if unknown)
    start: np.ndarray  # float64
    stop: np.ndarray  # float64
    error: np.ndarray  # bool: the task raised
    error_type: np.ndarray  # object (str or None)
    groups: list[str]
    lanes: list[str]
    #: int32 index into ``spans`` (-1: no span); None when the run has no span
    span: np.ndarray | None = None
    spans: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.start)

    def keys(self, rows: np.ndarray | list[int] | None = None) -> list[str]:
        """Keys of ``rows`` (all tasks if None), as Python strings."""
        column = self.key_column if rows is None else self.key_column.iloc[rows]
        return [str(k) for k in column.to_numpy(object)]


_NUMBER = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders ``thread 2`` before ``thread 10``."""
    return tuple(int(p) if p.isdigit() else p for p in _NUMBER.split(text))


def _codes(values: pd.Series, order: Any = None) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a string column and the names they index, in ``order``."""
    codes, names = pd.factorize(values, sort=order is None, use_na_sentinel=False)
    labels = [str(n) for n in names]
    if order is None:
        return codes.astype(np.int32), labels
    ranked = sorted(range(len(labels)), key=lambda i: order(labels[i]))
    remap = np.empty(len(labels), np.int32)
    remap[ranked] = np.arange(len(labels), dtype=np.int32)
    return remap[codes] if len(codes) else codes.astype(np.int32), [labels[i] for i in ranked]


def task_arrays(run: RunLike) -> TaskArrays:
    """Columns of ``run.tasks`` with a known start and stop, as numpy arrays."""
    df = run.tasks
    start, stop = df["start"].to_numpy(float), df["stop"].to_numpy(float)
    known = np.isfinite(start) & np.isfinite(stop)
    if not known.all():
        df, start, stop = df[known], start[known], stop[known]
    group, groups = _codes(df["group"])
    lane, lanes = _codes(df["worker"], order=natural_key)
    span, spans = _span_codes(df)
    return TaskArrays(
        key_column=df["key"].reset_index(drop=True),
        group=group,
        lane=lane,
        submit=df["submit"].to_numpy(float),
        start=start,
        stop=stop,
        error=(df["status"] != "ok").to_numpy(bool),
        error_type=df["error"].to_numpy(object),
        groups=groups,
        lanes=lanes,
        span=span,
        spans=spans,
    )


def _span_codes(df: pd.DataFrame) -> tuple[np.ndarray | None, list[str]]:
    """Each task's span as a code into the sorted span paths (-1: none); None without."""
    if "span" not in df or not df["span"].notna().any():
        return None, []
    named = df["span"].notna().to_numpy(bool)
    spans = sorted({str(s) for s in df["span"][named]})
    index = {s: i for i, s in enumerate(spans)}
    codes = np.full(len(df), -1, np.int32)
    codes[named] = [index[str(s)] for s in df["span"][named]]
    return codes, spans


def format_seconds(seconds: float) -> str:
    """``1.23 s``, ``45.6 ms``, ``789 us`` (three significant digits)."""
    if not math.isfinite(seconds):
        return "-"
    magnitude = abs(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("\u00b5s", 1e-6)):
        if magnitude >= scale or unit == "\u00b5s":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"  # pragma: no cover


def format_bytes(n: float) -> str:
    """``1.5 GB``, ``230 MB``, ..."""
    if not math.isfinite(n):
        return "-"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TB"  # pragma: no cover


def group_color(group: str) -> str:
    """A stable colour for a task group, derived from its name."""
    try:
        from .. import keys

        color = getattr(keys, "group_color", None)
        if callable(color):
            return str(color(group))
    except ImportError:
        pass
    digest = hashlib.blake2b(group.encode("utf-8", "replace"), digest_size=4).digest()
    hue = int.from_bytes(digest[:2], "big") / 65536
    light = 0.45 + (digest[2] / 255) * 0.15
    sat = 0.55 + (digest[3] / 255) * 0.3
    r, g, b = colorsys.hls_to_rgb(hue, light, sat)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


# -- stack trees -------------------------------------------------------------------------


def children(node: Tree) -> list[Tree]:
    """The children of a stack-tree node, heaviest first (ties by identifier)."""
    kids = node.get("children") or {}
    return sorted(kids.values(), key=lambda k: (-int(k.get("count", 0)), str(k.get("identifier"))))


def is_root(node: Tree) -> bool:
    """Whether a node is the synthetic root of a tree (not a real frame)."""
    desc = node.get("description") or {}
    return node.get("identifier") == "root" and not desc.get("filename")


def tree_total(tree: Tree) -> int:
    """Total samples of a tree."""
    return int(tree.get("count", 0))


# -- files -------------------------------------------------------------------------------


def write_text(path: PathLike, text: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """Write ``text`` (UTF-8) locally, or through fsspec for URLs / storage options."""
    target = os.fspath(path)
    if storage_options or "://" in target:
        import fsspec

        with fsspec.open(target, mode="w", compression="infer", **(storage_options or {})) as f:
            f.write(text)
        return target
    return write_whole(target, lambda f: f.write(text))  # whole or not at all


def as_runs(run_or_runs: RunLike | Sequence[RunLike]) -> list[RunLike]:
    """One run or several, as a list."""
    if isinstance(run_or_runs, Sequence):
        return list(run_or_runs)
    return [run_or_runs]
