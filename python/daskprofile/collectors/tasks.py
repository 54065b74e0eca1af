"""Task records: one row per task, timed where it ran, in compact columns.

A row holds ``start`` (float64 perf_counter seconds), ``wait`` (start - submit) and
``duration`` (float32), the worker, the key's *name* id, the end offset of the key's
suffix text, the error type id, the compute number and the span id: 38 bytes plus a short
suffix (``", 0, 1)"`` or a key's hash). Keys are interned per name: a label is the name's
prefix followed by the row's suffix, so no key, task or result object is kept alive.
Tasks that raised also get a row in the collector's exceptions table
(:mod:`.exceptions`), with their message and traceback.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import hooks
from ..failures import EXTRA
from ..hooks import Compute, TaskBatch
from ..keys import key_label, stem_end, task_group
from ..spans import Name
from .base import Collector, Columns
from .exceptions import ExceptionTable

SPEC = {
    "start": "d",
    "wait": "f",
    "duration": "f",
    "worker": "H",
    "name": "I",
    "end": "Q",
    "error": "H",
    "compute": "I",
    "span": "H",
}


#: set in a row's name id when its suffix is a uuid stored as 16 raw bytes
UUID_FLAG = 0x8000_0000
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _tuple_suffix(key: tuple[Any, ...]) -> str:
    """What follows ``"('name', "`` in ``str(key)``."""
    rest = repr(key[1:])
    return rest[1:-2] + ")" if len(key) == 2 else rest[1:]


_Times = tuple[Sequence[float], Sequence[float], Sequence[float]]
_Ids = tuple[list[int], list[int], list[int] | None, list[int]]


@dataclass
class RemoteRows:
    """Task rows recorded elsewhere, column by column (:meth:`TaskCollector.add_rows`)."""

    key: list[str]
    group: list[str]
    worker: list[str]
    submit: Sequence[float]
    start: Sequence[float]
    stop: Sequence[float]
    error: list[str | None]
    compute: list[int]
    #: each row's span names (None: no span); None: no row has one
    span: list[Name | None] | None = None
    #: each failed row's ``(message, traceback)`` (None where unknown); None: none known
    exception: list[tuple[str, str] | None] | None = None


def worker_label(pid: int, tid: int, index: int, main_tid: int | None = None) -> str:
    """Short display label: ``"thread 3"``, ``"main thread"`` or ``"process 12345"``."""
    if pid != os.getpid():
        return f"process {pid}"
    if tid == main_tid:
        return "main thread"
    return f"thread {index}"


class TaskCollector(Collector):
    """Records every task of every compute it listens to."""

    name = "tasks"

    def __init__(self, max_records: int | None = None) -> None:
        super().__init__()
        self.columns = Columns(SPEC, max_records)
        self.columns.on_drop = self._on_drop
        self.lock = self.columns.lock
        # interning tables (append-only; small)
        self.groups: list[str] = []
        self._group_ids: dict[str, int] = {}
        self.names: list[tuple[str, int]] = []  # (label prefix, group id)
        self._tuple_names: dict[Any, int] = {}
        self._str_names: dict[str, int] = {}
        self.workers: list[tuple[int, int, str]] = []  # (pid, tid, label)
        self._worker_ids: dict[tuple[int, int], int] = {}
        self.error_types: list[str | None] = [None]
        self._error_ids: dict[str | None, int] = {None: 0}
        self.spans: list[Name | None] = [None]  # span id -> names
        self._span_ids: dict[Name | None, int] = {None: 0}
        #: the tasks that raised, with their message and traceback
        self.exceptions = ExceptionTable()
        #: told which rows each batch wrote (a :class:`~.graph.GraphRecorder`), if any
        self.graph: Any = None
        self.text = bytearray()
        self.text_base = 0
        self._main_tid = threading.main_thread().ident
        self._intern_lock = threading.Lock()
        self._by_tid: dict[int, tuple[int, int]] = {}  # thread ident -> (pid, worker id)
        self._remote_names: dict[str, int] = {}  # label prefix of keys added as rows
        self._remote_workers: dict[str, int] = {}  # worker label of rows added -> id
        self._cols = c = self.columns.cols
        # bound appends of the columns (arrays are only ever trimmed in place)
        self._start, self._wait, self._duration = (
            c[n].append for n in ("start", "wait", "duration")
        )
        self._worker, self._name, self._end = (c[n].append for n in ("worker", "name", "end"))
        self._error, self._compute = c["error"].append, c["compute"].append

    # -------------------------------------------------------------- interning
    # Lookups are lock-free dict reads; a miss takes ``_intern_lock`` and checks again,
    # so two scheduling threads computing at once never give one name two ids.
    def _intern(self, table: dict[Any, int], item: Any, make: Callable[[], int]) -> int:
        with self._intern_lock:
            found = table.get(item)
            if found is None:
                found = table[item] = make()
            return found

    def _group_id(self, group: str) -> int:
        gid = self._group_ids.get(group)
        if gid is None:
            gid = self._group_ids[group] = len(self.groups)
            self.groups.append(group)
        return gid

    def _add_name(self, prefix: str, key: Hashable, compute: Compute) -> int:
        group = task_group(key, compute.dsk.get(key))
        self.names.append((prefix, self._group_id(group)))
        return len(self.names) - 1

    def _tuple_name(self, key: tuple[Any, ...], compute: Compute) -> int:
        return self._intern(
            self._tuple_names, key[0], lambda: self._add_name(f"({key[0]!r}, ", key, compute)
        )

    def _stem(self, stem: str, key: Hashable, compute: Compute) -> int:
        nid = self._str_names.get(stem)
        if nid is None:
            nid = self._intern(self._str_names, stem, lambda: self._add_name(stem, key, compute))
        return nid

    def _str_name(self, key: str, compute: Compute) -> tuple[int, str]:
        end = stem_end(key)
        if end > 0:
            return self._stem(key[:end], key, compute), key[end:]
        return self._stem(key, key, compute), ""

    def _name_and_suffix(self, key: Any, compute: Compute) -> tuple[int, str]:
        if type(key) is tuple and len(key) > 1 and type(key[0]) is str:
            nid = self._tuple_names.get(key[0])
            if nid is None:
                nid = self._tuple_name(key, compute)
            return nid, _tuple_suffix(key)
        if type(key) is str:
            return self._str_name(key, compute)
        return self._stem(key_label(key), key, compute), ""

    def _worker_id(self, pid: int, tid: int) -> int:
        def make() -> int:
            self.workers.append(
                (pid, tid, worker_label(pid, tid, len(self.workers), self._main_tid))
            )
            return len(self.workers) - 1

        wid = self._intern(self._worker_ids, (pid, tid), make)
        self._by_tid[tid] = (pid, wid)
        return wid

    def _error_id(self, error: str | None) -> int:
        eid = self._error_ids.get(error)
        if eid is None:

            def make() -> int:
                self.error_types.append(error)
                return len(self.error_types) - 1

            eid = self._intern(self._error_ids, error, make)
        return eid

    def _span_id(self, name: Name | None) -> int:
        sid = self._span_ids.get(name)
        if sid is None:

            def make() -> int:
                self.spans.append(name)
                return len(self.spans) - 1

            sid = self._intern(self._span_ids, name, make)
        return sid

    def _span_ids_of(self, compute: Compute, keys: tuple[Any, ...]) -> list[int] | None:
        """Span id of each task of a batch; None when the compute has no span."""
        found = compute.spans
        if found is None:
            return None
        now, keyed = found
        default = self._span_id(now)
        if not keyed:
            return [default] * len(keys)
        ids = {name: self._span_id(name) for name in set(keyed.values())}
        return [ids[keyed[k]] if k in keyed else default for k in keys]

    # -------------------------------------------------------------- listening
    def on_compute_start(self, compute: Compute) -> None:
        self.columns.repair()

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        n = len(batch)
        fast = self._common_keys(batch.key)
        if fast is not None:
            nids, texts = fast
            raw = "".join(texts).encode()
            lengths = np.fromiter(map(len, texts), dtype=np.uint64, count=n)
        else:
            nids, raws = self._any_keys(batch.key, compute)
            raw = b"".join(raws)
            lengths = np.fromiter(map(len, raws), dtype=np.uint64, count=n)
        wids = self._worker_ids_of(batch)
        errors = (
            [0 if e is None else self._error_id(e) for e in batch.error]
            if any(batch.error)
            else None
        )
        ids = (wids, nids, errors, [compute.id] * n)
        spans = self._span_ids_of(compute, batch.key)
        first = self._append((batch.submit, batch.start, batch.stop), ids, (raw, lengths), spans)
        if self.graph is not None:
            self.graph.rows(compute, batch.key, first)
        if errors is not None:
            self._note_failures(compute, batch, wids, nids, spans)

    def _note_failures(
        self,
        compute: Compute,
        batch: TaskBatch,
        wids: list[int],
        nids: list[int],
        spans: list[int] | None,
    ) -> None:
        """The batch's failed tasks, into the exceptions table."""
        for i, error in enumerate(batch.error):
            if error is None:
                continue
            extra = batch.extra[i]
            message, trace = (extra or {}).get(EXTRA) or ("", "")
            self.exceptions.add(
                key_label(batch.key[i]),
                self.groups[self.names[nids[i] & ~UUID_FLAG][1]],
                self.workers[wids[i]][2],
                batch.stop[i],
                error,
                message,
                trace,
                compute.id,
                self.spans[spans[i]] if spans is not None else None,
            )

    def _append(
        self,
        times: _Times,
        ids: _Ids,
        keys: tuple[bytes, np.ndarray],
        spans: list[int] | None = None,
    ) -> int:
        """Append rows: ``(submit, start, stop)`` perf_counter times; ``(worker, name, error,
        compute)`` ids (errors None: none); the keys' suffix bytes and their lengths; span
        ids (None: none). Returns the absolute index of the first row."""
        wids, nids, errors, computes = ids
        raw, lengths = keys
        n = len(wids)
        start = np.array(times[1], dtype=np.float64)
        wait = (start - np.array(times[0], dtype=np.float64)).astype(np.float32)
        duration = (np.array(times[2], dtype=np.float64) - start).astype(np.float32)
        cols, c = self.columns, self._cols
        with self.lock:
            first = cols.n
            ends = np.cumsum(lengths) + np.uint64(self.text_base + len(self.text))
            self.text += raw
            c["start"].frombytes(start.tobytes())
            c["wait"].frombytes(wait.tobytes())
            c["duration"].frombytes(duration.tobytes())
            c["worker"].extend(wids)
            c["name"].extend(nids)
            c["end"].frombytes(ends.tobytes())
            if errors is None:
                c["error"].frombytes(bytes(2 * n))
            else:
                c["error"].extend(errors)
            c["compute"].extend(computes)
            if spans is None:
                c["span"].frombytes(bytes(2 * n))
            else:
                c["span"].extend(spans)
            cols.n += n
            while cols.n - cols.first > cols.cap:
                cols.make_room()
        return first

    def add_rows(self, rows: RemoteRows) -> int:
        """Append task rows recorded elsewhere (a cluster's scheduler): keys as labels,
        groups and workers as names, times in this process's ``perf_counter`` seconds.
        Returns the absolute index of the first row (see :meth:`shift`)."""
        n = len(rows.key)
        nids: list[int] = []
        raws: list[bytes] = []
        for label, group in zip(rows.key, rows.group, strict=True):
            nid, suffix = self._label_name(label, group)
            nids.append(nid)
            raws.append(suffix.encode())
        wids = [self._remote_worker_id(label) for label in rows.worker]
        errors = [0 if e is None else self._error_id(e) for e in rows.error]
        lengths = np.fromiter(map(len, raws), dtype=np.uint64, count=n)
        times = (rows.submit, rows.start, rows.stop)
        ids = (wids, nids, errors, rows.compute)
        spans = None if rows.span is None else [self._span_id(s) for s in rows.span]
        first = self._append(times, ids, (b"".join(raws), lengths), spans)
        if self.graph is not None:
            self.graph.remote_rows(rows.key, first)
        if any(errors):
            self._note_remote_failures(rows)
        return first

    def _note_remote_failures(self, rows: RemoteRows) -> None:
        """Rows recorded elsewhere that failed, into the exceptions table."""
        for i, error in enumerate(rows.error):
            if error is None:
                continue
            texts = rows.exception[i] if rows.exception is not None else None
            message, trace = texts or ("", "")
            self.exceptions.add(
                rows.key[i],
                rows.group[i],
                rows.worker[i],
                rows.stop[i],
                error,
                message,
                trace,
                rows.compute[i],
                rows.span[i] if rows.span is not None else None,
            )

    def shift(self, row: int, delta: float) -> None:
        """Move absolute row ``row``'s start and stop by ``delta`` seconds (a late clock
        correction); nothing if the row is no longer kept."""
        with self.lock:
            i = row - self.columns.first
            if 0 <= i < len(self.columns):
                self._cols["start"][i] += delta
                self._cols["wait"][i] += delta

    def _label_name(self, label: str, group: str) -> tuple[int, str]:
        """Name id and suffix of a key given as its label (``"('x-1a2b', 0, 1)"``)."""
        if label.startswith("('"):
            cut = label.find("', ")
            if cut > 0:
                return self._named(label[: cut + 3], group), label[cut + 3 :]
        end = stem_end(label)
        if end > 0:
            return self._named(label[:end], group), label[end:]
        return self._named(label, group), ""

    def _named(self, prefix: str, group: str) -> int:
        def make() -> int:
            self.names.append((prefix, self._group_id(group)))
            return len(self.names) - 1

        nid = self._remote_names.get(prefix)
        if nid is None:
            nid = self._intern(self._remote_names, prefix, make)
        return nid

    def _remote_worker_id(self, label: str) -> int:
        def make() -> int:
            self.workers.append((0, 0, label))
            return len(self.workers) - 1

        wid = self._remote_workers.get(label)
        if wid is None:
            wid = self._intern(self._remote_workers, label, make)
        return wid

    def _common_keys(self, keys: tuple[Any, ...]) -> tuple[list[int], list[str]] | None:
        """Name ids and suffix texts if every key is ``('known-name', int)``, else None."""
        names = self._tuple_names
        try:
            nids = [
                names[k[0]] for k in keys if type(k) is tuple and len(k) == 2 and type(k[1]) is int
            ]
        except KeyError:  # a name seen for the first time
            return None
        if len(nids) != len(keys):
            return None
        return nids, [f"{k[1]})" for k in keys]

    def _any_keys(self, keys: tuple[Any, ...], compute: Compute) -> tuple[list[int], list[bytes]]:
        """Name ids (interning new names) and suffix bytes of any keys."""
        nids: list[int] = []
        raws: list[bytes] = []
        for key in keys:
            nid, suffix = self._name_and_suffix(key, compute)
            if len(suffix) == 36 and _UUID.fullmatch(suffix):  # delayed keys: 16 bytes
                nids.append(nid | UUID_FLAG)
                raws.append(bytes.fromhex(suffix.replace("-", "")))
            else:
                nids.append(nid)
                raws.append(suffix.encode())
        return nids, raws

    def _worker_ids_of(self, batch: TaskBatch) -> list[int]:
        by_tid = self._by_tid
        out: list[int] = []
        last_tid = last_pid = last_wid = -1
        for pid, tid in zip(batch.pid, batch.tid, strict=True):
            if tid != last_tid or pid != last_pid:
                w = by_tid.get(tid)
                last_wid = w[1] if w is not None and w[0] == pid else self._worker_id(pid, tid)
                last_tid, last_pid = tid, pid
            out.append(last_wid)
        return out

    def _on_drop(self, k: int) -> None:
        # called under the lock before the k oldest rows go: drop their suffix text too
        cut = int(self._cols["end"][k - 1])
        del self.text[: cut - self.text_base]
        self.text_base = cut

    # -------------------------------------------------------------- reading
    def since(self, cursor: int = 0) -> tuple[dict[str, Any], int]:
        """Rows after absolute index ``cursor`` (decoded) and the next cursor.

        Cheap enough for a live publisher: copies only the new rows. The returned
        dict has ``key`` (list of str), ``group`` (uint32 ids into ``groups``),
        ``worker`` (uint16 ids into ``workers``), ``submit``/``start``/``stop``
        (float64 perf_counter seconds), ``error`` (ids into ``error_types``),
        ``compute``, ``span`` (ids into ``spans``: lists of names, or None), plus the
        lookup tables and ``dropped`` (rows lost before ``cursor`` because of the cap).
        """
        compact, new_cursor = self.since_compact(cursor)
        return decode(compact), new_cursor

    def since_compact(self, cursor: int = 0) -> tuple[dict[str, Any], int]:
        """Like :meth:`since`, but the rows stay in their compact form (see :func:`decode`)."""
        hooks.flush()  # rows of running computes not handed over yet
        with self.lock:
            rows, new_cursor = self.columns.since_locked(cursor)
            first = self.columns.first
            prev_end = self._end_before(max(cursor, first))
            compact = {
                "compact": True,
                "rows": rows,
                "names": list(self.names),
                "text": bytes(self.text[prev_end - self.text_base :]),
                "base": prev_end,
                "groups": list(self.groups),
                "workers": [label for _, _, label in self.workers],
                "error_types": list(self.error_types),
                "spans": [list(s) if s else None for s in self.spans],
                "dropped": max(0, first - cursor),
            }
        return compact, new_cursor

    def keys_at(self, rows: list[int]) -> list[str]:
        """Key labels of absolute rows ``rows`` (``""`` for a row not kept or not yet
        written): only those rows are decoded, however long the table."""
        hooks.flush()
        with self.lock:
            first, kept = self.columns.first, self.columns.n - self.columns.first
            c = self._cols
            return _labels_at(
                [row - first for row in rows],
                names=self.names,
                nids=c["name"],
                ends=c["end"],
                text=self.text,
                base=self.text_base,
                count=kept,
            )

    def _end_before(self, lo: int) -> int:
        """Absolute text offset where row ``lo``'s suffix starts (call under lock)."""
        i = lo - self.columns.first
        if i <= 0:
            return self.text_base
        return int(self._cols["end"][i - 1])

    def snapshot(self) -> dict[str, Any]:
        """All kept rows, decoded (see :meth:`since`)."""
        return decode(self.snapshot_compact())

    def snapshot_compact(self) -> dict[str, Any]:
        """All kept rows in compact form, what a finished Run keeps (about 40 B/task plus
        the key suffixes); ``run.raw("tasks")`` and :func:`decode` turn it into columns."""
        out, _ = self.since_compact(0)
        out["dropped"] = self.columns.dropped
        return out


