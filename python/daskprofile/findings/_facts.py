"""The figures every finding reads, taken once from a finished run (columns, no pandas).

:func:`facts` turns a :class:`~daskprofile.run.Run` into plain numpy arrays in seconds
since the run's start: task times, canonical group ids, workers, computes, edges, ready
times and resource samples, plus what the run says of where it ran (CPUs, memory,
scheduler, threads). The finding modules are pure functions of these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: a finished :class:`daskprofile.run.Run` (not imported: run imports this package)
Run = Any

#: per-task overhead assumed where the run cannot show it (s): dask's documented figures
DEFAULT_OVERHEAD = {"sync": 5e-6, "threads": 5e-5, "processes": 1e-3, "distributed": 1e-3}


@dataclass
class Facts:
    """A finished run's figures (times in s since the run's start)."""

    run: Run
    wall: float
    start: np.ndarray
    stop: np.ndarray
    group: np.ndarray  # canonical group id per task
    groups: list[str]
    worker: np.ndarray
    workers: list[str]
    compute: np.ndarray
    indptr: np.ndarray  # CSR of dependencies over task rows; length 0: not known
    indices: np.ndarray
    schedulers: list[str]
    cpus: int
    memory_total: int
    computes: dict[str, Any]
    res_time: np.ndarray
    res_cpu: np.ndarray
    res_memory: np.ndarray
    stack_interval: float
    cluster: dict[str, Any] | None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.start)

    @property
    def dur(self) -> np.ndarray:
        out: np.ndarray = self.stop - self.start
        return out

    @property
    def has_edges(self) -> bool:
        return len(self.indptr) == self.n + 1 and self.n > 0

    @property
    def is_cluster(self) -> bool:
        return "distributed" in self.schedulers or self.cluster is not None

    def slots(self) -> int:
        """Workers (threads) that ran tasks: the cluster's threads, else the distinct
        worker threads or processes seen."""
        if self.cluster and self.cluster.get("threads"):
            return int(self.cluster["threads"])
        return max(1, len(np.unique(self.worker)))

    def ready(self) -> np.ndarray:
        """When each task could have started: its last dependency's stop, else the start
        of its compute's first task (edges not known: its own submit time)."""
        if "ready" not in self.extra:
            self.extra["ready"] = _ready(self)
        out: np.ndarray = self.extra["ready"]
        return out


def facts(run: Run) -> Facts:
    """The figures of ``run`` (see the module docstring)."""
    t0 = run.t0
    tasks = run.raw("tasks", keys=False)
    start = np.asarray(tasks["start"], dtype=np.float64) - t0
    stop = np.asarray(tasks["stop"], dtype=np.float64) - t0
    group, groups = _canonical_groups(tasks)
    edges = run.raw("edges")
    computes = dict(run.raw("computes"))
    for name in ("call", "submit", "end"):
        computes[name] = np.asarray(computes[name], dtype=np.float64) - t0
    res = run.raw("resources")
    t1 = run.meta.t1
    wall = float(t1) - t0 if t1 is not None else float(stop.max(initial=0.0))
    f = Facts(
        run=run,
        wall=max(wall, 1e-9),
        start=start,
        stop=stop,
        group=group,
        groups=groups,
        worker=np.asarray(tasks["worker"], dtype=np.int64),
        workers=list(tasks["workers"]),
        compute=np.asarray(tasks["compute"], dtype=np.int64),
        indptr=np.asarray(edges["indptr"], dtype=np.int64),
        indices=np.asarray(edges["indices"], dtype=np.int64),
        schedulers=list(run.meta.schedulers),
        cpus=int(computes.get("cpus") or 0),
        memory_total=int(computes.get("memory_total") or 0),
        computes=computes,
        res_time=np.asarray(res["time"], dtype=np.float64) - t0,
        res_cpu=np.asarray(res["cpu"], dtype=np.float64),
        res_memory=np.asarray(res["memory"], dtype=np.int64),
        stack_interval=float((run.meta.options or {}).get("interval") or 0.01),
        cluster=_cluster(run.meta.distributed),
    )
    f.extra["submit"] = np.asarray(tasks["submit"], dtype=np.float64) - t0
    return f


def _canonical_groups(tasks: Mapping[str, Any]) -> tuple[np.ndarray, list[str]]:
    """Group id per task, one id per distinct name (the lookup may repeat names)."""
    names = [str(g) for g in tasks["groups"]]
    gid = np.asarray(tasks["group"], dtype=np.int64)
    unique: dict[str, int] = {}
    canon = np.array([unique.setdefault(n, len(unique)) for n in names] or [0], dtype=np.int64)
    return (canon[gid] if len(gid) else gid), list(unique)


def _cluster(described: Any) -> dict[str, Any] | None:
    if not isinstance(described, Mapping):
        return None
    infos = [w for w in (described.get("workers") or {}).values() if isinstance(w, Mapping)]
    return {
        "workers": len(infos),
        "threads": sum(int(w.get("nthreads", 0) or 0) for w in infos),
        "memory_limit": sum(int(w.get("memory_limit", 0) or 0) for w in infos),
    }


def _ready(f: Facts) -> np.ndarray:
    if not f.has_edges:
        submitted: np.ndarray = np.minimum(f.extra["submit"], f.start)
        return submitted
    first = _first_start_per_compute(f)
    ready = first.copy()
    counts = np.diff(f.indptr)
    has = counts > 0
    if f.indices.size:
        latest = np.maximum.reduceat(f.stop[f.indices], f.indptr[:-1][has])
        ready[has] = np.maximum(ready[has], latest)
    out: np.ndarray = np.minimum(ready, f.start)
    return out


def _first_start_per_compute(f: Facts) -> np.ndarray:
    """The earliest start among each task's compute's tasks, per task."""
    ids, inverse = np.unique(f.compute, return_inverse=True)
    first = np.full(len(ids), np.inf)
    np.minimum.at(first, inverse, f.start)
    out: np.ndarray = first[inverse]
    return out
