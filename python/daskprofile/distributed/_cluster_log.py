"""Client side of the cluster tables: what the plugins send besides tasks, held per source.

A :class:`ClusterLog` receives each worker's ``tables`` from the worker plugin (actions,
transfers, memory samples), the scheduler plugin's ``members`` (workers present, joining,
leaving) and ``actions`` (read from the scheduler's ``startstops`` when workers lack
daskprofile), or the scheduler's heartbeats (memory, same case). It keeps them in bounded
columns, times in the kernel's ``perf_counter`` seconds, and gives a run the rows of its
time window in the raw forms of :mod:`daskprofile.cluster_tables`: whole
(:meth:`ClusterLog.table`, as a run freezes) or the rows after a cursor
(:meth:`ClusterLog.since`, what a live run's readers copy per poll). One log serves every
client of a :class:`~.source.ClusterSource`; it is thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..cluster_tables import ACTIONS, NAMES, KeyText, Table, empty, select
from ..collectors.base import Columns
from ._common import MEMORY_COUNTS
from ._tables import Lookup

__all__ = ["ClusterLog", "attach_tables", "why_left"]

ACTION_SPEC = {
    "start": "d",
    "stop": "d",
    "action": "B",
    "worker": "H",
    "peer": "H",
    "bytes": "q",
    "name": "I",
    "end": "Q",
}
TRANSFER_SPEC = {
    "start": "d",
    "stop": "d",
    "direction": "B",
    "source": "H",
    "destination": "H",
    "bytes": "q",
    "compressed": "q",
    "keys": "I",
    "type": "H",
}
MEMORY_SPEC = {"time": "d", "worker": "H", **dict.fromkeys(MEMORY_COUNTS, "q")}
#: seconds around a run's window within which rows still belong to it
_SLACK = 1e-3
#: seconds by which a row may come before rows of earlier times (where a run's live
#: readers start looking: :meth:`ClusterLog.start`)
_DISORDER = 60.0


def why_left(cause: str, reason: str | None, expected: bool | None) -> str:
    """``"retired"``, ``"closed"``, ``"timed out"`` or ``"lost"`` (it died without saying:
    killed, crashed, or its connection broke) from what the scheduler knew."""
    if expected or cause.startswith(("retire-workers", "worker-close-gracefully")):
        return "retired"
    if reason:
        return "closed"
    if cause.startswith("check-worker-ttl"):
        return "timed out"
    return "lost"


class _Roster:
    """Rows of the ``workers`` table: one per stay of a worker in the cluster."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._open: dict[str, dict[str, Any]] = {}  # address -> its row while it stays
        #: counts the changes (a reader skips rebuilding its table while it is the same)
        self.version = 0

    def arrived(self, info: Mapping[str, Any], when: float | None) -> None:
        address = str(info.get("address") or "")
        if not address or address in self._open:
            return  # known already (told by the start and the hook, or by two clients)
        row = {
            "address": address,
            "name": str(info.get("name") or ""),
            "host": str(info.get("host") or ""),
            "pid": int(info.get("pid") or 0),
            "threads": int(info.get("nthreads") or 0),
            "memory_limit": int(info.get("memory_limit") or 0),
            "joined": when,
            "left": None,
            "reason": None,
            "cause": None,
            "processing": [],
            "lost": [],
            "killed": [],
        }
        self.rows.append(row)
        self._open[address] = row
        self.version += 1

    def left(self, record: Mapping[str, Any], when: float) -> None:
        address = str(record.get("address") or "")
        row = self._open.pop(address, None)
        if row is None:
            last = next((r for r in reversed(self.rows) if r["address"] == address), None)
            if last is not None and last["left"] is not None and abs(last["left"] - when) < 1:
                return  # the same leave, told by a second client's plugin
            self.arrived({"address": address}, None)
            row = self._open.pop(address)
        cause = str(record.get("cause") or "")
        reason = record.get("reason")
        self.version += 1
        row["left"] = when
        row["reason"] = why_left(cause, reason, record.get("expected"))
        row["cause"] = f"{cause} (worker: {reason})" if reason else cause
        for field in ("processing", "lost", "killed"):
            row[field] = [str(k) for k in record.get(field) or ()]

    def table(self, t0: float, t1: float | None) -> Table:
        out = empty("workers")
        for row in self.rows:
            joined, left = row["joined"], row["left"]
            if t1 is not None and joined is not None and joined > t1 + _SLACK:
                continue
            if left is not None and left < t0 - _SLACK:
                continue
            for field, value in row.items():
                out[field].append(list(value) if isinstance(value, list) else value)
        return out