def decode(compact: dict[str, Any], keys: bool = True) -> dict[str, Any]:
    """Turn compact rows (:meth:`TaskCollector.since_compact`) into key labels, group ids
    and absolute times (the form of :meth:`TaskCollector.since`). With ``keys=False`` the
    ``key`` column is left out: what needs only groups, workers and times (a summary)
    skips the one per-row Python step."""
    rows, names = compact["rows"], compact["names"]
    name_groups = np.array([g for _, g in names] or [0], dtype=np.uint32)
    start = rows["start"]
    out: dict[str, Any] = {}
    if keys:
        out["key"] = _key_labels(rows, names, compact["text"], compact["base"])
    out |= {
        "group": name_groups[rows["name"] & ~np.uint32(UUID_FLAG)]
        if len(start)
        else np.empty(0, np.uint32),
        "worker": rows["worker"],
        "submit": start - rows["wait"].astype(np.float64),
        "start": start,
        "stop": start + rows["duration"].astype(np.float64),
        "error": rows["error"],
        "compute": rows["compute"],
        "span": rows["span"],
        "dropped": compact["dropped"],
        "groups": compact["groups"],
        "workers": compact["workers"],
        "error_types": compact["error_types"],
        "spans": compact.get("spans", [None]),
    }
    return out


def _label(names: list[tuple[str, int]], nid: int, suffix: bytes) -> str:
    """A key's label: its name's prefix followed by its suffix (a raw uuid if flagged)."""
    if nid < UUID_FLAG:
        return names[nid][0] + suffix.decode()
    return names[nid ^ UUID_FLAG][0] + _uuid_text(suffix)


