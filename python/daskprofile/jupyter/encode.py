"""Encoding of the comm protocol's messages (docs/protocol.md), and the browser's decoding.

A message is ``(data, buffers)``: ``data`` a JSON-safe dict with a string ``type``,
``buffers`` a list of ``bytes``. Columnar payloads (``tasks``, ``resources``, ``cache``,
and since 1.2 a cluster's ``actions``, ``memory`` and ``transfers``) travel as one
little-endian typed array per column, in the order of ``data["columns"]``; their times are
float32 offsets from the batch's ``base`` (seconds since the run's ``t0``). :func:`needs`
says which protocol version a message needs and :func:`adapt` fits a message to a panel's
version (a ``tasks`` batch loses its 1.2 ``span`` column, a ``transfers`` batch its 1.3
``type`` column): a panel is sent only what it can read. 1.3 added ``sources``, the text
of the sampled functions, and the type of the data each transfer moved.
:func:`decode` reads a message exactly as the panel does (``new Float32Array(buf)`` per
column), so tests and benchmarks see what the browser sees.

Nothing here imports Jupyter: the encoder is pure and deterministic, which lets
``tests/fixtures/protocol/generate.py`` pin every message type in a JSON fixture.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "ACTION_CODES",
    "COLUMNS",
    "Message",
    "SOURCES_VERSION",
    "TABLES_VERSION",
    "TYPES_VERSION",
    "action_lane",
    "adapt",
    "cluster_workers",
    "decode",
    "error",
    "exceptions",
    "export",
    "from_fixture",
    "groups",
    "hello",
    "is_action_lane",
    "keys",
    "needs",
    "progress",
    "reruns",
    "run_end",
    "run_start",
    "sources",
    "speaks",
    "spans",
    "stacks",
    "state",
    "table",
    "to_fixture",
    "wire_size",
    "worker_kind",
    "workers",
    "dropped",
]

#: ``(data, buffers)`` as handed to ``comm.send(data, buffers=buffers)``
Message = tuple[dict[str, Any], list[bytes]]

#: columnar message type -> its columns and their little-endian dtypes, in buffer order
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "tasks": (
        ("group", "<u2"),
        ("worker", "<u2"),
        ("status", "u1"),
        ("submit", "<f4"),
        ("start", "<f4"),
        ("stop", "<f4"),
    ),
    "resources": (("time", "<f4"), ("cpu", "<f4"), ("memory", "<f8"), ("processes", "<u2")),
    "cache": (("time", "<f4"), ("group", "<u2"), ("metric", "<f8")),
    # protocol 1.2: a cluster's tables
    "actions": (
        ("worker", "<u2"),
        ("action", "u1"),
        ("group", "<u2"),
        ("start", "<f4"),
        ("stop", "<f4"),
        ("bytes", "<f8"),
    ),
    "memory": (("time", "<f4"), ("managed", "<f8"), ("unmanaged", "<f8"), ("spilled", "<f8")),
    "transfers": (
        ("start", "<f4"),
        ("stop", "<f4"),
        ("source", "<u2"),
        ("destination", "<u2"),
        ("bytes", "<f8"),
        ("incoming", "u1"),
    ),
}

#: optional columns a batch may add after its own (protocol 1.2: a task's span id, 0: none;
#: 1.3: the type of the data a transfer moved, an id into the run's ``types`` list)
OPTIONAL_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "tasks": (("span", "<u2"),),
    "transfers": (("type", "<u2"),),
}

#: columns holding times (float32 offsets from ``base`` on the wire)
TIME_COLUMNS: dict[str, tuple[str, ...]] = {
    "tasks": ("submit", "start", "stop"),
    "resources": ("time",),
    "cache": ("time",),
    "actions": ("start", "stop"),
    "memory": ("time",),
    "transfers": ("start", "stop"),
}

#: codes of the ``action`` column of ``actions`` batches (protocol 1.2)
ACTION_CODES = ("transfer", "disk-read", "disk-write", "deserialize")

_UINT_MAX = {"<u2": 0xFFFF, "u1": 0xFF}
#: columnar types whose batches name a ``source``
SOURCED = ("resources", "memory")

#: protocol version that added the optional ``source`` of ``resources`` batches
SOURCE_VERSION = "1.1"
#: protocol version that added a cluster's tables (``actions``, ``memory``, ``transfers``,
#: ``exceptions``, ``cluster_workers``) and lanes only actions use
TABLES_VERSION = "1.2"
#: message types of :data:`TABLES_VERSION`
TABLE_TYPES = frozenset(
    {"actions", "memory", "transfers", "exceptions", "cluster_workers", "spans", "reruns"}
)
#: protocol version that added the ``sources`` message (the text of sampled functions)
SOURCES_VERSION = "1.3"
#: at most this many lines of text per function in a ``sources`` message
MAX_SOURCE_LINES = 300
#: protocol version that added the ``type`` column (and ``types`` field) of ``transfers``
TYPES_VERSION = "1.3"
#: the version that added each optional column (and the batch fields that go with it)
_OPTIONAL_SINCE: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("tasks", "span"): (TABLES_VERSION, ()),
    ("transfers", "type"): (TYPES_VERSION, ("types",)),
}


# ---------------------------------------------------------------- versions


def parse_version(version: object) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``"MAJOR.MINOR"`` protocol version, else None (ASCII digits
    only: ``str.isdigit`` is true of ``'²'``, which ``int`` refuses)."""
    if not isinstance(version, str):
        return None
    major, dot, minor = version.partition(".")
    if not (dot and _digits(major) and _digits(minor)):
        return None
    return int(major), int(minor)


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def speaks(peer: object, version: str) -> bool:
    """Whether a peer announcing protocol ``peer`` knows what ``version`` added.

    True for the same major and a minor at least ``version``'s: e.g.
    ``speaks(panel_version, SOURCE_VERSION)`` before sending a panel ``resources`` batches
    with a ``source`` (a 1.0 panel would add their samples to the run's total).
    """
    have, need = parse_version(peer), parse_version(version)
    return have is not None and need is not None and have[0] == need[0] and have >= need


