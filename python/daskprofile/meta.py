"""RunMeta: a run's metadata as typed fields, saved and loaded with the run.

Who ran what, where and when (``id``, ``host``, ``pid``, ``wall0``, ``t0``, ``t1``), how it
was recorded (``options``, ``schedulers``, ``computes``), what was lost (``dropped``,
``errors``), what ended it early (``ended_by``: the exception that left the recorded
block), what was recorded in a reduced way and why (``reduced``, ``{part: why}``: e.g.
the stacks and resources of cluster workers without daskprofile), what it is called
(``title``, ``code``), the cluster it ran on (``distributed``) and the versions of Python and
of the libraries that ran it (``versions``). Fields are checked when a
run is made or loaded: a file with a field of the wrong type is refused with a
``ValueError`` naming the field, never half-read.

A RunMeta is also a mapping (``run.meta["dropped"]``, ``run.meta.get("t1")``), which is how
users read it; keys that are not fields (written by a newer daskprofile, or by the user)
are kept in ``extra`` and saved with the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["RunMeta"]

#: file format version of a saved run
VERSION = 1

_NUMBER = (int, float)


@dataclass
class RunMeta(MutableMapping[str, Any]):
    """Typed metadata of one run (see the module docstring)."""

    id: str = ""
    version: int = VERSION
    wall0: float = 0.0
    t0: float = 0.0
    t1: float | None = None
    host: str = ""
    pid: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    schedulers: list[str] = field(default_factory=list)
    computes: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    #: parts recorded in a reduced way -> why and what is left (e.g. ``"stacks"``)
    reduced: dict[str, str] = field(default_factory=dict)
    finished: bool = True
    #: the exception that ended the recorded block early, as ``"Type: message"``
    #: (``"KeyboardInterrupt"``, a task's error, a cluster gone); None when it ran to its end
    ended_by: str | None = None
    auto: bool = False
    title: str | None = None
    code: str | None = None
    distributed: dict[str, Any] | None = None
    #: where it ran: ``{"python": ..., "dask": ..., "distributed": ..., "daskprofile": ...}``
    #: of the recording process (a cluster's workers: ``distributed["workers"][a]["versions"]``)
    versions: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunMeta:
        """The metadata ``d`` describes; ``ValueError`` naming a field of the wrong type."""
        if isinstance(d, RunMeta):
            return d
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in d.items() if k in known}
        extra = {k: v for k, v in d.items() if k not in known}
        extra.update(dict(d.get("extra") or {}) if isinstance(d.get("extra"), Mapping) else {})
        for name, value in values.items():
            _check(name, value)
        meta = cls(**values, extra=extra)
        meta.schedulers = list(meta.schedulers)
        meta.errors = list(meta.errors)
        meta.dropped = {str(k): int(v) for k, v in meta.dropped.items()}
        meta.reduced = dict(meta.reduced)
        meta.versions = dict(meta.versions)
        return meta

    def to_dict(self) -> dict[str, Any]:
        """Fields and extra keys as one plain dict (what a run file stores)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**self.extra, **out}

    # ------------------------------------------------------------ the mapping
    def __getitem__(self, key: str) -> Any:
        if key in _FIELDS:
            return getattr(self, key)
        return self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in _FIELDS:
            _check(key, value)
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def __delitem__(self, key: str) -> None:
        if key in _FIELDS:
            raise KeyError(f"{key!r} is a field of RunMeta and cannot be removed")
        del self.extra[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.to_dict()

    def __len__(self) -> int:
        return len(_FIELDS) + len(self.extra)

    def __contains__(self, key: object) -> bool:
        if key in _FIELDS:
            return key != "distributed" or self.distributed is not None
        return key in self.extra


#: field -> the types a value of it may have (None allowed where the default is None)
_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "version": (int,),
    "wall0": _NUMBER,
    "t0": _NUMBER,
    "t1": (*_NUMBER, type(None)),
    "host": (str,),
    "pid": (int,),
    "options": (dict,),
    "schedulers": (list, tuple),
    "computes": (int,),
    "dropped": (dict,),
    "errors": (list, tuple),
    "reduced": (dict,),
    "finished": (bool,),
    "ended_by": (str, type(None)),
    "auto": (bool,),
    "title": (str, type(None)),
    "code": (str, type(None)),
    "distributed": (dict, type(None)),
    "versions": (dict,),
}
_FIELDS = frozenset(_TYPES)


def ended_by(exc: BaseException) -> str:
    """``exc`` as ``run.meta.ended_by`` keeps it: ``"Type: message"`` (bounded)."""
    text = str(exc)
    name = type(exc).__name__
    out = f"{name}: {text}" if text else name
    return out if len(out) <= MAX_ENDED_BY else out[: MAX_ENDED_BY - 3] + "..."


#: longest ``ended_by`` kept (a message can carry a whole graph's repr)
MAX_ENDED_BY = 1000


def _check(name: str, value: Any) -> None:
    allowed = _TYPES[name]
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        kinds = " or ".join(t.__name__ for t in allowed)
        raise ValueError(f"run metadata {name!r} must be {kinds}, got {value!r}")
    if name in ("reduced", "versions") and not _str_to_str(value):
        raise ValueError(f"run metadata {name!r} must map str to str, got {value!r}")


def _str_to_str(mapping: Any) -> bool:
    return all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())