def _key_labels(
    rows: dict[str, np.ndarray], names: list[tuple[str, int]], text: bytes, base: int
) -> list[str]:
    """Each row's key label: its name's prefix followed by its suffix text."""
    ends = rows["end"].astype(np.int64) - base
    starts = np.zeros_like(ends)
    starts[1:] = ends[:-1]
    return [
        _label(names, n, text[s:e])
        for n, s, e in zip(rows["name"].tolist(), starts.tolist(), ends.tolist(), strict=False)
    ]


def keys_at(compact: dict[str, Any], rows: list[int]) -> list[str]:
    """Key labels of rows ``rows`` (0 = the oldest kept) of a compact table; ``""`` for a
    row out of range. Only those rows are decoded."""
    cols = compact["rows"]
    return _labels_at(
        rows,
        names=compact["names"],
        nids=cols["name"],
        ends=cols["end"],
        text=compact["text"],
        base=compact["base"],
        count=len(cols["end"]),
    )


def _labels_at(
    rows: list[int],
    *,
    names: list[tuple[str, int]],
    nids: Any,
    ends: Any,
    text: bytes | bytearray,
    base: int,
    count: int,
) -> list[str]:
    """Labels of rows ``rows`` (0-based; ``""`` outside ``0..count-1``) from a name-id and
    an end-offset column over ``text`` (whose first byte is at offset ``base``)."""
    out = []
    for i in rows:
        if not 0 <= i < count:
            out.append("")
            continue
        lo = (int(ends[i - 1]) if i else base) - base
        out.append(_label(names, int(nids[i]), bytes(text[lo : int(ends[i]) - base])))
    return out
