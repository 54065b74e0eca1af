"""The kernel side of the daskprofile comm protocol (docs/protocol.md).

The lab panel registers the target with silent code (:func:`register_target`), then opens
a comm whose data is its ``hello``. This module checks the protocol version, answers the
hello (through the publisher, so the answer precedes the replay of the kept runs), and
routes the panel's requests. Once a panel has connected, the per-cell recorder
(:mod:`daskprofile.record.per_cell`) profiles every dask compute, local or on a cluster,
and while at least one is connected a
:class:`~.publisher.Publisher` streams runs. When the last comm closes the publisher
stops; the session goes on recording (``daskprofile.panel.keep-recording``, no thread
while idle) so a panel that comes back replays what ran meanwhile: page reloaded,
notebook switched away and back, panel reopened. :func:`shutdown` stops both.

Handlers are thread-safe (with kernel subshells, messages can arrive on another thread
while a cell runs) and never raise into the kernel on malformed input: they log it and
answer with an ``error``.
"""

from __future__ import annotations

import logging
import os
import platform
import threading
from typing import Any

from .._version import __version__
from . import encode

TARGET = "daskprofile"
PROTOCOL_VERSION = "1.3"
PROTOCOL_METADATA_KEY = "daskprofile_protocol"

log = logging.getLogger("daskprofile")

_lock = threading.RLock()
_registered = False


def _major(version: object) -> int | None:
    """The major of a ``"MAJOR.MINOR"`` version, else None (a peer announcing anything
    else is refused: the publisher could not tell what it reads)."""
    parsed = encode.parse_version(version)
    return None if parsed is None else parsed[0]


def versions() -> dict[str, str]:
    """Versions the panel shows and checks."""
    import dask

    return {
        "daskprofile": __version__,
        "dask": str(getattr(dask, "__version__", "?")),
        "python": platform.python_version(),
    }


def _greeting(paused: bool, history: int) -> encode.Message:
    return encode.hello(PROTOCOL_VERSION, versions(), os.getpid(), paused, history)


def hello(paused: bool = False, history: int = 0) -> dict[str, Any]:
    """The answer to a panel's hello (data only)."""
    data, _ = encode.hello(PROTOCOL_VERSION, versions(), os.getpid(), paused, history)
    return data


# ---------------------------------------------------------------- the connected state


class Hub:
    """The publisher and the auto-profiling session, alive while a panel is connected."""

    def __init__(self) -> None:
        from ..record.per_cell import CellRecorder, panel_config
        from .publisher import Publisher

        self.session = CellRecorder() if panel_config("auto") else None
        self.publisher = Publisher(
            rate=float(panel_config("rate")),
            tick=_seconds(panel_config("tick")),
            max_queue=int(panel_config("max-queue")),
            greeting=_greeting,
        )

    def start(self) -> None:
        """Stream (again) and record (idempotent)."""
        self.publisher.start()
        if self.session is not None:
            self.session.start()

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.publisher.stop()

    @property
    def recording(self) -> bool:
        return self.session is not None and self.session.started


_hub: Hub | None = None


def hub() -> Hub | None:
    """The running hub (None when no panel is connected)."""
    return _hub


def _seconds(value: Any) -> float:
    from ..options import duration

    return duration("daskprofile.panel.tick", value)


# ---------------------------------------------------------------- comm handlers


def _refuse(comm: Any, peer: object) -> None:
    data, _ = encode.error(
        "protocol",
        f"the panel speaks protocol {peer!r}, this kernel {PROTOCOL_VERSION}: install "
        "matching versions of daskprofile in the kernel and in JupyterLab "
        "(pip install -U daskprofile)",
        "hello",
    )
    comm.send(data)
    comm.close()


def _on_open(comm: Any, open_msg: dict[str, Any]) -> None:
    """A panel connected: check its protocol version, greet it, stream to it."""
    global _hub
    try:
        metadata = open_msg.get("metadata") or {}
        peer = metadata.get(PROTOCOL_METADATA_KEY) if isinstance(metadata, dict) else None
        if _major(peer) != _major(PROTOCOL_VERSION):
            _refuse(comm, peer)
            return
        with _lock:
            if _hub is None:
                _hub = Hub()
            _hub.start()
            conn = _hub.publisher.attach(comm, str(peer))
        comm.on_msg(lambda msg: _on_msg(conn, msg))
        comm.on_close(lambda msg: _on_close(comm.comm_id))
    except Exception:
        log.exception("daskprofile: could not open the panel's comm")


def _on_msg(conn: Any, msg: Any) -> None:
    """Requests from the panel; malformed ones are logged and answered with an error."""
    try:
        data = (msg.get("content") or {}).get("data") if isinstance(msg, dict) else None
        current = _hub
        if current is None:
            return
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            log.error("daskprofile: ignoring malformed comm message %r", data)
            current.publisher.reply(
                conn, encode.error("bad-request", "a message needs a string 'type'", None)
            )
            return
        current.publisher.request(conn, data)
    except Exception:
        log.exception("daskprofile: error handling a panel request")


def _on_close(comm_id: str) -> None:
    """A panel went away; the last one stops the publisher (and, unless
    ``daskprofile.panel.keep-recording``, the auto session)."""
    global _hub
    try:
        from ..record.per_cell import panel_config

        with _lock:
            current = _hub
            if current is None or not current.publisher.detach(comm_id):
                return
            # stopped under the lock: a panel opening meanwhile finds a consistent hub
            if current.recording and bool(panel_config("keep-recording")):
                current.publisher.stop()  # the session records on for the panel's return
            else:
                _hub = None
                current.stop()
    except Exception:
        log.exception("daskprofile: error closing the panel's comm")


def shutdown() -> None:
    """Stop streaming and recording for the panel, leaving no thread or hook behind.

    Panels that connect later start both again.
    """
    global _hub
    with _lock:
        current, _hub = _hub, None
    if current is not None:
        current.stop()


def register_target() -> None:
    """Register the ``daskprofile`` comm target in the running kernel (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        import comm

        comm.get_comm_manager().register_target(TARGET, _on_open)
        _registered = True
