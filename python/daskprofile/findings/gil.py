"""``gil-bound``: a group that keeps several threads busy while the process uses one core.

For each group with enough task time, the resource samples are weighted by the group's
share of the running task time in each sample's interval: that gives the threads the
group kept busy and the CPU the process used meanwhile (in cores). Python code holding the
GIL keeps N threads "busy" on about one core; code that releases it (numpy, pandas
kernels) uses about N cores. The stack samples say where the group's time sits: in Python
frames, or in frames of libraries that call C and release the GIL; the sampler's own
shortfall (it waits for the GIL too) and the CPUs the machine left idle meanwhile tell
the GIL from a machine loaded by other processes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._facts import Facts
from ._text import finding, pct, secs

__all__ = ["LIBRARIES", "gil_bound", "python_share"]

#: packages whose Python frames mostly call C that releases the GIL
LIBRARIES = (
    "numpy", "pandas", "scipy", "sklearn", "pyarrow", "numba", "numexpr", "skimage",
    "h5py", "zarr", "blosc", "torch", "xarray", "cupy", "polars", "xgboost", "lightgbm",
)  # fmt: skip
#: thresholds: busy threads per process at least, CPU cores per busy thread at most
MIN_BUSY = 1.5
MAX_CPU_PER_THREAD = 0.75
#: CPU (cores per process) at most: "about one core"
MAX_CORES = 1.35
#: share of the group's samples in Python frames at least
MIN_PYTHON = 0.5
#: a group needs at least this much time attributed to it (s)
MIN_TIME = 0.2
#: CPU (cores per process) at least: threads that wait (sleep, I/O) are not GIL-bound
MIN_CORES = 0.5
#: the GIL shows when the stack sampler (a Python thread too) got fewer samples than
#: this share of what it asked for, or when the machine left this many CPUs idle while the
#: process used about one: a loaded machine alone explains low CPU otherwise
MAX_COVERAGE = 0.85
MIN_MACHINE_IDLE = 0.5


def gil_bound(f: Facts) -> list[dict[str, Any]]:
    """The groups that are GIL-bound (see the module docstring)."""
    processes = _processes(f)
    if processes is None or len(f.res_time) < 3 or f.n == 0:
        return []
    out = []
    for g in _candidate_groups(f):
        row = _judge(f, g, processes)
        if row is not None:
            out.append(row)
    return out


def _processes(f: Facts) -> int | None:
    """Processes whose threads share a GIL while running tasks (None: each task has its
    own: processes scheduler, single-threaded workers)."""
    if f.is_cluster:
        c = f.cluster or {}
        workers, threads = int(c.get("workers") or 0), int(c.get("threads") or 0)
        return workers if workers and threads > workers else None
    return 1 if "threads" in f.schedulers else None


def _candidate_groups(f: Facts, most: int = 8) -> list[int]:
    total = np.bincount(f.group, weights=f.dur, minlength=len(f.groups))
    order = np.argsort(-total)[:most]
    return [int(g) for g in order if total[g] >= MIN_TIME]


def _busy_curve(start: np.ndarray, stop: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Task-seconds run before each time ``t`` (sum of overlaps with (-inf, t])."""
    s, e = np.sort(start), np.sort(stop)
    cs, ce = np.concatenate([[0.0], np.cumsum(s)]), np.concatenate([[0.0], np.cumsum(e)])
    i, j = np.searchsorted(s, t), np.searchsorted(e, t)
    out: np.ndarray = (i * t - cs[i]) - (j * t - ce[j])
    return out


def _judge(f: Facts, g: int, processes: int) -> dict[str, Any] | None:
    mine = f.group == g
    t = f.res_time
    busy_g = np.diff(_busy_curve(f.start[mine], f.stop[mine], t))
    busy_all = np.diff(_busy_curve(f.start, f.stop, t))
    dt = np.diff(t)
    weight = np.divide(busy_g, busy_all, out=np.zeros_like(busy_g), where=busy_all > 1e-12)
    span = float(weight @ dt)
    if span < MIN_TIME:
        return None
    busy = float(busy_g.sum()) / span
    cores = float(weight @ (f.res_cpu[1:] / 100 * dt)) / span
    per_thread = cores / busy if busy > 0 else 1.0
    python, samples = python_share(f, f.groups[g])
    coverage = samples * f.stack_interval / float(f.dur[mine].sum()) if samples else None
    idle = _machine_idle(f, mine)
    limit = MAX_CPU_PER_THREAD if python is not None else 0.6
    if (
        busy < MIN_BUSY * processes
        or not MIN_CORES * processes <= cores <= MAX_CORES * processes
        or per_thread > limit
        or (python is not None and python < MIN_PYTHON)
        or not _starved(coverage, idle)
    ):
        return None
    usable = min(busy, f.cpus or busy)
    impact = span * (1 - cores / usable) if usable > cores else 0.0
    name = f.groups[g]
    evidence = {
        "busy_threads": busy,
        "cpu_cores": cores,
        "processes": processes,
        "python_share": python,
        "sampler_coverage": coverage,
        "time_s": span,
        "cpus": f.cpus,
        "machine_idle_cpus": idle,
    }
    where = f" and {pct(python)} of its samples sit in Python code" if python is not None else ""
    message = (
        f"{name!r} kept {busy:.1f} threads busy for {secs(span)} while the process used "
        f"{cores:.2f} CPU cores{where}: its tasks hold the GIL and run one at a time."
    )
    suggestion = (
        f"Run it on processes (scheduler='processes') or a cluster of single-threaded "
        f"workers: with {int(usable)} cores, about {secs(impact)} saved; or move the hot loop "
        "to numpy/numba code that releases the GIL."
    )
    return finding("gil-bound", name, impact, f.wall, evidence, message, suggestion, groups=[name])


def _starved(coverage: float | None, idle: float | None) -> bool:
    """Whether the low CPU shows the GIL rather than a busy machine (unknown: yes)."""
    if coverage is None and idle is None:
        return True
    return bool(
        (coverage is not None and coverage < MAX_COVERAGE)
        or (idle is not None and idle >= MIN_MACHINE_IDLE)
    )


def _machine_idle(f: Facts, mine: np.ndarray) -> float | None:
    """Mean idle CPUs of the machine during the computes of the group's tasks."""
    ids = np.asarray(f.computes["id"], dtype=np.int64)
    idle = np.asarray(f.computes.get("idle", np.full(len(ids), np.nan)), dtype=np.float64)
    if len(idle) != len(ids):
        return None
    picked = np.isin(ids, np.unique(f.compute[mine])) & np.isfinite(idle)
    return float(idle[picked].mean()) if picked.any() else None


def python_share(f: Facts, group: str) -> tuple[float | None, int]:
    """(share of the group's samples whose innermost frame is Python code rather than a
    GIL-releasing library, samples); (None, 0) without samples."""
    tree = f.run.stacks.get(group)
    if not tree or not tree.get("count"):
        return None, 0
    library = _library_samples(tree)
    total = int(tree["count"])
    return (total - library) / total, total


def _library_samples(node: dict[str, Any]) -> int:
    """Samples whose innermost frame is in a GIL-releasing library (see LIBRARIES)."""
    children = node.get("children") or {}
    own = int(node.get("count", 0)) - sum(int(c.get("count", 0)) for c in children.values())
    filename = str((node.get("description") or {}).get("filename", ""))
    here = own if own > 0 and _in_library(filename) else 0
    return here + sum(_library_samples(c) for c in children.values())


def _in_library(filename: str) -> bool:
    parts = filename.replace("\\", "/").split("/")
    return any(p in LIBRARIES for p in parts)