def needs(data: Mapping[str, Any]) -> str:
    """The protocol version a panel needs to read message ``data``: ``"1.2"`` for a
    cluster's tables and for a ``workers`` message of lanes only actions use (labelled
    with a worker's address alone, see :func:`action_lane`) and for ``spans`` and a
    ``tasks`` batch with a ``span`` column (:func:`adapt` drops it for older panels),
    ``"1.1"`` for a sourced ``resources`` batch, ``"1.3"`` for ``sources`` and a
    ``transfers`` batch with a ``type`` column, else ``"1.0"``."""
    return max([_base_needs(data), *_optional_versions(data)], key=_version_key)


def _base_needs(data: Mapping[str, Any]) -> str:
    """What :func:`needs` says of ``data`` without its optional columns."""
    kind = data.get("type")
    if kind == "sources":
        return SOURCES_VERSION
    if kind in TABLE_TYPES:
        return TABLES_VERSION
    if (
        kind == "workers"
        and data.get("labels")
        and all(is_action_lane(label) for label in data["labels"])
    ):
        return TABLES_VERSION
    if kind == "resources" and data.get("source") is not None:
        return SOURCE_VERSION
    return "1.0"


def _version_key(version: str) -> tuple[int, int]:
    return parse_version(version) or (0, 0)


def _optional_versions(data: Mapping[str, Any]) -> list[str]:
    """Versions of the optional columns ``data`` (a batch) carries."""
    kind, columns = data.get("type"), data.get("columns")
    if not isinstance(kind, str) or not isinstance(columns, list):
        return []
    return [_OPTIONAL_SINCE[kind, c][0] for c in columns if (kind, c) in _OPTIONAL_SINCE]


