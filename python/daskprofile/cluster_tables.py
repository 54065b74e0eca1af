"""The Run's cluster tables: what distributed knows about a run beyond compute.

* ``actions``: the non-compute intervals of tasks on workers (``transfer``, ``disk-read``,
  ``disk-write``, ``deserialize``): key, group, action, worker, start, stop, peer (the
  worker a transfer came from), bytes (-1: not known);
* ``transfers``: the workers' transfer logs, one row per transfer and end that logged it
  (``incoming`` on the destination, ``outgoing`` on the source): start, stop, source,
  destination, bytes, compressed bytes (-1: not known), keys, type of the data moved;
* ``memory``: samples per worker: process memory, managed (in RAM), spilled (bytes on
  disk), spilled keys, spill and unspill counters;
* ``workers``: the workers seen, when they joined and left, why, and the tasks they took
  with them.

Raw forms (``Run.raw(name)``, what a finished run keeps) are numpy columns with ids into
small lookup lists; an action's key is an interned name and a short suffix in one bytes
buffer (:class:`KeyText`): about 45 B per action row and 43 B per transfer row. Times are
``perf_counter`` seconds of the kernel. ``workers`` is small and kept as lists.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .keys import stem_end

__all__ = [
    "ACTIONS",
    "DIRECTIONS",
    "NAMES",
    "KeyText",
    "empty",
    "from_lists",
    "key_labels",
    "load",
    "raw",
    "retained",
    "save",
    "select",
    "to_lists",
]

Table = dict[str, Any]

#: the cluster tables of a run
NAMES = ("actions", "transfers", "memory", "workers")
#: actions distributed records in a task's ``startstops`` (besides ``compute``)
ACTIONS = ("transfer", "disk-read", "disk-write", "deserialize")
#: which end of a transfer logged the row
DIRECTIONS = ("incoming", "outgoing")

#: numpy columns per table: name -> dtype
ACTION_COLUMNS = {
    "start": np.float64,
    "stop": np.float64,
    "action": np.uint8,
    "worker": np.uint16,
    "peer": np.uint16,
    "bytes": np.int64,
    "name": np.uint32,
    "end": np.uint32,
}
TRANSFER_COLUMNS = {
    "start": np.float64,
    "stop": np.float64,
    "direction": np.uint8,
    "source": np.uint16,
    "destination": np.uint16,
    "bytes": np.int64,
    "compressed": np.int64,
    "keys": np.uint32,
    "type": np.uint16,
}
MEMORY_COLUMNS = {
    "time": np.float64,
    "worker": np.uint16,
    "process": np.int64,
    "managed": np.int64,
    "spilled": np.int64,
    "spilled_keys": np.int64,
    "spill_count": np.int64,
    "spill_bytes": np.int64,
    "unspill_count": np.int64,
    "unspill_bytes": np.int64,
}
WORKER_FIELDS = (
    "address",
    "name",
    "host",
    "pid",
    "threads",
    "memory_limit",
    "joined",
    "left",
    "reason",
    "cause",
    "processing",
    "lost",
    "killed",
)
COLUMNS: dict[str, dict[str, Any]] = {
    "actions": ACTION_COLUMNS,
    "transfers": TRANSFER_COLUMNS,
    "memory": MEMORY_COLUMNS,
}
#: lookup lists kept beside the columns (saved as JSON)
LOOKUPS = {
    "actions": ("names", "groups", "workers", "actions", "dropped"),
    "transfers": ("workers", "types", "dropped"),
    "memory": ("workers", "limits", "dropped"),
}


def empty(name: str) -> Table:
    """An empty raw table ``name``."""
    if name == "workers":
        return {f: [] for f in WORKER_FIELDS}
    table: Table = {col: np.empty(0, dtype) for col, dtype in COLUMNS[name].items()}
    table.update({k: [] for k in LOOKUPS[name]})
    table["dropped"] = 0
    if name == "actions":
        table["text"] = b""
        table["actions"] = list(ACTIONS)
    if name in ("actions", "transfers", "memory"):
        table["workers"] = [""]
    return table


def raw(name: str, table: Any) -> Table:
    """``table`` as recorded, or an empty one."""
    return dict(table) if isinstance(table, Mapping) else empty(name)


# ---------------------------------------------------------------- keys
#: flags in an interned name id: the suffix starts with a uuid / 32 hex digits (a dask
#: token), stored as 16 raw bytes
UUID_FLAG = 0x8000_0000
HEX_FLAG = 0x4000_0000
_FLAGS = UUID_FLAG | HEX_FLAG
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TOKEN = re.compile(r"[0-9a-f]{32}")


class KeyText:
    """Key labels in compact form: per key an interned *name* (label prefix and group id)
    and the rest of the label as bytes; a suffix that starts with a uuid or a dask token
    (32 hex digits) keeps those as 16 raw bytes, flagged in the name id.

    ``encode`` is thread-safe; ``names`` and ``groups`` only grow.
    """

    def __init__(self) -> None:
        self.names: list[tuple[str, int]] = []
        self.groups: list[str] = []
        self._names: dict[str, int] = {}
        self._groups: dict[str, int] = {}
        self._lock = threading.Lock()

    def encode(self, label: str, group: str) -> tuple[int, bytes]:
        """Name id and suffix bytes of one key label."""
        prefix, suffix = _split(label)
        nid = self._names.get(prefix)
        if nid is None:
            nid = self._add(prefix, group)
        if len(suffix) >= 36 and _UUID.match(suffix):
            raw = bytes.fromhex(suffix[:36].replace("-", ""))
            return nid | UUID_FLAG, raw + suffix[36:].encode()
        if len(suffix) >= 32 and _TOKEN.match(suffix):
            return nid | HEX_FLAG, bytes.fromhex(suffix[:32]) + suffix[32:].encode()
        return nid, suffix.encode()

    def _add(self, prefix: str, group: str) -> int:
        with self._lock:
            nid = self._names.get(prefix)
            if nid is None:
                gid = self._groups.get(group)
                if gid is None:
                    gid = self._groups[group] = len(self.groups)
                    self.groups.append(group)
                nid = self._names[prefix] = len(self.names)
                self.names.append((prefix, gid))
        return nid


def _split(label: str) -> tuple[str, str]:
    """A label's shared prefix and its own suffix: ``"('x-1a2b', "`` + ``"0, 1)"``."""
    if label.startswith("('"):
        cut = label.find("', ")
        if cut > 0:
            return label[: cut + 3], label[cut + 3 :]
    end = stem_end(label)
    if end > 0:
        return label[:end], label[end:]
    return label, ""


