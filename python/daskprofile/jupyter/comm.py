"""The kernel side of the daskprofile comm protocol (docs/protocol.md).

The lab panel registers the target with silent code, then opens a comm; this module answers
its hello with the protocol version and the kernel's versions. Handlers must be
thread-safe (with kernel subshells, messages can arrive while a cell runs) and must never
raise into the kernel on malformed input.
"""

from __future__ import annotations

import logging
import os
import platform
import threading
from typing import Any

from .._version import __version__

TARGET = "daskprofile"
PROTOCOL_VERSION = "1.0"
PROTOCOL_METADATA_KEY = "daskprofile_protocol"

log = logging.getLogger("daskprofile")

_lock = threading.Lock()
_registered = False


def _major(version: object) -> int | None:
    if not isinstance(version, str):
        return None
    head, _, _ = version.partition(".")
    return int(head) if head.isdigit() else None


def versions() -> dict[str, str]:
    """Versions the panel shows and checks."""
    import dask

    return {
        "daskprofile": __version__,
        "dask": dask.__version__,
        "python": platform.python_version(),
    }


def hello() -> dict[str, Any]:
    """The answer to a panel's hello."""
    return {
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "versions": versions(),
        "pid": os.getpid(),
        "paused": False,
    }


def _on_open(comm: Any, open_msg: dict[str, Any]) -> None:
    """A panel connected: check its protocol version and greet it."""
    metadata = open_msg.get("metadata") or {}
    peer = metadata.get(PROTOCOL_METADATA_KEY) if isinstance(metadata, dict) else None
    if _major(peer) != _major(PROTOCOL_VERSION):
        comm.send(
            {
                "type": "error",
                "code": "protocol",
                "message": (
                    f"the panel speaks protocol {peer!r}, this kernel {PROTOCOL_VERSION}: "
                    "install matching versions of daskprofile in the kernel and in JupyterLab"
                ),
            }
        )
        comm.close()
        return
    comm.on_msg(_on_msg)
    comm.send(hello())


def _on_msg(msg: dict[str, Any]) -> None:
    """Requests from the panel; malformed ones are logged and ignored."""
    data = (msg.get("content") or {}).get("data")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        log.error("daskprofile: ignoring malformed comm message %r", data)


def register_target() -> None:
    """Register the ``daskprofile`` comm target in the running kernel (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        import comm

        comm.get_comm_manager().register_target(TARGET, _on_open)
        _registered = True