class ClusterLog:
    """Actions, transfers, memory samples and workers of a cluster (see the module)."""

    def __init__(self, max_records: int | None = None) -> None:
        self.lock = threading.RLock()
        self.addresses = Lookup([""])  # worker addresses; 0: none
        self.types = Lookup([""])  # type names of data moved; 0: not known
        self.kinds = Lookup(list(ACTIONS))
        self.keys = KeyText()
        self.actions = Columns(ACTION_SPEC, max_records)
        self.actions.on_drop = self._drop_text
        self.text = bytearray()  # key suffixes of the action rows kept
        self.text_base = 0  # absolute offset of text[0]
        self.transfers = Columns(TRANSFER_SPEC, max_records)
        self.memory = Columns(MEMORY_SPEC, max_records)
        self.limits: dict[int, int] = {}  # worker id -> memory limit
        self.roster = _Roster()
        #: rows the plugins could not send (lost on the worker)
        self.lost = {"actions": 0, "transfers": 0}
        #: errors the plugins reported for these tables
        self.errors: list[str] = []
        self._readers: dict[int, float] = {}  # id(run) -> t0, of the runs reading
        self._trimmed = dict.fromkeys(("actions", "transfers", "memory"), 0)

    # ------------------------------------------------------------ receiving
    def worker_tables(self, tables: Mapping[str, Any], to_perf: float) -> list[str]:
        """One worker message's ``tables``: ``{address: {actions, transfers, memory, limit,
        lost, error}}``, times in the scheduler's clock. Returns the errors reported."""
        errors: list[str] = []
        with self.lock:
            for address, part in tables.items():
                wid = self.addresses.id(str(address))
                if part.get("limit") is not None:
                    self.limits[wid] = int(part["limit"])
                if part.get("actions"):
                    self.add_actions(part["actions"], to_perf, worker=wid)
                if part.get("transfers"):
                    self._transfers(wid, part["transfers"], to_perf)
                if part.get("memory"):
                    self._memory(wid, part["memory"], to_perf)
                for name, n in (part.get("lost") or {}).items():
                    self.lost[name] = self.lost.get(name, 0) + int(n)
                if part.get("error"):
                    errors.append(str(part["error"]))
        self.errors += errors
        return errors

    def scheduler_tables(self, msg: Mapping[str, Any], to_perf: float) -> list[str]:
        """A scheduler batch's ``members`` and ``actions`` (times in its clock). Returns
        the errors reported."""
        errors: list[str] = []
        with self.lock:
            for record in msg.get("members") or ():
                self._member(record, to_perf)
            if msg.get("actions"):
                self.add_actions(msg["actions"], to_perf)
            if msg.get("tables_error"):
                errors.append(str(msg["tables_error"]))
        self.errors += errors
        return errors

    def _member(self, record: Mapping[str, Any], to_perf: float) -> None:
        when = record.get("time")
        t = None if when is None else float(when) + to_perf
        if record.get("event") == "left":
            self.roster.left(record, t if t is not None else 0.0)
            return
        self.roster.arrived(record, t)
        limit = record.get("memory_limit")
        if limit:
            self.limits.setdefault(self.addresses.id(str(record["address"])), int(limit))

    def add_actions(
        self, rows: Mapping[str, Sequence[Any]], to_perf: float, worker: int | None = None
    ) -> None:
        """Action rows: ``key`` labels, ``group``, ``action``, ``start``/``stop`` (scheduler
        clock), ``peer`` address, ``bytes`` (-1: not known), and ``worker`` addresses unless
        all are of ``worker`` (an id)."""
        n = len(rows["key"])
        if not n:
            return
        encode, address = self.keys.encode, self.addresses.id
        coded = [encode(str(k), str(g)) for k, g in zip(rows["key"], rows["group"], strict=True)]
        wids = [worker] * n if worker is not None else [address(str(w)) for w in rows["worker"]]
        lengths = np.fromiter((len(s) for _, s in coded), dtype=np.int64, count=n)
        with self.lock:
            cols = self.actions.cols
            ends = np.cumsum(lengths) + (self.text_base + len(self.text))
            self.text += b"".join(s for _, s in coded)
            cols["start"].extend([float(t) + to_perf for t in rows["start"]])
            cols["stop"].extend([float(t) + to_perf for t in rows["stop"]])
            cols["action"].extend([self.kinds.id(str(a)) for a in rows["action"]])
            cols["worker"].extend(wids)
            cols["peer"].extend([address(str(p)) if p else 0 for p in rows["peer"]])
            cols["bytes"].extend([int(b) for b in rows["bytes"]])
            cols["name"].extend([nid for nid, _ in coded])
            cols["end"].extend(ends.tolist())
            self._commit(self.actions, n)

    def _transfers(self, wid: int, rows: Mapping[str, Sequence[Any]], to_perf: float) -> None:
        n = len(rows["start"])
        peers = [self.addresses.id(str(p)) if p else 0 for p in rows["peer"]]
        incoming = [d == "incoming" for d in rows["direction"]]
        cols = self.transfers.cols
        cols["start"].extend([float(t) + to_perf for t in rows["start"]])
        cols["stop"].extend([float(t) + to_perf for t in rows["stop"]])
        cols["direction"].extend([0 if i else 1 for i in incoming])
        cols["source"].extend([p if i else wid for p, i in zip(peers, incoming, strict=True)])
        cols["destination"].extend([wid if i else p for p, i in zip(peers, incoming, strict=True)])
        cols["bytes"].extend([int(b) for b in rows["bytes"]])
        cols["compressed"].extend([int(c) for c in rows["compressed"]])
        cols["keys"].extend([int(k) for k in rows["keys"]])
        cols["type"].extend([self.types.id(str(t)) if t else 0 for t in rows["type"]])
        self._commit(self.transfers, n)

    def _memory(self, wid: int, rows: Mapping[str, Sequence[Any]], to_perf: float) -> None:
        n = len(rows["time"])
        cols = self.memory.cols
        cols["time"].extend([float(t) + to_perf for t in rows["time"]])
        cols["worker"].extend([wid] * n)
        for name in MEMORY_COUNTS:
            cols[name].extend([int(v) for v in rows[name]])
        self._commit(self.memory, n)

    def heartbeat(self, address: str, info: Mapping[str, Any], to_perf: float) -> None:
        """A worker's heartbeat seen by the scheduler (``identity``): one memory sample,
        its spilled keys and counters not known (workers without daskprofile)."""
        metrics = info.get("metrics") or {}
        seen, process = info.get("last_seen"), metrics.get("memory")
        if seen is None or process is None:
            return
        spilled = metrics.get("spilled_bytes") or {}
        managed = int(metrics.get("managed_bytes") or 0) - int(spilled.get("memory") or 0)
        row: dict[str, list[Any]] = {name: [-1] for name in MEMORY_COUNTS}
        row |= {"time": [seen], "process": [process], "managed": [max(0, managed)]}
        row["spilled"] = [int(spilled.get("disk") or 0)]
        with self.lock:
            wid = self.addresses.id(address)
            if info.get("memory_limit"):
                self.limits[wid] = int(info["memory_limit"])
            self._memory(wid, row, to_perf)

    def _commit(self, columns: Columns, n: int) -> None:
        with columns.lock:
            columns.n += n
            while columns.n - columns.first > columns.cap:
                columns.make_room()

    def _drop_text(self, k: int) -> None:
        cut = int(self.actions.cols["end"][k - 1])
        del self.text[: cut - self.text_base]
        self.text_base = cut

    # ------------------------------------------------------------ readers
    def read_by(self, run: Any) -> None:
        """``run`` reads its window of this log until :meth:`release`."""
        with self.lock:
            self._readers[id(run)] = float(run.t0)

    def release(self, run: Any) -> None:
        """``run`` has finished: the rows before the windows of every run still reading
        (and of this one, which reads them once more as it freezes) are let go."""
        with self.lock:
            t0 = self._readers.pop(id(run), None)
            if t0 is None:
                return
            cutoff = min([t0, *self._readers.values()]) - _SLACK
            for name in self._trimmed:
                self._trimmed[name] += self._trim(getattr(self, name), cutoff)

    def _trim(self, columns: Columns, cutoff: float) -> int:
        """Drop the leading rows older than ``cutoff``; how many."""
        with columns.lock:
            col = columns.cols["time" if "time" in columns.cols else "start"]
            k = _older(col, len(columns), cutoff)
            if k:
                columns._drop(k)
        return k

    # ------------------------------------------------------------ reading
    def table(self, name: str, t0: float, t1: float | None) -> Table:
        """Table ``name`` of the rows from ``t0`` to ``t1`` (None: to now), raw form."""
        with self.lock:
            if name == "workers":
                return self.roster.table(t0, t1)
            whole = self._whole(name)
        time = whole["time" if name == "memory" else "start"]
        keep = time >= t0 - _SLACK
        if t1 is not None:
            keep &= time <= t1 + _SLACK
        out = select(name, whole, keep)
        columns: Columns = getattr(self, name)
        lost = self.lost.get(name, 0)
        first = time[0] if len(time) else np.inf
        capped = columns.dropped - self._trimmed[name]  # rows lost to the cap
        out["dropped"] = lost + (capped if first > t0 else 0)
        return out

    def start(self, name: str, t0: float) -> int:
        """Absolute row of table ``name`` from which rows may belong to a window that
        starts at ``t0`` (rows come roughly in time order: up to a minute apart)."""
        with self.lock:
            columns: Columns = getattr(self, name)
            col = columns.cols["time" if name == "memory" else "start"]
            with columns.lock:
                return columns.first + _older(col, len(columns), t0 - _DISORDER)

    def since(self, name: str, cursor: int) -> tuple[Table, int]:
        """Raw rows of table ``name`` (actions, transfers, memory) from absolute row
        ``cursor`` on (those still kept), and the next cursor: only the new rows are copied
        (lookups are the live, append-only lists). A run's reader applies its window."""
        with self.lock:
            columns: Columns = getattr(self, name)
            with columns.lock:
                rows, end = columns.since_locked(cursor)
                lo = max(cursor, columns.first) - columns.first
                before = int(columns.cols["end"][lo - 1]) if name == "actions" and lo else None
            out: Table = empty(name)
            out.update(rows)
            out["workers"] = self.addresses.names
            if name == "actions":
                self._text_of(out, before)
            elif name == "transfers":
                out["types"] = self.types.names
            else:
                out["limits"] = [self.limits.get(i, 0) for i in range(len(out["workers"]))]
        return out, end

    def _text_of(self, out: Table, before: int | None) -> None:
        """Key text and lookups of action rows read by :meth:`since` (under the lock):
        ``before`` is the absolute text end of the row before them (None: none kept)."""
        lo = self.text_base if before is None else before
        hi = int(out["end"][-1]) if len(out["end"]) else lo
        out["text"] = bytes(self.text[lo - self.text_base : hi - self.text_base])
        out["end"] = (out["end"] - np.uint64(lo)).astype(np.uint32)
        out["names"] = self.keys.names
        out["groups"] = self.keys.groups
        out["actions"] = self.kinds.names

    def _whole(self, name: str) -> Table:
        """Every row kept, raw form (under the lock)."""
        columns: Columns = getattr(self, name)
        out: Table = empty(name)
        out.update(columns.snapshot())
        out["workers"] = self.addresses.copy()
        if name == "actions":
            out["end"] = (out["end"] - np.uint64(self.text_base)).astype(np.uint32)
            out["text"] = bytes(self.text)
            out["names"] = list(self.keys.names)
            out["groups"] = list(self.keys.groups)
            out["actions"] = self.kinds.copy()
        elif name == "transfers":
            out["types"] = self.types.copy()
        else:
            limits = self.limits
            out["limits"] = [limits.get(i, 0) for i in range(len(out["workers"]))]
        return out


def _older(col: Any, n: int, cutoff: float) -> int:
    """How many of the first ``n`` times of ``col`` (an array of doubles) come before the
    first one at or after ``cutoff``."""
    view = memoryview(col)
    try:
        newer = np.flatnonzero(np.frombuffer(view, dtype=np.float64, count=n) >= cutoff)
        return int(newer[0]) if len(newer) else n
    finally:
        view.release()


def attach_tables(log: ClusterLog, run: Any) -> None:
    """``run`` reads its cluster tables from ``log``: the rows of its window (``run.t0`` to
    ``run.meta.t1``), live and when it finishes (call ``log.release(run)`` then)."""
    log.read_by(run)
    for name in NAMES:
        run.attach(name, partial(_window, log, name, run))


def _window(log: ClusterLog, name: str, run: Any) -> Table:
    t1 = run.meta.t1
    return log.table(name, run.t0, None if t1 is None else float(t1))
