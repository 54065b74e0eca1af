"""Where a sampled stack is cut: the one rule shared by every stack sampler.

A sampler reads a thread's stack as ``(code, line)`` pairs, innermost first
(:func:`._frames.walk`), and records only the task's part of it: the frames from the task's
outermost function in. :func:`cut` finds that part and interns its frames; a
:class:`Rules` names the files that mark it, one instance per sampler (the kernel's, for
dask's local schedulers, and the distributed workers'), so that the rule itself is written
once.

The shape follows ``distributed.profile.process(frame, child, state, *, stop, omit)``:
``stop`` is a file whose frame, and every frame outside it, is cut. ``omit`` differs: in
distributed a sample whose innermost frame is in such a file is dropped; here frames of
such files (the scheduler's task-calling wrappers) are cut only where they sit at the
outer end of what is left, and kept inside the task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import CodeType

from ..codemap import frame_filename
from ..stacktree import FrameInfo

__all__ = ["Memo", "Rules", "cut"]

# How the frames of one code object are treated.
_KEEP, _OMIT, _STOP = 0, 1, 2

#: ``id(code) -> (code, kind, {line: frame id})``, filled by :func:`cut` for one
#: :class:`Rules` and one ``intern``. Keyed by identity, not by the code object: code
#: objects compare (and hash) equal when only their ``co_filename`` differs, and hashing
#: one costs more than ``id``. The entry holds the code so that its id stays unique.
Memo = dict[int, tuple[CodeType, int, dict[int, int]]]


@dataclass(frozen=True, slots=True)
class Rules:
    """Where a sampler cuts its stacks.

    ``stop`` and ``omit`` are file paths matched as suffixes of ``co_filename`` that
    start at a path separator: ``"dask/core.py"`` matches ``/env/site-packages/dask/core.py``
    but neither ``/home/me/mydask/core.py`` nor ``/x/dask/core.py/job.py``. Backslashes
    count as separators (Windows paths). A substring test, or a plain ``endswith``, also
    matches files whose paths merely contain or end like the name, and so cuts frames of
    the task's own: ``endswith("dask/utils.py")`` holds for narwhals' ``_dask/utils.py``.
    """

    #: files that call the task: walking out, the first frame of one ends the stack and is
    #: cut with everything outside it
    stop: tuple[str, ...]
    #: the task-calling machinery between ``stop`` and the task: cut at the outer end
    omit: tuple[str, ...] = ()
    #: a stack whose innermost frame is a ``stop`` frame (the thread is in the scheduler's
    #: own code, between tasks) keeps that one frame instead of giving ``()``
    keep_boundary: bool = False
    #: when only ``omit`` frames lie inside the boundary, keep them instead of giving ``()``
    keep_empty: bool = False

    def __post_init__(self) -> None:
        for name in ("stop", "omit"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(p, str) for p in value):
                raise TypeError(f"{name} must be a tuple of file paths, got {value!r}")


def _suffixes(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple("/" + p.replace("\\", "/").lstrip("/") for p in paths)


def _kind(filename: str, rules: Rules) -> int:
    path = "/" + filename.replace("\\", "/")
    if path.endswith(_suffixes(rules.stop)):
        return _STOP
    if path.endswith(_suffixes(rules.omit)):
        return _OMIT
    return _KEEP


def cut(
    frames: Iterable[tuple[CodeType, int | None]],
    rules: Rules,
    memo: Memo,
    intern: Callable[[FrameInfo], int],
) -> tuple[int, ...]:
    """The frame ids of the task's part of a walked stack (innermost first), outermost first.

    Walking out from the innermost frame, the first ``rules.stop`` frame ends the stack;
    ``rules.omit`` frames next to it (at the outer end of what is left) are dropped.
    ``intern`` turns a :class:`FrameInfo` into its id; ``memo`` (one per ``rules`` and
    ``intern``) remembers each code object's kind and each ``(code, line)``'s id, so a
    frame seen before costs two dict lookups. A line of ``None`` is recorded as 0. Code
    cloudpickle rebuilt is named by its fingerprint (:func:`~daskprofile.codemap.frame_filename`)
    so that the kernel maps it back to its file.
    """
    out: list[int] = []
    keep = 0  # frames up to here are kept: the last one not omitted
    for code, lineno in frames:
        entry = memo.get(id(code))
        if entry is None:
            entry = memo[id(code)] = (code, _kind(code.co_filename, rules), {})
        _, kind, lines = entry
        if kind == _STOP and (out or not rules.keep_boundary):
            break
        line = lineno or 0
        fid = lines.get(line)
        if fid is None:
            info = FrameInfo(frame_filename(code), code.co_name, code.co_firstlineno, line)
            fid = lines[line] = intern(info)
        out.append(fid)
        if kind != _OMIT:
            keep = len(out)
            if kind == _STOP:
                break
    if keep or not rules.keep_empty:
        del out[keep:]
    out.reverse()
    return tuple(out)
