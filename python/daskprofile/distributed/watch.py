"""Graph submissions of every ``distributed.Client`` in this process, as they happen.

``client.compute``, ``persist``, ``submit``, ``map`` and ``get`` (so ``x.compute()`` with a
default client too) all send their graph through ``Client._graph_to_futures``. While at
least one listener is registered, that method is wrapped: each listener is called with the
client and the graph's output keys in the submitting thread, *before* the graph leaves, so
a recording can install its plugins on a client it has never seen and miss none of the
graph's tasks. The original method is put back when the last listener goes, exactly as
:mod:`daskprofile.hooks` does for the local schedulers. A listener that raises is switched
off and reported once; the user's submission always goes through unchanged.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "Listener",
    "add_close_listener",
    "add_listener",
    "listening",
    "remove_close_listener",
    "remove_listener",
]

#: ``listener(client, keys)``: ``keys`` the graph's output keys (an iterable; do not keep it)
Listener = Callable[[Any, Iterable[Any]], None]

_lock = threading.Lock()
_listeners: list[Listener] = []
_original: Any = None  # Client._graph_to_futures while patched
_closing: list[Callable[[Any], None]] = []
_original_close: Any = None  # Client.close while patched


def add_listener(listener: Listener) -> None:
    """Call ``listener(client, keys)`` before every graph submission (patches on the first)."""
    global _original
    from distributed import Client

    with _lock:
        if listener in _listeners:
            return
        _listeners.append(listener)
        if _original is None:
            _original = Client.__dict__["_graph_to_futures"]
            Client._graph_to_futures = _wrap(_original)  # type: ignore[method-assign]


def remove_listener(listener: Listener) -> None:
    """Stop calling ``listener``; the last one gone puts distributed's method back."""
    global _original
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)
        if _listeners or _original is None:
            return
        from distributed import Client

        Client._graph_to_futures = _original  # type: ignore[method-assign]
        _original = None


def add_close_listener(listener: Callable[[Any], None]) -> None:
    """Call ``listener(client)`` when ``close()`` is called on a running synchronous client,
    before it closes (patches ``Client.close`` on the first listener)."""
    global _original_close
    from distributed import Client

    with _lock:
        if listener in _closing:
            return
        _closing.append(listener)
        if _original_close is None:
            _original_close = Client.__dict__["close"]
            Client.close = _wrap_close(_original_close)  # type: ignore[method-assign]


def remove_close_listener(listener: Callable[[Any], None]) -> None:
    """Stop calling ``listener``; the last one gone puts distributed's method back."""
    global _original_close
    with _lock:
        if listener in _closing:
            _closing.remove(listener)
        if _closing or _original_close is None:
            return
        from distributed import Client

        Client.close = _original_close  # type: ignore[method-assign]
        _original_close = None


def _wrap_close(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def close(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _can_block(self):
            for listener in list(_closing):
                try:
                    listener(self)
                except Exception as exc:  # the client closes whatever happens
                    warnings.warn(
                        f"daskprofile: a cluster recording raised {exc!r} as its client "
                        "closed; the client is closed anyway",
                        RuntimeWarning,
                        stacklevel=2,
                    )
        return original(self, *args, **kwargs)

    return close


def _can_block(client: Any) -> bool:
    """Whether round trips to the scheduler can be made before ``client`` closes: a running
    synchronous client, not called from an event loop nor at interpreter exit."""
    import asyncio
    import sys

    if getattr(client, "status", None) != "running" or getattr(client, "asynchronous", False):
        return False
    if sys.is_finalizing():
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def listening() -> bool:
    """Whether ``Client._graph_to_futures`` is wrapped now."""
    return _original is not None


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _graph_to_futures(self: Any, expr: Any, keys: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(keys, (list, tuple, set, frozenset, dict)):
            keys = list(keys)  # read twice below: an iterator would reach distributed empty
        for listener in list(_listeners):
            _notify(listener, self, keys)
        return original(self, expr, keys, *args, **kwargs)

    return _graph_to_futures


def _notify(listener: Listener, client: Any, keys: Any) -> None:
    try:
        listener(client, keys)
    except Exception as exc:
        remove_listener(listener)
        warnings.warn(
            f"daskprofile: a cluster recording raised {exc!r} and is switched off; "
            "the computation is not affected",
            RuntimeWarning,
            stacklevel=4,
        )
