"""Chrome Trace Event Format (JSON object form): opens in Perfetto and chrome://tracing.

Layout: one process ("dask workers") with a thread track per worker lane holding one
complete (``X``) event per task, and counter (``C``) tracks for CPU and memory. Times are
microseconds since the run's ``t0``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ._common import PathLike, RunLike, TaskArrays, task_arrays, write_text

PID = 1
_US = 1e6


def _metadata_events(run: RunLike, arrays: TaskArrays) -> Iterator[dict[str, Any]]:
    """Process and thread names, and a sort order that keeps lanes in natural order."""
    host = run.meta.get("host", "")
    label = f"dask workers ({host})" if host else "dask workers"
    yield {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": label}}
    yield {"ph": "M", "name": "process_sort_index", "pid": PID, "tid": 0, "args": {"sort_index": 0}}
    for i, lane in enumerate(arrays.lanes):
        tid = i + 1
        yield {"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": lane}}
        yield {
            "ph": "M",
            "name": "thread_sort_index",
            "pid": PID,
            "tid": tid,
            "args": {"sort_index": tid},
        }


def _task_events(arrays: TaskArrays) -> Iterator[dict[str, Any]]:
    """One complete event per task: name = group, args = key, wait, status, error."""
    ts = np.round(arrays.start * _US, 3)
    dur = np.round(np.maximum(arrays.stop - arrays.start, 0.0) * _US, 3)
    wait = arrays.start - arrays.submit
    for i in np.argsort(arrays.start, kind="stable").tolist():
        args: dict[str, Any] = {"key": arrays.key[i]}
        w = float(wait[i])
        if math.isfinite(w):
            args["wait"] = round(w, 9)
        args["status"] = "error" if arrays.error[i] else "ok"
        if arrays.error[i]:
            args["error"] = arrays.error_type[i]
        yield {
            "name": arrays.groups[arrays.group[i]],
            "cat": "task",
            "ph": "X",
            "ts": float(ts[i]),
            "dur": float(dur[i]),
            "pid": PID,
            "tid": int(arrays.lane[i]) + 1,
            "args": args,
        }


def _counter_events(run: RunLike) -> Iterator[dict[str, Any]]:
    """CPU (% of one core) and memory (MB RSS) counters from ``run.resources``."""
    res = run.resources
    if not len(res):
        return
    times = np.round(res["time"].to_numpy(float) * _US, 3).tolist()
    cpu = res["cpu"].to_numpy(float).tolist()
    mem = (res["memory"].to_numpy(float) / 1e6).tolist()
    for t, c, m in zip(times, cpu, mem, strict=True):
        if math.isfinite(c):
            yield {"name": "CPU %", "ph": "C", "ts": t, "pid": PID, "args": {"cpu": c}}
        if math.isfinite(m):
            yield {"name": "Memory MB", "ph": "C", "ts": t, "pid": PID, "args": {"rss": m}}


def _other_data(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Run metadata worth keeping in the trace (JSON-safe scalars only)."""
    keep = ("id", "host", "pid", "wall0", "t0", "t1", "schedulers", "computes", "dropped")
    return {k: meta[k] for k in keep if k in meta}


def chrome_trace(run: RunLike) -> dict[str, Any]:
    """The run as a Trace Event Format object (``traceEvents`` + metadata)."""
    arrays = task_arrays(run)
    events = [*_metadata_events(run, arrays), *_task_events(arrays), *_counter_events(run)]
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": _other_data(run.meta)}


def to_chrome_trace(run: RunLike, path: PathLike) -> str:
    """Write the run as a Chrome/Perfetto trace (JSON); return the path written."""
    text = json.dumps(chrome_trace(run), separators=(",", ":"), default=str, allow_nan=False)
    return write_text(path, text)
