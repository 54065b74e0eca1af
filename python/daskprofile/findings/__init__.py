"""Findings: why a finished run took the time it did, and what each cause costs.

:func:`compute` reads a finished :class:`~daskprofile.run.Run` (its task rows, dependency
edges, compute times, resource and stack samples, cluster tables; nothing else) and returns
one row per finding, the largest impact first:

* ``kind``: ``gil-bound``, ``critical-path``, ``idle``, ``overhead-bound``,
  ``outside-tasks``, ``memory``, ``spill-bound``, ``transfer-bound``, ``what-if``;
* ``group``: the task group (or the chain of groups, the groups spilled to disk,
  ``scheduling``/``parallelism`` for idle time, ``computes``, ``workers``);
* ``impact_s``: the seconds it is estimated to cost (what fixing it would save), and
  ``share`` of the wall time; causes overlap, so impacts do not add up;
* ``evidence``: the figures it rests on; ``message`` and ``suggestion`` in plain words.

Each kind lives in its own module (:mod:`.gil`, :mod:`.parallel`, :mod:`.outside`,
:mod:`.memory`) as a pure function of the run's figures (:mod:`._facts`);
:mod:`.simulate` replays the recorded graph (critical path, list scheduling).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from . import gil, memory, outside, parallel
from ._facts import Facts, facts

if TYPE_CHECKING:
    import pandas as pd

#: a finished :class:`daskprofile.run.Run` (not imported: run imports this package)
Run = Any

__all__ = ["COLUMNS", "KINDS", "compute", "frame", "what_if"]

COLUMNS = ("kind", "group", "impact_s", "share", "evidence", "message", "suggestion")
KINDS = (
    "gil-bound",
    "critical-path",
    "idle",
    "overhead-bound",
    "outside-tasks",
    "memory",
    "spill-bound",
    "transfer-bound",
    "what-if",
)

_RULES: tuple[Callable[[Facts], list[dict[str, Any]]], ...] = (
    gil.gil_bound,
    parallel.critical,
    parallel.idle,
    parallel.overhead_bound,
    outside.outside_tasks,
    memory.memory,
    memory.spill_and_transfer,
    parallel.what_if_finding,
)


def compute(run: Run) -> list[dict[str, Any]]:
    """The findings of a finished ``run`` as dicts (see the module docstring); a rule that
    fails is noted in ``run.meta.errors`` and left out."""
    if not run.finished:
        raise ValueError("findings are computed from a finished run")
    f = facts(run)
    rows: list[dict[str, Any]] = []
    for rule in _RULES:
        try:
            rows += rule(f)
        except Exception as exc:  # one broken rule never hides the others
            run.meta.errors.append({"collector": f"findings.{rule.__name__}", "error": repr(exc)})
    rows.sort(key=lambda r: (-r["impact_s"], KINDS.index(r["kind"])))
    return rows


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The findings as a DataFrame with :data:`COLUMNS`."""
    import pandas as pd

    df: pd.DataFrame = pd.DataFrame(
        [{k: r[k] for k in COLUMNS} for r in rows], columns=list(COLUMNS)
    )
    return df


def what_if(run: Run, workers: Iterable[int] = parallel.WORKERS) -> pd.DataFrame:
    """The recorded graph of ``run`` replayed with each number of ``workers`` (positive
    ints): columns workers, wall_time, speedup, method."""
    import pandas as pd

    counts = _check_workers(workers)
    if not run.finished:
        raise ValueError("what_if needs a finished run")
    table = parallel.what_if_table(facts(run), counts)
    df: pd.DataFrame = pd.DataFrame(table, columns=["workers", "wall_time", "speedup", "method"])
    return df


def _check_workers(workers: Any) -> list[int]:
    if isinstance(workers, int) and not isinstance(workers, bool):
        workers = [workers]
    try:
        counts = list(workers)
    except TypeError:
        raise TypeError(f"workers must be a list of positive ints, got {workers!r}") from None
    for k in counts:
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"workers must be a list of positive ints, got {workers!r}")
        if k < 1:
            raise ValueError(f"workers must be positive, got {k!r}")
    if not counts:
        raise ValueError("workers must name at least one number of workers")
    return counts
