"""Run: one profiled block's data - columnar, bounded, immutable once finished.

While the block runs, the views read what the collectors have recorded so far; when it
ends the data is frozen into numpy columns. A run can be saved to a compact versioned file
(``.npz``: numpy columns + JSON metadata, loaded without pickle), turned into a plain dict,
and handed to the exporters (``to_html``, ``to_chrome_trace``, ``to_speedscope``,
``to_folded``).
"""

from __future__ import annotations

import json
import os
import threading
import zipfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from . import cluster_tables as _cluster
from . import spans as _spans
from .collectors import graph as _graph
from .collectors.exceptions import COLUMNS as EXCEPTION_COLUMNS
from .collectors.exceptions import empty as _empty_exceptions
from .files import atomic_open
from .meta import VERSION, RunMeta

if TYPE_CHECKING:
    import pandas as pd

    from .comparison import Comparison

FORMAT = "daskprofile-run"


class _Refused(ValueError):
    """A run file or dict that this version does not read; the message says why (its
    format or version)."""


Table = dict[str, Any]
Tree = dict[str, Any]

TASK_COLUMNS = (
    *("key", "group", "worker", "submit", "start", "stop", "status", "error", "compute"),
    "span",
)
RESOURCE_COLUMNS = ("time", "cpu", "memory", "processes")
CACHE_COLUMNS = ("time", "group", "metric")

#: numeric columns saved per table (lookups and keys are saved separately)
_ARRAYS = {
    "tasks": ("group", "worker", "submit", "start", "stop", "error", "compute", "span"),
    "cache": ("time", "group", "metric"),
    "resources": RESOURCE_COLUMNS,
    "edges": ("indptr", "indices"),
    "computes": ("id", "call", "submit", "end", "idle"),
}
_LOOKUPS = {
    "tasks": ("groups", "workers", "error_types", "spans", "dropped"),
    "cache": ("groups", "dropped"),
    "computes": ("scheduler", "cpus", "memory_total"),
}


def _empty_tasks() -> Table:
    f8, u4 = np.empty(0, np.float64), np.empty(0, np.uint32)
    return {
        "key": [],
        "group": u4,
        "worker": np.empty(0, np.uint16),
        "submit": f8,
        "start": f8,
        "stop": f8,
        "error": np.empty(0, np.uint16),
        "compute": u4,
        "span": np.empty(0, np.uint16),
        "groups": [],
        "workers": [],
        "error_types": [None],
        "spans": [None],
        "dropped": 0,
    }


def _empty_cache() -> Table:
    return {
        "time": np.empty(0),
        "group": np.empty(0, np.uint32),
        "metric": np.empty(0),
        "groups": [],
        "dropped": 0,
    }


def _empty_resources() -> Table:
    return {
        "time": np.empty(0),
        "cpu": np.empty(0),
        "memory": np.empty(0, np.int64),
        "processes": np.empty(0, np.int32),
    }


_EMPTY: dict[str, Callable[[], Table]] = {
    "tasks": _empty_tasks,
    "cache": _empty_cache,
    "resources": _empty_resources,
    "exceptions": _empty_exceptions,  # plain lists (bounded, saved as JSON)
    "edges": _graph.empty_edges,  # dependencies between task rows (CSR; findings read it)
    "computes": _graph.empty_computes,  # per compute: call, submit, end (findings read it)
}