def adapt(message: Message, peer: object) -> Message | None:
    """``message`` as a panel speaking ``peer`` reads it: unchanged, a batch without the
    optional columns newer than the panel (a ``tasks`` batch's ``span``, 1.2; a
    ``transfers`` batch's ``type`` and its ``types``, 1.3), or None (not for it)."""
    data, buffers = message
    if speaks(peer, needs(data)):
        return message
    kind, columns = data.get("type"), data.get("columns")
    if not isinstance(kind, str) or not isinstance(columns, list):
        return None
    since = {c: _OPTIONAL_SINCE[kind, c] for c in columns if (kind, c) in _OPTIONAL_SINCE}
    newer = {c for c, (version, _) in since.items() if not speaks(peer, version)}
    if not newer or not speaks(peer, _base_needs(data)):
        return None
    fields = {f for c in newer for f in since[c][1]}
    keep = [i for i, name in enumerate(columns) if name not in newer]
    out = {k: v for k, v in data.items() if k not in fields}
    out["columns"] = [columns[i] for i in keep]
    return out, [buffers[i] for i in keep]


# ---------------------------------------------------------------- JSON safety


def clean(value: Any) -> Any:
    """``value`` as plain JSON: numpy scalars/arrays unwrapped, NaN/inf -> None, keys str."""
    if isinstance(value, (np.ndarray, np.generic)):
        return clean(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [clean(v) for v in value]
    return repr(value)


def _msg(type_: str, buffers: list[bytes] | None = None, **fields: Any) -> Message:
    data = {"type": type_, **{k: clean(v) for k, v in fields.items()}}
    return data, buffers or []


# ---------------------------------------------------------------- JSON-only messages


def hello(
    protocol: str, versions: Mapping[str, str], pid: int, paused: bool, history: int
) -> Message:
    """The kernel's answer to the panel's hello."""
    return _msg(
        "hello", protocol=protocol, versions=dict(versions), pid=pid, paused=paused, history=history
    )


def error(code: str, message: str, request: str | None = None) -> Message:
    """A refused request (``code``: protocol, bad-request, unknown-run, export-failed)."""
    return _msg("error", code=code, message=message, request=request)


def run_start(
    run: str, t0: float, wall0: float, options: Mapping[str, Any], title: str | None
) -> Message:
    """A run begins (or is replayed); ``t0`` is perf_counter, ``wall0`` Unix time."""
    return _msg("run_start", run=run, t0=t0, wall0=wall0, options=dict(options), title=title)


def groups(run: str, ids: Sequence[int], names: Sequence[str], colors: Sequence[str]) -> Message:
    """New task groups (sent before any row uses them)."""
    return _msg("groups", run=run, ids=list(ids), names=list(names), colors=list(colors))


def spans(run: str, ids: Sequence[int], names: Sequence[str]) -> Message:
    """New spans of a run (protocol 1.2; sent before any ``tasks`` row uses them): ids of
    the ``span`` column (0 is no span, never listed) and their paths (``"load/clean"``)."""
    return _msg("spans", run=run, ids=list(ids), names=list(names))


def worker_kind(label: str) -> str:
    """``thread``, ``process`` or ``worker`` from a worker's display label.

    Local labels are ``"thread 3"``, ``"main thread"`` and ``"process 12345"``; anything
    else is a cluster worker (``"tcp://127.0.0.1:40123 thread 0"``: a thread of one
    distributed worker, which the panel groups by address).
    """
    if label.startswith("process"):
        return "process"
    if label == "main thread" or label.startswith("thread"):
        return "thread"
    return "worker"


def action_lane(address: str) -> str:
    """Label of a lane for the actions of a cluster worker none of whose threads has a
    lane yet: its address alone (a thread's lane is ``"<address> thread <n>"``)."""
    return address


def is_action_lane(label: object) -> bool:
    """Whether ``label`` is an :func:`action_lane` (no task row ever uses one): a worker's
    address (``tcp://...``, ``tls://...``, ``inproc://...``) without a thread."""
    return isinstance(label, str) and "://" in label and " thread " not in label


def workers(run: str, ids: Sequence[int], labels: Sequence[str]) -> Message:
    """New workers; their kind is read from the label. Send lanes of tasks and
    :func:`action_lane` s in separate messages (the latter reach 1.2 panels only)."""
    kinds = [worker_kind(label) for label in labels]
    return _msg("workers", run=run, ids=list(ids), labels=list(labels), kinds=kinds)


def progress(
    run: str,
    group_ids: Sequence[int],
    total: Sequence[int],
    done: Sequence[int],
    erred: Sequence[int],
) -> Message:
    """Per-group progress (same order in every list)."""
    return _msg("progress", run=run, groups=list(group_ids), total=total, done=done, erred=erred)


def stacks(run: str, t_start: float, t_end: float, trees: Mapping[str, Any]) -> Message:
    """One sampler cycle's new samples, ``{group: tree}``; times in s since t0."""
    return _msg("stacks", run=run, t_start=t_start, t_end=t_end, trees=dict(trees))


def sources(run: str, entries: Mapping[str, Mapping[str, Any]]) -> Message:
    """The text of sampled functions (protocol 1.3): ``{identifier: {"file", "name",
    "start", "text"}}`` keyed by the stack trees' node identifiers (``run.sources``);
    ``text`` is cut to :data:`MAX_SOURCE_LINES` lines. Sent before the first ``stacks``
    message whose trees hold those identifiers."""
    out = {}
    for ident, entry in entries.items():
        text = [str(line) for line in list(entry["text"])[:MAX_SOURCE_LINES]]
        out[str(ident)] = {
            "file": str(entry["file"]),
            "name": str(entry["name"]),
            "start": int(entry["start"]),
            "text": text,
        }
    return _msg("sources", run=run, sources=out)


def keys(run: str, indices: Sequence[int], key_labels: Sequence[str]) -> Message:
    """Task keys of rows ``indices`` of the run's task table."""
    return _msg("keys", run=run, indices=list(indices), keys=list(key_labels))


def run_end(
    run: str,
    summary: Mapping[str, Any],
    dropped_records: Mapping[str, int],
    errors: Sequence[Mapping[str, Any]],
    reduced: Mapping[str, str] | None = None,
) -> Message:
    """A run finished. ``reduced`` (protocol 1.1, optional): the parts recorded in a reduced
    way and why (``run.meta.reduced``, e.g. ``{"stacks": "workers lack daskprofile ..."}``);
    sent only when there are some, so the message stays 1.0's otherwise."""
    fields: dict[str, Any] = {
        "run": run,
        "summary": dict(summary),
        "dropped": dict(dropped_records),
        "errors": errors,
    }
    if reduced:
        fields["reduced"] = {str(k): str(v) for k, v in reduced.items()}
    return _msg("run_end", **fields)


def exceptions(
    run: str, rows: Sequence[Mapping[str, Any]], first: int, dropped_rows: int
) -> Message:
    """Tasks that raised (protocol 1.2): ``rows`` of ``key``, ``group``, ``worker``,
    ``time`` (s since t0), ``type``, ``message``, ``traceback``; ``first``: the index of
    the first row in the run's exceptions table; ``dropped_rows``: failures not kept."""
    fields = ("key", "group", "worker", "time", "type", "message", "traceback")
    kept = [{f: row.get(f) for f in fields} for row in rows]
    return _msg("exceptions", run=run, rows=kept, first=int(first), dropped=int(dropped_rows))


def cluster_workers(run: str, members: Sequence[Mapping[str, Any]]) -> Message:
    """The workers of a cluster run (protocol 1.2), the whole list: ``address``, ``name``,
    ``host``, ``threads``, ``memory_limit``, ``joined``/``left`` (s since t0, or None:
    before the run / still there), ``reason`` (None, closed, retired, lost, timed out)."""
    fields = ("address", "name", "host", "threads", "memory_limit", "joined", "left", "reason")
    rows = [{f: m.get(f) for f in fields} for m in members]
    return _msg("cluster_workers", run=run, workers=rows)


def reruns(run: str, rows: Sequence[int], why: Sequence[str], workers: Sequence[str]) -> Message:
    """Task rows whose work a worker that left took with it, so the task ran again
    (protocol 1.2): ``rows`` (indices in the run's task table), per row ``why``
    (``lost``: its result was there; ``interrupted``: it was running there; ``killed``: it
    failed with ``KilledWorker``) and ``workers`` (the address of the worker that left)."""
    if not len(rows) == len(why) == len(workers):
        raise ValueError("reruns: rows, why and workers must have one entry per row")
    return _msg(
        "reruns",
        run=run,
        rows=[int(r) for r in rows],
        why=[str(w) for w in why],
        workers=[str(w) for w in workers],
    )


def dropped(run: str | None, messages: int, rows: int) -> Message:
    """Counts (so far) of messages and rows the publisher dropped for a slow panel."""
    return _msg("dropped", run=run, messages=messages, rows=rows)


def state(paused: bool) -> Message:
    """Pause/resume acknowledged."""
    return _msg("state", paused=paused)


def export(run: str, fmt: str, filename: str, mime: str, payload: bytes) -> Message:
    """An exported file, its bytes in one buffer."""
    return _msg("export", [bytes(payload)], run=run, format=fmt, filename=filename, mime=mime)


# ---------------------------------------------------------------- columnar messages


def _base(kind: str, cols: Mapping[str, np.ndarray]) -> float:
    """The batch's base time: its earliest time, rounded to the microsecond."""
    mins = [float(np.min(cols[c])) for c in TIME_COLUMNS[kind] if len(cols[c])]
    finite = [m for m in mins if math.isfinite(m)]
    return round(min(finite), 6) if finite else 0.0


def _column(values: Any, dtype: str, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise ValueError(f"column of shape {arr.shape}, expected ({n},)")
    top = _UINT_MAX.get(dtype)
    if top is not None:
        arr = np.clip(arr, 0, top)
    return arr.astype(dtype, copy=False)


def table(
    kind: str,
    run: str,
    columns: Mapping[str, Any],
    first: int | None = None,
    *,
    source: str | None = None,
    limit: int = 0,
    addresses: Sequence[str] = (),
    types: Sequence[str] = (),
) -> Message:
    """A columnar batch: ``tasks``, ``resources``, ``cache``, ``actions``, ``memory`` or
    ``transfers``.

    ``columns`` maps each of ``COLUMNS[kind]`` to a 1-d array; times are float64 seconds
    since the run's ``t0`` and are sent as float32 offsets from the batch's ``base``.
    ``first`` (tasks, actions) is the run-wide index of the batch's first row; a ``tasks``
    batch carries a ``span`` column (1.2) when ``columns`` has one. ``source``
    (resources, protocol 1.1) names the one worker process the samples measure, e.g.
    ``"tcp://127.0.0.1:40123"`` or ``"pid 4123 @ host"``; ``None`` (the default) is the
    run's total series, sent without a ``source`` field as in protocol 1.0. A ``memory``
    batch (1.2) has a ``source`` (the worker's address, required) and ``limit`` (bytes, 0:
    none); a ``transfers`` batch (1.2) its new ``addresses`` (appended to the run's list)
    and, with a ``type`` column (1.3: ids into the run's type names), its new ``types``
    (appended to the run's list of type names, ``""``: not known).
    """
    _check_fields(kind, source)
    spec = COLUMNS[kind] + tuple(c for c in OPTIONAL_COLUMNS.get(kind, ()) if c[0] in columns)
    n = len(np.asarray(columns[spec[0][0]]))
    cols = {name: np.asarray(columns[name]) for name, _ in spec}
    base = _base(kind, cols)
    times = TIME_COLUMNS[kind]
    buffers = []
    for name, dtype in spec:
        values = cols[name] - base if name in times else cols[name]
        buffers.append(_column(values, dtype, n).tobytes())
    fields: dict[str, Any] = {"run": run, "n": n, "base": base}
    if kind in ("tasks", "actions"):
        fields["first"] = int(first or 0)
    if source is not None:
        fields["source"] = source
    if kind == "memory":
        fields["limit"] = int(limit)
    if kind == "transfers":
        fields["addresses"] = [str(a) for a in addresses]
        if "type" in columns:
            fields["types"] = [str(t) for t in types]
    fields["columns"] = [name for name, _ in spec]
    return _msg(kind, buffers, **fields)


def _check_fields(kind: str, source: object) -> None:
    """A ``source`` is a string, of resources (optional) and memory (required) batches."""
    if kind == "memory" and not isinstance(source, str):
        raise ValueError(f"source={source!r}: a memory batch names its worker (a str)")
    if source is not None and (kind not in SOURCED or not isinstance(source, str)):
        raise ValueError(f"source={source!r}: only resources and memory have a source (a str)")


# ---------------------------------------------------------------- decoding (as the panel)


def _as_bytes(buf: Any) -> bytes:
    return buf.tobytes() if isinstance(buf, memoryview) else bytes(buf)


def decode(data: Mapping[str, Any], buffers: Sequence[Any] = ()) -> dict[str, Any]:
    """Read a message as the panel does: columns become typed arrays (still offsets).

    Returns ``data`` plus, for columnar types, ``arrays`` (``{column: ndarray}`` in wire
    dtypes) and ``times`` (``{time column: float64 seconds since t0}``); for ``export``,
    ``payload`` (bytes). A ``resources`` batch's ``source`` (absent or null: the run's
    total) is kept as sent. Raises ``ValueError`` on a malformed message.
    """
    kind = data.get("type")
    if not isinstance(kind, str):
        raise ValueError(f"message without a string type: {data!r}")
    out = dict(data)
    if kind == "export":
        if len(buffers) != 1:
            raise ValueError(f"export carries {len(buffers)} buffers, expected 1")
        out["payload"] = _as_bytes(buffers[0])
        return out
    check = _JSON_CHECKS.get(kind)
    if check is not None:
        check(data)
    spec = COLUMNS.get(kind)
    if spec is None:
        return out
    _check_batch(kind, data)
    out["arrays"] = _decode_columns(data, buffers, spec + OPTIONAL_COLUMNS.get(kind, ()))
    base = float(data["base"])
    out["times"] = {c: base + out["arrays"][c].astype(np.float64) for c in TIME_COLUMNS[kind]}
    return out


def _check_batch(kind: str, data: Mapping[str, Any]) -> None:
    source = data.get("source")
    if source is not None and (kind not in SOURCED or not isinstance(source, str)):
        raise ValueError(f"{kind}: 'source' must be a string or null, got {source!r}")
    if kind == "memory" and not (isinstance(source, str) and _is_number(data.get("limit"))):
        raise ValueError(f"memory: needs a string 'source' and a number 'limit': {data!r}")
    if kind == "transfers" and not _strings(data.get("addresses")):
        raise ValueError(f"transfers: 'addresses' must be a list of strings: {data!r}")
    typed = kind == "transfers" and "type" in (data.get("columns") or ())
    if typed and not _strings(data.get("types")):
        raise ValueError(f"transfers: 'types' must be a list of strings: {data!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _rows_of(data: Mapping[str, Any], field: str, keys: tuple[str, ...]) -> None:
    rows = data.get(field)
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and all(k in r for k in keys) for r in rows
    ):
        raise ValueError(f"{data.get('type')}: {field!r} must be a list of rows with {keys}")


def _check_exceptions(data: Mapping[str, Any]) -> None:
    _rows_of(data, "rows", ("key", "group", "worker", "time", "type", "message", "traceback"))
    if not (_is_number(data.get("first")) and _is_number(data.get("dropped"))):
        raise ValueError(f"exceptions: 'first' and 'dropped' must be numbers: {data!r}")


def _check_cluster_workers(data: Mapping[str, Any]) -> None:
    _rows_of(data, "workers", ("address", "joined", "left", "reason"))


def _check_spans(data: Mapping[str, Any]) -> None:
    ids, names = data.get("ids"), data.get("names")
    if not (
        isinstance(ids, list)
        and all(type(i) is int and 0 < i <= 0xFFFF for i in ids)
        and isinstance(names, list)
        and _strings(names)
        and len(ids) == len(names)
    ):
        raise ValueError(f"spans: 'ids' (ints 1..65535) and 'names' (strs) must match: {data!r}")


def _check_reruns(data: Mapping[str, Any]) -> None:
    rows, why, workers = data.get("rows"), data.get("why"), data.get("workers")
    if not (
        isinstance(rows, list)
        and all(type(r) is int and r >= 0 for r in rows)
        and isinstance(why, list)
        and isinstance(workers, list)
        and _strings(why)
        and _strings(workers)
        and len(rows) == len(why) == len(workers)
    ):
        raise ValueError(f"reruns: 'rows' (ints), 'why' and 'workers' must match: {data!r}")


def _check_sources(data: Mapping[str, Any]) -> None:
    entries = data.get("sources")
    if not isinstance(entries, dict) or not all(
        isinstance(e, dict)
        and isinstance(e.get("file"), str)
        and isinstance(e.get("name"), str)
        and type(e.get("start")) is int
        and _strings(e.get("text"))
        for e in entries.values()
    ):
        raise ValueError(
            f"sources: 'sources' must map identifiers to {{file, name, start, text}}: {data!r}"
        )


_JSON_CHECKS = {
    "sources": _check_sources,
    "reruns": _check_reruns,
    "exceptions": _check_exceptions,
    "cluster_workers": _check_cluster_workers,
    "spans": _check_spans,
}


def _decode_columns(
    data: Mapping[str, Any], buffers: Sequence[Any], spec: tuple[tuple[str, str], ...]
) -> dict[str, np.ndarray]:
    names = data.get("columns")
    dtypes = dict(spec)
    if not isinstance(names, list) or len(names) != len(buffers):
        raise ValueError(f"columns {names!r} do not match {len(buffers)} buffers")
    n = data.get("n")
    arrays = {}
    for name, buf in zip(names, buffers, strict=True):
        dtype = dtypes.get(name)
        if dtype is None:
            raise ValueError(f"unknown column {name!r}")
        arr = np.frombuffer(_as_bytes(buf), dtype=dtype)
        if len(arr) != n:
            raise ValueError(f"column {name!r} has {len(arr)} rows, n={n!r}")
        arrays[name] = arr
    return arrays


def wire_size(data: Mapping[str, Any], buffers: Iterable[Any] = ()) -> int:
    """Bytes of a message's payload on the wire: compact JSON ``data`` plus raw buffers."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode()) + sum(len(_as_bytes(b)) for b in buffers)


# ---------------------------------------------------------------- fixtures


def to_fixture(data: Mapping[str, Any], buffers: Sequence[Any] = ()) -> dict[str, Any]:
    """The fixture form ``{"data": ..., "buffers": [base64, ...]}`` of a message."""
    return {
        "data": dict(data),
        "buffers": [base64.b64encode(_as_bytes(b)).decode("ascii") for b in buffers],
    }


def from_fixture(fixture: Mapping[str, Any]) -> Message:
    """The message a fixture describes."""
    buffers = [base64.b64decode(b) for b in fixture.get("buffers", [])]
    return dict(fixture["data"]), buffers
