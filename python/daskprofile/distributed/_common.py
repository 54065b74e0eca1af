"""Pieces shared by the scheduler plugin, the worker plugin and the client side.

Everything here is light: it is imported on the scheduler and in every worker process.
"""

from __future__ import annotations

from typing import Any

import msgpack

#: version of the messages the plugins send to the client (2: the scheduler's batches carry
#: ``graphs`` and ``pending``, see :mod:`._scheduler`)
MESSAGE_VERSION = 2


#: topic -> (event loop, handler) of the runs whose client shares this process with the
#: scheduler (a notebook's ``LocalCluster``): the scheduler plugin hands each event of the
#: topic to the handler on that loop, so the client need not subscribe and the scheduler
#: neither encodes nor sends it again (its log keeps it, as for any topic)
LOCAL_SINKS: dict[str, tuple[Any, Any]] = {}


def pack(msg: dict[str, Any]) -> bytes:
    """A message as the bytes it travels in (``log_event``): distributed forwards bytes as
    they are, where a structure is walked element by element by the worker's
    ``log_event`` (its msgpack check), then decoded and encoded again by the scheduler on
    its way to the client. Tuples travel as lists, as in distributed's own messages."""
    data: bytes = msgpack.packb(msg, use_bin_type=True)
    return data


def unpack(data: Any) -> Any:
    """A message as :func:`pack` made it (anything but bytes: as it came)."""
    if isinstance(data, bytes | bytearray | memoryview):
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    return data


#: what a worker's memory sample counts, in bytes (process: its RSS), keys or events
MEMORY_COUNTS = (
    "process",
    "managed",
    "spilled",
    "spilled_keys",
    "spill_count",
    "spill_bytes",
    "unspill_count",
    "unspill_bytes",
)

#: worker label: ``"<address> thread <n>"`` (n counts the threads seen on that worker)
WORKER_LABEL = "{address} thread {index}"


def worker_label(address: str, index: int) -> str:
    """Display label of one worker thread: the worker's address and a small thread number."""
    return WORKER_LABEL.format(address=address, index=index)


def worker_address(label: str) -> str:
    """The worker address of a label made by :func:`worker_label`."""
    return label.rsplit(" thread ", 1)[0]


def exception_name(text: object) -> str:
    """Exception type name from distributed's ``exception_text`` (``"ValueError('x')"``)."""
    if not isinstance(text, str) or not text:
        return "Exception"
    name = text.split("(", 1)[0].strip()
    return name if name.replace(".", "").replace("_", "").isalnum() else "Exception"


def killed_text(key: object, kw: dict[str, Any]) -> str | None:
    """``exception_text`` of a task the scheduler fails because the workers that ran it
    died (``KilledWorker``, sent pickled and with no text), else None."""
    pickled = kw.get("exception")
    if not isinstance(pickled, bytes | bytearray) or b"KilledWorker" not in pickled:
        return None
    return killed_message(key, kw.get("worker"))


def killed_message(key: object, worker: object) -> str:
    """The text daskprofile gives a ``KilledWorker`` failure (``worker``: the last one)."""
    return f"KilledWorker('{key}: the workers that ran it died; last: {worker}')"