def _label(names: list[tuple[str, int]], nid: int, raw: bytes) -> str:
    if nid & UUID_FLAG:
        h = raw[:16].hex()
        uid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        return names[nid & ~_FLAGS][0] + uid + raw[16:].decode()
    if nid & HEX_FLAG:
        return names[nid & ~_FLAGS][0] + raw[:16].hex() + raw[16:].decode()
    return names[nid][0] + raw.decode()


def key_labels(table: Table, rows: Any = None) -> list[str]:
    """Key labels of an actions table's rows (all, or those of ``rows``, an index array)."""
    names, text = table["names"], table["text"]
    ends = np.asarray(table["end"], dtype=np.int64)
    starts = np.zeros_like(ends)
    starts[1:] = ends[:-1]
    nids = np.asarray(table["name"], dtype=np.int64)
    if rows is not None:
        starts, ends, nids = starts[rows], ends[rows], nids[rows]
    names = [tuple(n) for n in names]
    return [
        _label(names, n, bytes(text[s:e]))
        for n, s, e in zip(nids.tolist(), starts.tolist(), ends.tolist(), strict=True)
    ]


def key_groups(table: Table) -> np.ndarray:
    """Each action row's group id (into ``table["groups"]``)."""
    gids = np.array([g for _, g in table["names"]] or [0], dtype=np.int64)
    nids = np.asarray(table["name"], dtype=np.int64) & ~_FLAGS
    return gids[nids] if len(nids) else np.empty(0, np.int64)


# ---------------------------------------------------------------- slicing
def select(name: str, table: Table, keep: np.ndarray) -> Table:
    """The rows of ``table`` where ``keep`` (a boolean mask) is true."""
    if name == "workers":
        idx = np.flatnonzero(keep).tolist()
        return {f: [table[f][i] for i in idx] for f in WORKER_FIELDS}
    out = {k: v for k, v in table.items() if k not in COLUMNS[name]}
    for col in COLUMNS[name]:
        out[col] = np.asarray(table[col])[keep]
    if name == "actions":
        ends = np.asarray(table["end"], dtype=np.int64)
        starts = np.concatenate([[0], ends[:-1]]) if len(ends) else ends
        text = table["text"]
        kept = np.flatnonzero(keep).tolist()
        pieces = [text[starts[i] : ends[i]] for i in kept]
        out["text"] = b"".join(pieces)
        out["end"] = np.cumsum([len(p) for p in pieces], dtype=np.int64).astype(np.uint32)
    return out