class Run:
    """One profiled block. See ``docs/architecture.md`` for the public surface."""

    def __init__(
        self, meta: Mapping[str, Any] | None = None, data: Mapping[str, Any] | None = None
    ):
        #: typed metadata (:class:`~daskprofile.meta.RunMeta`), also readable as a mapping
        self.meta: RunMeta = RunMeta.from_dict(meta or {})
        self._data: dict[str, Any] = dict(data or {})
        self._sources: dict[str, Callable[[], Any]] = {}
        self._lock = threading.Lock()
        self._findings: list[dict[str, Any]] | None = None  # computed once finished

    # ------------------------------------------------------------------ live
    def attach(self, name: str, source: Callable[[], Any]) -> None:
        """While live, read table ``name`` from ``source()`` (a collector snapshot)."""
        with self._lock:
            self._sources[name] = source

    def attached(self) -> dict[str, Callable[[], Any]]:
        """The live sources attached so far, by table name (empty once finished)."""
        with self._lock:
            return dict(self._sources)

    def finish(self, t1: float, dropped: Mapping[str, int] | None = None) -> None:
        """Freeze: take a last snapshot of every source and drop them.

        ``dropped`` adds counts of records lost by sources that are not tables (stacks).
        """
        with self._lock:
            sources, self._sources = self._sources, {}
        for name, source in sources.items():
            try:
                self._data[name] = source()
            except Exception as exc:  # a broken collector never breaks the run
                self.meta.errors.append({"collector": name, "error": repr(exc)})
        self._keep_sources()
        self.meta.t1 = t1
        self.meta.finished = True
        self.meta.dropped = {
            name: int(table.get("dropped", 0))  # compact or decoded: both carry it
            for name, table in self._data.items()
            if isinstance(table, dict) and "dropped" in table
        } | dict(dropped or {})

    @property
    def finished(self) -> bool:
        """Whether the block has ended (the run no longer changes)."""
        return bool(self.meta.finished)

    def _table(self, name: str) -> Any:
        source = self._sources.get(name)
        if source is not None:
            try:
                return source()
            except Exception:
                return self._data.get(name)
        return self._data.get(name)

    def raw(self, name: str, keys: bool = True) -> Table:
        """The raw columns of ``tasks``, ``cache``, ``resources`` or ``exceptions`` (times in
        perf_counter s).

        ``keys=False``: the tasks table may come without its ``key`` column (cheaper: keys
        are the one column rebuilt row by row from the compact form)."""
        if name in _cluster.NAMES:  # actions, transfers, memory, workers (cluster_tables)
            return _cluster.raw(name, self._table(name))
        table = self._table(name)
        if table is None:
            return _EMPTY[name]()
        if table.get("compact"):
            from .collectors.tasks import decode

            return decode(table, keys=keys)
        return table  # type: ignore[no-any-return]

    def dropped(self, name: str) -> int:
        """Rows of table ``name`` lost to the memory cap (its first kept row's index), read
        without decoding the table."""
        table = self._table(name)
        return int(table.get("dropped", 0) or 0) if isinstance(table, Mapping) else 0

    def task_keys(self, rows: list[int]) -> list[str]:
        """Key labels of task rows ``rows`` (positions in :attr:`tasks`; ``""`` out of
        range), decoding only those rows."""
        table = self._table("tasks")
        if table is None:
            return [""] * len(rows)
        if table.get("compact"):
            from .collectors.tasks import keys_at

            return keys_at(table, rows)
        keys = table["key"]
        return [str(keys[i]) if 0 <= i < len(keys) else "" for i in rows]

    # ------------------------------------------------------------------ views
    @property
    def t0(self) -> float:
        """``perf_counter()`` at the start of the block."""
        return float(self.meta.t0)

    @property
    def tasks(self) -> pd.DataFrame:
        """One row per task: key, group, worker, submit/start/stop (s since t0), status,
        error (exception type name or None), compute (number of the compute), span (its
        names joined with ``"/"``, or None)."""
        t = self.raw("tasks")
        groups = np.asarray(t["groups"] + [""], dtype=object)
        workers = np.asarray(t["workers"] + [""], dtype=object)
        errors = np.asarray(t["error_types"], dtype=object)
        err = np.asarray(t["error"], dtype=np.int64)
        t0 = self.t0
        return _frame(
            {
                "key": np.array(t["key"], dtype=object),
                "group": groups[np.asarray(t["group"], dtype=np.int64)],
                "worker": workers[np.asarray(t["worker"], dtype=np.int64)],
                "submit": np.asarray(t["submit"], dtype=np.float64) - t0,
                "start": np.asarray(t["start"], dtype=np.float64) - t0,
                "stop": np.asarray(t["stop"], dtype=np.float64) - t0,
                "status": np.where(err == 0, "ok", "error").astype(object),
                "error": errors[err],
                "compute": np.asarray(t["compute"], dtype=np.int64),
                "span": _spans.paths(t),
            },
            columns=list(TASK_COLUMNS),
        )

    @property
    def exceptions(self) -> pd.DataFrame:
        """One row per task that raised (the first ones, see ``meta.dropped``): key, group,
        worker, time (s since t0), type, message, traceback, compute, span."""
        e = self.raw("exceptions")
        return _frame(
            {
                **{name: list(e[name]) for name in EXCEPTION_COLUMNS},
                "time": np.asarray(e["time"], dtype=np.float64) - self.t0,
                "span": [_spans.path(tuple(s)) if s else None for s in e["span"]],
            },
            columns=list(EXCEPTION_COLUMNS),
        )

    def filter(self, *, span: str) -> Run:
        """A finished copy of this run with only the tasks (and exceptions) of span ``span``
        (a path: ``"load"``, ``"load/clean"``) and its sub-spans; the tables that are not
        per task (resources, cache, stacks) are kept whole. Every view reads it as a run:
        ``run.filter(span="load").summary()``, ``.to_html(...)``."""
        return _spans_filter(self, _spans.check(span, "span"))

    @property
    def resources(self) -> pd.DataFrame:
        """Samples: time (s since t0), cpu (% of one core, summed over the process tree),
        memory (bytes RSS, summed), processes."""
        r = self.raw("resources")
        return _frame(
            {
                "time": np.asarray(r["time"], dtype=np.float64) - self.t0,
                "cpu": np.asarray(r["cpu"], dtype=np.float64),
                "memory": np.asarray(r["memory"], dtype=np.int64),
                "processes": np.asarray(r["processes"], dtype=np.int64),
            },
            columns=list(RESOURCE_COLUMNS),
        )

    @property
    def cache(self) -> pd.DataFrame:
        """Cache occupancy per group: time (s since t0), group, metric (after the change)."""
        c = self.raw("cache")
        groups = np.asarray(c["groups"] + [""], dtype=object)
        return _frame(
            {
                "time": np.asarray(c["time"], dtype=np.float64) - self.t0,
                "group": groups[np.asarray(c["group"], dtype=np.int64)],
                "metric": np.asarray(c["metric"], dtype=np.float64),
            },
            columns=list(CACHE_COLUMNS),
        )

    @property
    def stacks(self) -> dict[str, Tree]:
        """``{group: tree}`` of sampled stacks (distributed's profile.py tree form)."""
        trees = self._table("stacks")
        return dict(trees) if trees else {}

    @property
    def stack_history(self) -> list[tuple[float, float, dict[str, Tree]]]:
        """``[(t_start, t_end, {group: tree})]`` per cycle, times in s since t0."""
        history = self._table("stack_history") or []
        t0 = self.t0
        return [(a - t0, b - t0, trees) for a, b, trees in history]

    @property
    def sources(self) -> dict[str, dict[str, Any]]:
        """The text of every sampled function found: ``{identifier: {"file", "name",
        "start", "text"}}`` keyed by the stack trees' (mapped) node identifiers
        ``"name;file;first line"``; ``text`` holds at most 300 lines, ``start`` is the line
        number of its first. Kept when the run finishes, saved and loaded with it."""
        kept = self._data.get("sources")
        if kept is not None:
            return dict(kept)
        from .codemap import sources
        from .stacktree import identifiers

        found = sources(sorted(identifiers(self.stacks.values())))
        if self.finished and not self._sources:
            self._data["sources"] = found
        return dict(found)

    def _keep_sources(self) -> None:
        """Look up the text of the sampled functions now, while it can be found."""
        if "sources" in self._data or not self._data.get("stacks"):
            return
        try:
            from .codemap import sources
            from .stacktree import identifiers

            self._data["sources"] = sources(sorted(identifiers(self._data["stacks"].values())))
        except Exception as exc:  # a broken lookup never breaks the run
            self.meta.errors.append({"collector": "sources", "error": repr(exc)})

    def hot_lines(self, func_or_name: object, group: str | None = None) -> pd.DataFrame:
        """One row per sampled line of a function, hottest first: ``file`` (mapped: the
        original file of code pickled by value, ``"Cell In[N]"``), ``line``, ``source``
        (its text), ``samples`` (inclusive: time at the line and in what it calls),
        ``seconds`` and ``share`` (of the function's samples).

        ``func_or_name``: a function, method or code object (matched on every scheduler,
        also when it ran as a pickled copy) or a function name. ``group``: one task
        group's samples only. ``seconds`` is estimated per group as the samples' share of
        the group's samples times the group's recorded task time (exact time, however
        many samples the GIL let the sampler take); a group without task rows falls back
        to samples x the sampling interval."""
        from .lines import hot_lines

        df: pd.DataFrame = hot_lines(self, func_or_name, group)
        return df

    def print_lines(self, func_or_name: object, group: str | None = None, file: Any = None) -> str:
        """Print a line_profiler-like view of a function (per line: number, samples,
        seconds, % of the function, text) to ``file`` (default stdout); returns it."""
        from .lines import print_lines

        return print_lines(self, func_or_name, group, file)

    # ------------------------------------------------------------------ cluster tables
    @property
    def actions(self) -> pd.DataFrame:
        """What distributed records of tasks besides compute, one row per action: key,
        group, action (``transfer``, ``disk-read``, ``disk-write``, ``deserialize``),
        worker (address), start/stop (s since t0), peer (the worker a transfer came from),
        bytes (<NA>: not known). Cluster runs only."""
        from . import cluster_views

        return cluster_views.actions(self.raw("actions"), self.t0)

    @property
    def transfers(self) -> pd.DataFrame:
        """The workers' transfer logs, one row per transfer and end that logged it:
        start/stop (s since t0), direction (``incoming``: logged by the destination,
        ``outgoing``: by the source), source, destination, bytes, compressed (bytes sent,
        outgoing only), keys, type (of the largest value moved)."""
        from . import cluster_views

        return cluster_views.transfers(self.raw("transfers"), self.t0)

    @property
    def memory(self) -> pd.DataFrame:
        """Memory of each worker over time (as distributed splits it): process, managed
        (in RAM), unmanaged (old, recent), spilled (bytes on disk), spilled_keys,
        spill/unspill counts and bytes since the run began, limit."""
        from . import cluster_views

        return cluster_views.memory(self.raw("memory"), self.t0)

    @property
    def workers(self) -> pd.DataFrame:
        """The workers seen: address, name, host, pid, threads, memory_limit, joined/left
        (s since t0; NaN: before the run / still there), reason (``closed``, ``retired``,
        ``lost``, ``timed out``), cause, and the keys it took (processing, lost, killed)."""
        from . import cluster_views

        return cluster_views.workers(self.raw("workers"), self.t0)

    @property
    def reruns(self) -> pd.DataFrame:
        """Tasks that ran again (key, group, runs, why, worker, killed): see
        :func:`daskprofile.cluster_views.reruns`."""
        from . import cluster_views

        return cluster_views.reruns(self.tasks, self.workers)

    def bandwidth(self, by: str = "workers", dt: float = 1.0) -> pd.DataFrame:
        """Bytes/s of the transfers per (source, destination) (``by="workers"``), per type
        of data (``"type"``) or over time in bins of ``dt`` s (``"time"``)."""
        from . import cluster_views

        return cluster_views.bandwidth(self.transfers, by, dt)

    def summary(self) -> dict[str, Any]:
        """Wall time, task counts, per-group table, peak memory, mean CPU, dropped records,
        failed tasks per exception type (``error_types``) and the per-span table (``spans``).

        Computed from the columns (no key decoded, no pandas): the panel asks for it at the
        end of every run, in a thread that shares the GIL with the next compute."""
        tasks = self.raw("tasks", keys=False)
        res = self.raw("resources")
        t1 = self.meta.t1
        err = np.asarray(tasks["error"])
        workers = np.asarray(tasks["worker"], dtype=np.int64)
        labels = tasks["workers"]
        return {
            "id": self.meta.id,
            "wall_time": (float(t1) - self.t0) if t1 is not None else None,
            "computes": self.meta.computes,
            "schedulers": list(self.meta.schedulers),
            "tasks": len(err),
            "errors": int(np.count_nonzero(err)),
            "error_types": _error_counts(tasks),
            "workers": len({labels[w] for w in np.unique(workers).tolist()}),
            "groups": _group_table(tasks),
            "spans": _span_table(tasks),
            "peak_memory": int(np.max(res["memory"])) if len(res["memory"]) else None,
            "mean_cpu": float(np.mean(res["cpu"])) if len(res["cpu"]) else None,
            "dropped": dict(self.meta.dropped),
            "cluster": _cluster_summary(self.meta.distributed),
            "findings": self._top_findings(),
        }

    # ------------------------------------------------------------------ findings
    def findings(self) -> pd.DataFrame:
        """Why the run took the time it did: one row per finding, the largest impact first
        (kind, group, impact_s, share, evidence, message, suggestion; see
        :mod:`daskprofile.findings`). Computed once from the recorded data (empty while the
        run is live)."""
        from .findings import frame

        return frame(self._finding_rows())

    def what_if(self, workers: Any = (1, 2, 4, 8, 16, 32)) -> pd.DataFrame:
        """The recorded graph replayed over its recorded durations with each number of
        ``workers``: workers, wall_time (estimated s), speedup (vs the recorded wall time),
        method (``simulated``, or ``bounds`` for very large runs)."""
        from .findings import what_if

        return what_if(self, workers)

    def _finding_rows(self) -> list[dict[str, Any]]:
        if not self.finished:
            return []
        if self._findings is None:
            from .findings import compute

            self._findings = compute(self)
        return self._findings

    def _top_findings(self, n: int = 5) -> list[dict[str, Any]]:
        """The ``n`` findings of largest impact, for the summary (never raises)."""
        try:
            rows = self._finding_rows()[:n]
        except Exception as exc:  # a summary is always made
            self.meta.errors.append({"collector": "findings", "error": repr(exc)})
            self._findings = []
            return []
        first = self.dropped("tasks")  # protocol row index of the table's first row
        return [_summary_finding(row, first) for row in rows]

    def __repr__(self) -> str:
        state = "finished" if self.finished else "live"
        n = len(self.raw("tasks", keys=False)["start"])
        return f"<daskprofile.Run {self.meta.id!r} {state}: {n} tasks>"

    # ------------------------------------------------------------------ values
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (lists and numbers) that :meth:`from_dict` reads back."""
        out: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "meta": _jsonable(self.meta.to_dict()),
        }
        for name in _EMPTY:
            table = self.raw(name)
            out[name] = {k: _listify(v) for k, v in table.items()}
        out["stacks"] = self.stacks
        out["stack_history"] = [list(h) for h in (self._table("stack_history") or [])]
        out["sources"] = self.sources
        out["cluster"] = _cluster.to_lists(self.raw)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Run:
        """The run :meth:`to_dict` described."""
        _check_format(d.get("format"), d.get("version"))
        data: dict[str, Any] = {}
        for name, empty in _EMPTY.items():
            table = empty()
            for k, v in (d.get(name) or {}).items():
                proto = table.get(k)
                table[k] = np.asarray(v, dtype=proto.dtype) if isinstance(proto, np.ndarray) else v
            data[name] = table
        data["stacks"] = dict(d.get("stacks") or {})
        data["stack_history"] = [tuple(h) for h in d.get("stack_history") or []]
        data["sources"] = _checked_sources(d.get("sources"))
        data.update(_cluster.from_lists(d.get("cluster")))
        return cls(d.get("meta") or {}, data)

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write a compact versioned file (npz of columns + JSON); returns the path."""
        arrays: dict[str, np.ndarray] = {}
        extra: dict[str, Any] = {}
        for name, cols in _ARRAYS.items():
            table = self.raw(name)
            for col in cols:
                arrays[f"{name}.{col}"] = np.asarray(table[col])
            extra[name] = {k: table.get(k) for k in _LOOKUPS.get(name, ())}
        arrays["tasks.key_text"], arrays["tasks.key_end"] = _pack_strings(self.raw("tasks")["key"])
        head = {
            "format": FORMAT,
            "version": VERSION,
            "meta": _jsonable(self.meta.to_dict()),
            **extra,
        }
        head["stacks"] = self.stacks
        head["stack_history"] = [list(h) for h in (self._table("stack_history") or [])]
        head["sources"] = self.sources
        head["exceptions"] = self.raw("exceptions")
        cluster_arrays, head["cluster"] = _cluster.save(self.raw)
        arrays.update(cluster_arrays)
        arrays["__json__"] = np.frombuffer(json.dumps(head).encode(), dtype=np.uint8)
        path = os.fspath(path)
        with atomic_open(path, binary=True) as f:  # whole or not at all
            np.savez_compressed(f, **arrays)  # type: ignore[arg-type]
        return path

    # ------------------------------------------------------------------ exports
    def to_html(self, path: str | os.PathLike[str], **kwargs: Any) -> str:
        """A self-contained HTML snapshot (see :func:`daskprofile.export.html.to_html`)."""
        from .export.html import to_html

        return to_html(self, path, **kwargs)

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> str:
        """Trace Event Format JSON (Perfetto, chrome://tracing)."""
        from .export.trace import to_chrome_trace

        return to_chrome_trace(self, path)

    def to_speedscope(self, path: str | os.PathLike[str]) -> str:
        """A speedscope file."""
        from .export.speedscope import to_speedscope

        return to_speedscope(self, path)

    def to_folded(self, path: str | os.PathLike[str]) -> str:
        """Collapsed stacks (flamegraph.pl, inferno)."""
        from .export.folded import to_folded

        return to_folded(self, path)

    def compare(self, other: Run | str | os.PathLike[str]) -> Comparison:
        """This run (the baseline) compared with ``other`` (a Run or a run file): see
        :func:`daskprofile.compare`."""
        from .comparison import compare

        return compare(self, other)


