"""Graph submissions and closes of every ``distributed.Client`` in this process, as they happen.

``client.compute``, ``persist``, ``submit``, ``map`` and ``get`` (so ``x.compute()`` with a
default client too) all send their graph through ``Client._graph_to_futures``. While at
least one listener is registered, that method is wrapped: each listener is called with the
client and the graph's output keys in the submitting thread, *before* the graph leaves, so
a recording can install its plugins on a client it has never seen and miss none of the
graph's tasks. ``Client.close`` is wrapped the same way for close listeners, called before
a running synchronous client closes (while it can still reach the cluster). Each original
method is put back when its last listener goes, exactly as :mod:`daskprofile.hooks` does for
the local schedulers. A listener that raises is reported; the user's call always goes
through unchanged. Graph listeners (:func:`add_graph_listener`) also receive the graph
itself, and the timed ``dask.compute`` call it leaves from (:func:`daskprofile.hooks.current_call`)
notes the submission time.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import Any

from .. import hooks

__all__ = [
    "Listener",
    "add_close_listener",
    "add_graph_listener",
    "add_listener",
    "listening",
    "remove_close_listener",
    "remove_graph_listener",
    "remove_listener",
]

#: ``listener(client, keys)``: ``keys`` the graph's output keys (an iterable; do not keep it)
Listener = Callable[[Any, Iterable[Any]], None]
CloseListener = Callable[[Any], None]

_lock = threading.Lock()


class _Patch:
    """One method of ``Client`` wrapped while it has listeners."""

    def __init__(self, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]):
        self.name = name
        self.wrap = wrap
        self.listeners: list[Callable[..., None]] = []
        self.original: Any = None  # distributed's method while wrapped

    def add(self, listener: Callable[..., None]) -> None:
        from distributed import Client

        with _lock:
            if listener in self.listeners:
                return
            self.listeners.append(listener)
            if self.original is None:
                self.original = Client.__dict__[self.name]
                setattr(Client, self.name, self.wrap(self.original))

    def remove(self, listener: Callable[..., None]) -> None:
        with _lock:
            if listener in self.listeners:
                self.listeners.remove(listener)
            if self.listeners or self.original is None:
                return
            from distributed import Client

            setattr(Client, self.name, self.original)
            self.original = None


def _wrap_submit(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _graph_to_futures(self: Any, expr: Any, keys: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(keys, (list, tuple, set, frozenset, dict)):
            keys = list(keys)  # read twice below: an iterator would reach distributed empty
        for listener in list(_submits.listeners):
            try:
                listener(self, keys)
            except Exception as exc:
                _submits.remove(listener)
                _warn(f"a cluster recording raised {exc!r} and is switched off")
        _tell_graph(self, expr, keys)
        return original(self, expr, keys, *args, **kwargs)

    return _graph_to_futures


def _wrap_close(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def close(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _can_block(self):
            for listener in list(_closes.listeners):
                try:
                    listener(self)
                except Exception as exc:  # the client closes whatever happens
                    _warn(f"a cluster recording raised {exc!r} as its client closed")
        return original(self, *args, **kwargs)

    return close


def _tell_graph(client: Any, expr: Any, keys: Any) -> None:
    """Graph listeners (read after the key listeners: one added by them sees this graph
    too), and the timed ``dask.compute`` call this graph leaves from (``hooks.Call``)."""
    call = hooks.current_call()
    if call is not None:
        call.submits.append(perf_counter())
    for listener in _graph_listeners:
        try:
            listener(client, expr, keys)
        except Exception as exc:
            remove_graph_listener(listener)
            _warn(f"a cluster recording raised {exc!r} and is switched off")


_submits = _Patch("_graph_to_futures", _wrap_submit)
#: ``listener(client, expr, keys)``: the graph itself as it leaves (keep a reference only;
#: reading it costs what materializing it costs)
_graph_listeners: tuple[Callable[[Any, Any, Any], None], ...] = ()
_closes = _Patch("close", _wrap_close)


def add_listener(listener: Listener) -> None:
    """Call ``listener(client, keys)`` before every graph submission (patches on the first)."""
    _submits.add(listener)


def remove_listener(listener: Listener) -> None:
    """Stop calling ``listener``; the last one gone puts distributed's method back."""
    _submits.remove(listener)


def add_close_listener(listener: CloseListener) -> None:
    """Call ``listener(client)`` when ``close()`` is called on a running synchronous client,
    before it closes (patches ``Client.close`` on the first listener)."""
    _closes.add(listener)


def remove_close_listener(listener: CloseListener) -> None:
    """Stop calling ``listener``; the last one gone puts distributed's method back."""
    _closes.remove(listener)


def add_graph_listener(listener: Callable[[Any, Any, Any], None]) -> None:
    """Call ``listener(client, expr, keys)`` with each graph submitted (patches on the
    first, as :func:`add_listener`): ``expr`` is what distributed sends."""
    global _graph_listeners
    with _lock:
        if listener not in _graph_listeners:
            _graph_listeners = (*_graph_listeners, listener)
    _submits.add(_for_graph_listeners)


def remove_graph_listener(listener: Callable[[Any, Any, Any], None]) -> None:
    """Stop calling ``listener``; idempotent. The last listener of either kind gone puts
    distributed's method back."""
    global _graph_listeners
    with _lock:
        _graph_listeners = tuple(g for g in _graph_listeners if g != listener)
        last = not _graph_listeners
    if last:
        _submits.remove(_for_graph_listeners)


def _for_graph_listeners(client: Any, keys: Any) -> None:
    """Keeps ``Client._graph_to_futures`` wrapped while graph listeners are registered
    (a recording given its client explicitly installs no key listener)."""


def listening() -> bool:
    """Whether ``Client._graph_to_futures`` is wrapped now."""
    return _submits.original is not None


def _can_block(client: Any) -> bool:
    """Whether round trips to the scheduler can be made before ``client`` closes: a running
    synchronous client, not called from an event loop nor at interpreter exit."""
    if getattr(client, "status", None) != "running" or getattr(client, "asynchronous", False):
        return False
    if sys.is_finalizing():
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def _warn(what: str) -> None:
    warnings.warn(
        f"daskprofile: {what}; the computation is not affected", RuntimeWarning, stacklevel=4
    )