def retained(table: Table) -> int:
    """Bytes a raw table holds: its numpy columns, its key text and its lookup lists."""
    total = 0
    for value in table.values():
        if isinstance(value, np.ndarray):
            total += value.nbytes
        elif isinstance(value, (bytes, bytearray)):
            total += len(value)
        elif isinstance(value, list):
            total += sys.getsizeof(value) + sum(_deep(v) for v in value)
    return total


def _deep(value: Any) -> int:
    if isinstance(value, (tuple, list)):
        return sys.getsizeof(value) + sum(_deep(v) for v in value)
    return sys.getsizeof(value)


# ---------------------------------------------------------------- files and dicts
def save(read: Callable[[str], Table]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The npz arrays (``"<table>.<column>"``) and the JSON part of every cluster table."""
    arrays: dict[str, np.ndarray] = {}
    head: dict[str, Any] = {}
    for name, cols in COLUMNS.items():
        table = read(name)
        for col, dtype in cols.items():
            arrays[f"{name}.{col}"] = np.asarray(table[col], dtype=dtype)
        head[name] = {k: _plain(table.get(k)) for k in LOOKUPS[name]}
    arrays["actions.text"] = np.frombuffer(bytes(read("actions")["text"]), dtype=np.uint8)
    head["workers"] = {f: list(read("workers")[f]) for f in WORKER_FIELDS}
    return arrays, head


def load(arrays: Mapping[str, np.ndarray], head: Mapping[str, Any] | None) -> dict[str, Table]:
    """The cluster tables :func:`save` wrote (empty ones for a file without them)."""
    head = head or {}
    out: dict[str, Table] = {}
    for name, cols in COLUMNS.items():
        table = empty(name)
        if f"{name}.start" in arrays or f"{name}.time" in arrays:
            for col, dtype in cols.items():
                table[col] = np.asarray(arrays[f"{name}.{col}"], dtype=dtype)
            table.update(_lookups(name, head.get(name) or {}))
        out[name] = table
    if "actions.text" in arrays:
        out["actions"]["text"] = np.asarray(arrays["actions.text"]).tobytes()
    out["workers"] = _workers(head.get("workers"))
    return out


def to_lists(read: Callable[[str], Table]) -> dict[str, Any]:
    """Every cluster table as JSON-friendly lists (``Run.to_dict``)."""
    out: dict[str, Any] = {}
    for name, cols in COLUMNS.items():
        table = read(name)
        out[name] = {k: _plain(table.get(k)) for k in (*cols, *LOOKUPS[name])}
    out["actions"]["text"] = bytes(read("actions")["text"]).hex()
    out["workers"] = {f: list(read("workers")[f]) for f in WORKER_FIELDS}
    return out


def from_lists(d: Mapping[str, Any] | None) -> dict[str, Table]:
    """The tables :func:`to_lists` described."""
    d = d or {}
    out: dict[str, Table] = {}
    for name, cols in COLUMNS.items():
        table = empty(name)
        part = d.get(name) or {}
        for col, dtype in cols.items():
            if col in part:
                table[col] = np.asarray(part[col], dtype=dtype)
        table.update(_lookups(name, part))
        out[name] = table
    out["actions"]["text"] = bytes.fromhex((d.get("actions") or {}).get("text") or "")
    out["workers"] = _workers(d.get("workers"))
    return out


def _lookups(name: str, part: Mapping[str, Any]) -> dict[str, Any]:
    found = {k: part[k] for k in LOOKUPS[name] if k in part and part[k] is not None}
    if "names" in found:
        found["names"] = [(str(p), int(g)) for p, g in found["names"]]
    found["dropped"] = int(found.get("dropped") or 0)
    return found


def _workers(part: Any) -> Table:
    table = empty("workers")
    if isinstance(part, Mapping):
        n = len(part.get("address") or [])
        for f in WORKER_FIELDS:
            values = list(part.get(f) or [])
            table[f] = values if len(values) == n else [None] * n
    return table


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list):
        return [list(v) if isinstance(v, tuple) else v for v in value]
    return value
