"""Task records: one row per task, timed where it ran, in compact columns.

A row holds ``start`` (float64 perf_counter seconds), ``wait`` (start - submit) and
``duration`` (float32), the worker, the key's *name* id, the end offset of the key's
suffix text, the error type id and the compute number: 36 bytes plus a short suffix
(``", 0, 1)"`` or a key's hash). Keys are interned per name: a label is the name's
prefix followed by the row's suffix, so no key, task or result object is kept alive.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable
from typing import Any

import numpy as np

from ..hooks import Compute, TaskEvent
from ..keys import key_label, task_group
from .base import Collector, Columns

SPEC = {
    "start": "d",
    "wait": "f",
    "duration": "f",
    "worker": "H",
    "name": "I",
    "end": "Q",
    "error": "H",
    "compute": "I",
}

_HEX_OR_DIGIT = frozenset("0123456789abcdef")


def _is_token(word: str) -> bool:
    if not word.isalpha():
        return True
    return len(word) == 8 and word[0] in _HEX_OR_DIGIT


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
        self.text = bytearray()
        self.text_base = 0
        self._main_tid = threading.main_thread().ident
        self._cols = self.columns.cols

    # -------------------------------------------------------------- interning
    def _group_id(self, group: str) -> int:
        gid = self._group_ids.get(group)
        if gid is None:
            gid = self._group_ids[group] = len(self.groups)
            self.groups.append(group)
        return gid

    def _add_name(self, prefix: str, group: str) -> int:
        self.names.append((prefix, self._group_id(group)))
        return len(self.names) - 1

    def _tuple_name(self, key: tuple[Any, ...], compute: Compute) -> int:
        group = task_group(key, compute.dsk.get(key))
        nid = self._add_name(f"({key[0]!r}, ", group)
        self._tuple_names[key[0]] = nid
        return nid

    def _str_name(self, key: str, compute: Compute) -> tuple[int, str]:
        head, sep, tail = key.rpartition("-")
        if sep and head and _is_token(tail):
            nid = self._str_names.get(head)
            if nid is None:
                group = task_group(key, compute.dsk.get(key))
                nid = self._str_names[head] = self._add_name(head + "-", group)
            return nid, tail
        nid = self._str_names.get(key)
        if nid is None:
            group = task_group(key, compute.dsk.get(key))
            nid = self._str_names[key] = self._add_name(key, group)
        return nid, ""

    def _other_name(self, key: Hashable, compute: Compute) -> tuple[int, str]:
        label = key_label(key)
        nid = self._str_names.get(label)
        if nid is None:
            group = task_group(key, compute.dsk.get(key))
            nid = self._str_names[label] = self._add_name(label, group)
        return nid, ""

    def _name_and_suffix(self, key: Any, compute: Compute) -> tuple[int, str]:
        if type(key) is tuple and len(key) > 1 and type(key[0]) is str:
            nid = self._tuple_names.get(key[0])
            if nid is None:
                nid = self._tuple_name(key, compute)
            rest = repr(key[1:])
            return nid, (rest[1:-2] + ")" if len(key) == 2 else rest[1:])
        if type(key) is str:
            return self._str_name(key, compute)
        return self._other_name(key, compute)

    def _worker_id(self, pid: int, tid: int) -> int:
        wid = self._worker_ids.get((pid, tid))
        if wid is None:
            label = worker_label(pid, tid, len(self.workers), self._main_tid)
            wid = self._worker_ids[(pid, tid)] = len(self.workers)
            self.workers.append((pid, tid, label))
        return wid

    def _error_id(self, error: str | None) -> int:
        eid = self._error_ids.get(error)
        if eid is None:
            eid = self._error_ids[error] = len(self.error_types)
            self.error_types.append(error)
        return eid

    # -------------------------------------------------------------- listening
    def on_compute_start(self, compute: Compute) -> None:
        self.columns.repair()

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        nid, suffix = self._name_and_suffix(event.key, compute)
        wid = self._worker_id(event.pid, event.tid)
        eid = 0 if event.error is None else self._error_id(event.error)
        start = event.start
        c = self._cols
        with self.lock:
            self.text += suffix.encode()
            c["start"].append(start)
            c["wait"].append(start - event.submit)
            c["duration"].append(event.stop - start)
            c["worker"].append(wid)
            c["name"].append(nid)
            c["end"].append(self.text_base + len(self.text))
            c["error"].append(eid)
            c["compute"].append(compute.id)
            self.columns.commit()

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
        ``compute``, plus the lookup tables and ``dropped`` (rows lost before
        ``cursor`` because of the cap).
        """
        with self.lock:
            rows, new_cursor = self.columns.since_locked(cursor)
            first = self.columns.first
            lo = max(cursor, first)
            text = bytes(self.text)
            base = self.text_base
            names = list(self.names)
            prev_end = self._end_before(lo)
            lookups: dict[str, list[Any]] = {
                "groups": list(self.groups),
                "workers": [label for _, _, label in self.workers],
                "error_types": list(self.error_types),
            }
        decoded = decode(
            rows,
            names=names,
            text=text,
            base=base,
            prev_end=prev_end,
            lookups=lookups,
            dropped=max(0, first - cursor),
        )
        return decoded, new_cursor

    def _end_before(self, lo: int) -> int:
        """Absolute text offset where row ``lo``'s suffix starts (call under lock)."""
        i = lo - self.columns.first
        if i <= 0:
            return self.text_base
        return int(self._cols["end"][i - 1])

    def snapshot(self) -> dict[str, Any]:
        """All kept rows, decoded (see :meth:`since`)."""
        out, _ = self.since(0)
        out["dropped"] = self.columns.dropped
        return out


def decode(
    rows: dict[str, np.ndarray],
    *,
    names: list[tuple[str, int]],
    text: bytes,
    base: int,
    prev_end: int,
    lookups: dict[str, list[Any]],
    dropped: int,
) -> dict[str, Any]:
    """Turn raw rows into key labels, groups and absolute times."""
    ends = rows["end"].astype(np.int64) - base
    starts = np.empty_like(ends)
    if len(ends):
        starts[0] = prev_end - base
        starts[1:] = ends[:-1]
    prefixes = [p for p, _ in names]
    name_groups = np.array([g for _, g in names] or [0], dtype=np.uint32)
    keys = [
        prefixes[n] + text[s:e].decode()
        for n, s, e in zip(rows["name"].tolist(), starts.tolist(), ends.tolist(), strict=False)
    ]
    start = rows["start"]
    return {
        "key": keys,
        "group": name_groups[rows["name"]] if keys else np.empty(0, np.uint32),
        "worker": rows["worker"],
        "submit": start - rows["wait"].astype(np.float64),
        "start": start,
        "stop": start + rows["duration"].astype(np.float64),
        "error": rows["error"],
        "compute": rows["compute"],
        "dropped": dropped,
        **lookups,
    }