def load(path: str | os.PathLike[str]) -> Run:
    """Read a run written by :meth:`Run.save`.

    A run file is data: nothing in it is unpickled or run. ``ValueError`` naming the file
    when it is not a run this version reads (empty, truncated, another kind of file, a
    malformed field, a newer version); ``OSError`` when it cannot be opened.
    """
    name = os.fspath(path)
    with open(name, "rb") as f:
        if not zipfile.is_zipfile(f):  # np.load would read it as a pickle (and refuse)
            raise ValueError(f"{name}: not a daskprofile run file (not an npz archive)")
        f.seek(0)
        try:
            return _read(f)
        except _Refused as exc:
            raise ValueError(f"{name}: {exc}") from exc
        except Exception as exc:  # truncated, another npz, a field of the wrong type...
            why = f"{type(exc).__name__}: {exc}"[:300]
            raise ValueError(f"{name}: not a daskprofile run file ({why})") from exc


def _read(f: Any) -> Run:
    """The run in the open npz file ``f``."""
    with np.load(f, allow_pickle=False) as z:
        head = json.loads(z["__json__"].tobytes().decode())
        if not isinstance(head, dict):
            raise _Refused(f"not a daskprofile run (its header is a {type(head).__name__})")
        _check_format(head.get("format"), head.get("version"))
        data: dict[str, Any] = {}
        for name, cols in _ARRAYS.items():
            table = _EMPTY[name]()  # a column missing from an older file: none of its rows
            table.update({col: z[f"{name}.{col}"] for col in cols if f"{name}.{col}" in z})
            table.update(head.get(name) or {})
            data[name] = table
        data["tasks"]["key"] = _unpack_strings(z["tasks.key_text"], z["tasks.key_end"])
        data.update(_cluster.load(z, head.get("cluster")))
    data["exceptions"] = head.get("exceptions") or _empty_exceptions()
    data["stacks"] = head.get("stacks") or {}
    data["stack_history"] = [tuple(h) for h in head.get("stack_history") or []]
    data["sources"] = _checked_sources(head.get("sources"))
    return Run(head.get("meta") or {}, data)


