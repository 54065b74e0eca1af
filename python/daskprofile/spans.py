"""Spans: named, nestable parts of a computation, on every scheduler.

::

    with daskprofile.span("load"):
        x = da.from_zarr(...)
        with daskprofile.span("clean"):      # nested: the span ("load", "clean")
            y = x[x > 0]
        y.sum().compute()

:class:`span` sets dask's ``span`` annotation in the shape ``distributed.span`` gives it
(``{"name": ("load", "clean"), "ids": (uuid, uuid)}``): on a cluster the scheduler's spans
extension sees the same spans as distributed's own, and ``distributed.span`` works on the
local schedulers too. A task belongs to the span its graph layer was annotated with (kept
where dask keeps layer annotations: delayed, or layers that are not fused), else to the span
that was open when the compute started, as on a cluster. Names are recorded as tuples;
views join them with ``"/"`` (:func:`path`).

Nothing is looked up per compute until a span has been opened in this process or one is
open when the compute starts.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Hashable, Mapping
from types import TracebackType
from typing import Any

import numpy as np
from dask.base import annotate, get_annotations

__all__ = [
    "ANNOTATION",
    "Name",
    "SpanMap",
    "check",
    "current",
    "of_compute",
    "path",
    "paths",
    "selected_rows",
    "span",
    "within",
]

#: the dask annotation (distributed's)
ANNOTATION = "span"

Name = tuple[str, ...]
#: a compute's spans: the span open when it started, and the span of each annotated key
SpanMap = tuple[Name | None, dict[Hashable, Name] | None]

_used = False


class span:
    """Tasks of collections made (or computed) inside the block belong to span ``name``;
    nested spans make a path. ``as`` gives the span's id (as ``distributed.span`` does)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"span name must be a str, got {type(name).__name__} {name!r}")
        if not name.strip():
            raise ValueError(f"span name must not be empty, got {name!r}")
        self.name = name
        self.id = str(uuid.uuid4())
        self._annotate: contextlib.AbstractContextManager[None] | None = None

    def __enter__(self) -> str:
        global _used
        if self._annotate is not None:
            raise RuntimeError("a span() block cannot be entered twice; create a new one")
        _used = True
        outer = get_annotations().get(ANNOTATION)
        names, ids = _parts(outer)
        value = {"name": (*names, self.name), "ids": (*ids, self.id)}
        self._annotate = annotate(**{ANNOTATION: value})
        self._annotate.__enter__()
        return self.id

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._annotate is not None:
            self._annotate.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"daskprofile.span({self.name!r})"


def _parts(annotation: Any) -> tuple[Name, tuple[str, ...]]:
    """(names, ids) of a span annotation; empty if it is not one."""
    if not isinstance(annotation, Mapping):
        return (), ()
    names, ids = annotation.get("name"), annotation.get("ids")
    if not isinstance(names, (tuple, list)):
        return (), ()
    return tuple(str(n) for n in names), tuple(str(i) for i in ids or ())


def name_of(annotation: Any) -> Name | None:
    """The name tuple of a span annotation, or None."""
    names, _ = _parts(annotation)
    return names or None


def current() -> Name | None:
    """The span open in this context (dask's annotations), or None."""
    found = get_annotations().get(ANNOTATION)
    return None if found is None else name_of(found)


def path(name: Name | None) -> str | None:
    """``"load/clean"``: a span's names joined with ``"/"`` (None for no span)."""
    return None if not name else "/".join(name)


def of_compute(graph: Any, now: Name | None) -> SpanMap | None:
    """The spans of a compute: ``now`` (open when it started) and the span of each key of
    ``graph`` (what ``get_async`` was given: an expression keeps its layers' annotations),
    or None when no span is in use. Never raises."""
    if not _used and now is None:
        return None
    keyed = _annotated(graph)
    if now is None and not keyed:
        return None
    return now, keyed or None


def _annotated(graph: Any) -> dict[Hashable, Name]:
    """Each annotated key's span name (one conversion per distinct annotation)."""
    reader = getattr(graph, "__dask_annotations__", None)
    if reader is None:
        return {}
    try:
        found = reader().get(ANNOTATION) or {}
        names: dict[int, Name | None] = {}
        out: dict[Hashable, Name] = {}
        for key, annotation in found.items():
            name = names.get(id(annotation), ())
            if name == ():
                name = names[id(annotation)] = name_of(annotation)
            if name:
                out[key] = name
        return out
    except Exception:  # an expression we cannot read: the span open at compute time
        return {}


# ---------------------------------------------------------------- reading tables


def check(value: Any, argument: str = "span") -> str:
    """``value`` as a span path to select (``"load"``, ``"load/clean"``); ``TypeError`` or
    ``ValueError`` naming ``argument`` otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be a str, got {type(value).__name__} {value!r}")
    if not value.strip("/ "):
        raise ValueError(f"{argument} must name a span, got {value!r}")
    return value.strip("/")


def paths(table: Mapping[str, Any]) -> np.ndarray:
    """Each row's span path (None: no span) of a raw tasks table (``span`` ids into the
    ``spans`` lookup of name lists); all None for a table recorded without spans."""
    ids = np.asarray(table.get("span", ()), dtype=np.int64)
    n = len(table["start"])
    lookup = list(table.get("spans") or [None])
    if len(ids) != n or len(lookup) <= 1:
        return np.full(n, None, dtype=object)
    labels = np.asarray([path(tuple(s)) if s else None for s in lookup], dtype=object)
    return labels[ids]


def within(label: str | None, selected: str) -> bool:
    """Whether span path ``label`` is ``selected`` or one of its sub-spans."""
    return label is not None and (label == selected or label.startswith(selected + "/"))


def selected_rows(table: Mapping[str, Any], selected: str) -> np.ndarray:
    """Which rows of a raw tasks table belong to span ``selected`` (or its sub-spans)."""
    ids = np.asarray(table.get("span", ()), dtype=np.int64)
    n = len(table["start"])
    if len(ids) != n:
        return np.zeros(n, dtype=bool)
    lookup = list(table.get("spans") or [None])
    ok = np.array([within(path(tuple(s)) if s else None, selected) for s in lookup], bool)
    return ok[ids]
