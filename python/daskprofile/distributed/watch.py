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

__all__ = ["Listener", "add_listener", "listening", "remove_listener"]

#: ``listener(client, keys)``: ``keys`` the graph's output keys (an iterable; do not keep it)
Listener = Callable[[Any, Iterable[Any]], None]

_lock = threading.Lock()
_listeners: list[Listener] = []
_original: Any = None  # Client._graph_to_futures while patched


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