def _checked_sources(value: Any) -> dict[str, dict[str, Any]]:
    """The ``sources`` of a run file or dict (none in files of older versions);
    ``ValueError`` naming ``sources`` when malformed."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"run 'sources' must be a mapping, got {type(value).__name__}")
    out = {}
    for ident, entry in value.items():
        if not (
            isinstance(entry, Mapping)
            and isinstance(entry.get("file"), str)
            and isinstance(entry.get("name"), str)
            and type(entry.get("start")) is int
            and isinstance(entry.get("text"), list)
            and all(isinstance(t, str) for t in entry["text"])
        ):
            raise ValueError(f"run 'sources' entry {ident!r} is malformed")
        out[str(ident)] = {k: entry[k] for k in ("file", "name", "start", "text")}
    return out


def _check_format(fmt: Any, version: Any) -> None:
    if fmt != FORMAT:
        raise _Refused(f"not a daskprofile run (format {repr(fmt)[:100]})")
    if not isinstance(version, int):
        raise _Refused(f"run file version {repr(version)[:100]} is not a version number")
    if version > VERSION:
        raise _Refused(f"run file version {version!r} is newer than this daskprofile ({VERSION})")


def _pack_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [s.encode() for s in strings]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def _unpack_strings(text: np.ndarray, ends: np.ndarray) -> list[str]:
    raw = text.tobytes()
    starts = [0, *ends[:-1].tolist()]
    return [raw[s:e].decode() for s, e in zip(starts, ends.tolist(), strict=False)]


def _listify(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def _cluster_summary(described: Any) -> dict[str, Any] | None:
    """Scheduler, workers, threads and memory limit of a cluster run (``meta["distributed"]``)."""
    if not isinstance(described, Mapping):
        return None
    workers = described.get("workers") or {}
    infos = [w for w in workers.values() if isinstance(w, Mapping)]
    return {
        "scheduler": described.get("scheduler"),
        "workers": len(infos),
        "threads": sum(int(w.get("nthreads", 0) or 0) for w in infos),
        "memory_limit": sum(int(w.get("memory_limit", 0) or 0) for w in infos),
    }


#: most task rows a summary finding names (a longer chain lists its first ones)
SUMMARY_ROWS = 5_000


def _summary_finding(row: Mapping[str, Any], first: int) -> dict[str, Any]:
    """A finding as the summary (and ``run_end``) carries it: its texts and figures, the
    ``groups`` it concerns and, for a chain, its task ``rows`` (protocol row indices, in
    order, at most :data:`SUMMARY_ROWS`), so that the views can highlight them."""
    keys = ("kind", "group", "impact_s", "share", "message", "suggestion")
    out = {k: row[k] for k in keys}
    out["groups"] = list(row.get("groups") or [])
    if row.get("rows") is not None:
        out["rows"] = [first + int(r) for r in row["rows"][:SUMMARY_ROWS]]
    return out


def _error_counts(tasks: Table) -> dict[str, int]:
    """Failed tasks per exception type name, most first."""
    err = np.asarray(tasks["error"], dtype=np.int64)
    counts = np.bincount(err[err != 0], minlength=len(tasks["error_types"]))
    names = tasks["error_types"]
    order = np.argsort(-counts, kind="stable")
    return {str(names[i]): int(counts[i]) for i in order.tolist() if counts[i]}


def _span_table(tasks: Table) -> list[dict[str, Any]]:
    """Per span (its path; tasks outside every span are left out): tasks, total task time
    and errors, in order of first appearance."""
    ids = np.asarray(tasks.get("span", ()), dtype=np.int64)
    lookup = list(tasks.get("spans") or [None])
    if len(ids) != len(tasks["start"]) or len(lookup) <= 1 or not ids.any():
        return []
    start = np.asarray(tasks["start"], dtype=np.float64)
    duration = np.asarray(tasks["stop"], dtype=np.float64) - start
    failed = np.asarray(tasks["error"]) != 0
    used, first_row = np.unique(ids[ids != 0], return_index=True)
    rows = []
    for sid in used[np.argsort(first_row, kind="stable")].tolist():
        mine = ids == sid
        rows.append(
            {
                "span": _spans.path(tuple(lookup[sid])),
                "tasks": int(np.count_nonzero(mine)),
                "total": float(duration[mine].sum()),
                "errors": int(np.count_nonzero(failed & mine)),
            }
        )
    return rows


def _spans_filter(run: Run, selected: str) -> Run:
    """``run.filter(span=selected)``: see :meth:`Run.filter`."""
    tasks = dict(run.raw("tasks"))
    keep = _spans.selected_rows(tasks, selected)
    for name in ("group", "worker", "submit", "start", "stop", "error", "compute", "span"):
        column = np.asarray(tasks.get(name, ()))
        tasks[name] = column[keep] if len(column) == len(keep) else column[:0]
    tasks["key"] = [k for k, kept in zip(tasks["key"], keep.tolist(), strict=True) if kept]
    failures = run.raw("exceptions")
    rows = [
        i
        for i, names in enumerate(failures["span"])
        if _spans.within(_spans.path(tuple(names)) if names else None, selected)
    ]
    exceptions = {name: [failures[name][i] for i in rows] for name in EXCEPTION_COLUMNS}
    exceptions["dropped"] = failures.get("dropped", 0)
    tables = set(run._data) | set(run.attached())  # every other table, whole
    data: dict[str, Any] = {name: run._table(name) for name in tables}
    data |= {"tasks": tasks, "exceptions": exceptions}
    data["edges"] = _edges_within(run.raw("edges"), keep)
    meta = run.meta.to_dict() | {"span": selected}
    meta["finished"] = True
    return Run(meta, data)


def _edges_within(edges: Table, keep: np.ndarray) -> Table:
    """The edges between the rows ``keep`` selects, renumbered (none known: none)."""
    indptr = np.asarray(edges["indptr"], dtype=np.int64)
    if len(indptr) != len(keep) + 1:
        return _graph.empty_edges()
    task = np.repeat(np.arange(len(keep)), np.diff(indptr))
    dep = np.asarray(edges["indices"], dtype=np.int64)
    inside = keep[task] & keep[dep]
    new = np.cumsum(keep) - 1
    pairs = [(new[task[inside]], new[dep[inside]])]
    return _graph.to_csr(pairs, 0, int(np.count_nonzero(keep)))


def _group_table(tasks: Table) -> list[dict[str, Any]]:
    """Per group (by name, first seen first): tasks, total/mean/max duration, mean wait
    and errors; the groups with the most time first."""
    gid = np.asarray(tasks["group"], dtype=np.int64)
    if not len(gid):
        return []
    names: list[str] = list(tasks["groups"])
    canon = {name: i for i, name in reversed(list(enumerate(names)))}  # first id of a name
    gid = np.asarray([canon[n] for n in names], dtype=np.int64)[gid]
    used, first_row = np.unique(gid, return_index=True)
    used = used[np.argsort(first_row, kind="stable")]  # order of first appearance
    slot = np.zeros(len(names), dtype=np.int64)
    slot[used] = np.arange(len(used))
    row = slot[gid]
    start = np.asarray(tasks["start"], dtype=np.float64)
    duration = np.asarray(tasks["stop"], dtype=np.float64) - start
    wait = start - np.asarray(tasks["submit"], dtype=np.float64)
    count = np.bincount(row, minlength=len(used))
    total = np.bincount(row, weights=duration, minlength=len(used))
    longest = np.full(len(used), -np.inf)
    np.maximum.at(longest, row, duration)
    waited = np.bincount(row, weights=wait, minlength=len(used))
    errors = np.bincount(row, weights=np.asarray(tasks["error"]) != 0, minlength=len(used))
    order = np.argsort(-total, kind="stable")
    return [
        {
            "group": names[int(used[i])],
            "tasks": int(count[i]),
            "total": float(total[i]),
            "mean": float(total[i] / count[i]),
            "max": float(longest[i]),
            "wait": float(waited[i] / count[i]),
            "errors": int(errors[i]),
        }
        for i in order.tolist()
    ]


def _frame(*args: Any, **kwargs: Any) -> pd.DataFrame:
    import pandas as pd  # imported on first use: profile() itself stays light

    df: pd.DataFrame = pd.DataFrame(*args, **kwargs)
    return df
