"""``Callback``: dask's callback class, safe across threads.

Same constructor (``start``, ``start_state``, ``pretask``, ``posttask``, ``finish``), same
subclassing hooks (``_start``, ``_start_state``, ``_pretask``, ``_posttask``, ``_finish``),
context manager and ``register()``/``unregister()``. Registration goes to our own
thread-safe registry (:attr:`Callback.active`) fed by :mod:`daskprofile.hooks`, not to
dask's ``Callback.active``: two threads computing at once each see every registered
callback and nothing is unregistered behind the user's back. As in dask, a compute started
inside a task does not call them (only the outermost compute does).

A callback that raises is switched off until registered again, with one warning; the
computation is never affected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, ClassVar

from . import hooks
from .hooks import Compute, Listener, TaskEvent

__all__ = ["Callback", "Registry"]

_FIELDS = ("_start", "_start_state", "_pretask", "_posttask", "_finish")
_HOOK_FIELD = {
    "on_compute_start": "_start",
    "on_start_state": "_start_state",
    "on_submit": "_pretask",
    "on_task": "_posttask",
    "on_compute_end": "_finish",
}


class Registry:
    """The registered callbacks: a thread-safe set-like object (truthy when not empty)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[int, Callback] = {}

    def add(self, callback: Callback) -> None:
        """Register ``callback`` (no-op if it already is)."""
        with self._lock:
            self._items[id(callback)] = callback
            hooks.add_listener(callback)

    def discard(self, callback: Callback) -> None:
        """Unregister ``callback`` if registered."""
        with self._lock:
            self._items.pop(id(callback), None)
            hooks.remove_listener(callback)

    def remove(self, callback: Callback) -> None:
        """Unregister ``callback``; ``KeyError`` if it was not registered."""
        with self._lock:
            if id(callback) not in self._items:
                raise KeyError(callback)
            del self._items[id(callback)]
            hooks.remove_listener(callback)

    def clear(self) -> None:
        """Unregister every callback."""
        with self._lock:
            items, self._items = list(self._items.values()), {}
            for callback in items:
                hooks.remove_listener(callback)

    def __contains__(self, callback: object) -> bool:
        return self._items.get(id(callback)) is callback

    def __iter__(self) -> Iterator[Callback]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<daskprofile callbacks: {list(self._items.values())!r}>"


def worker_id(compute: Compute, event: TaskEvent) -> int:
    """The real worker of a task: its process id if it ran in another process, else the
    thread ident (also for the sync scheduler, where dask gives None)."""
    return event.pid if compute.scheduler == "processes" else event.tid


def dask_worker_id(compute: Compute, event: TaskEvent) -> int | None:
    """The ``worker_id`` dask itself passes to ``posttask`` for this scheduler."""
    if compute.scheduler == "sync":
        return None
    return worker_id(compute, event)


class Callback(Listener):
    """Base class for dask callbacks (see the module docstring).

    >>> def pretask(key, dsk, state):
    ...     print("running", key)
    >>> with Callback(pretask=pretask):  # doctest: +SKIP
    ...     x.compute()
    """

    active: ClassVar[Registry] = Registry()

    def __init__(
        self,
        start: Callable[[Mapping[Any, Any]], None] | None = None,
        start_state: Callable[[Mapping[Any, Any], dict[str, Any]], None] | None = None,
        pretask: Callable[[Hashable, Mapping[Any, Any], dict[str, Any]], None] | None = None,
        posttask: Callable[..., None] | None = None,
        finish: Callable[[Mapping[Any, Any], dict[str, Any], bool], None] | None = None,
    ) -> None:
        for name, fn in zip(_FIELDS, (start, start_state, pretask, posttask, finish), strict=False):
            if fn is not None:
                if not callable(fn):
                    raise TypeError(f"{name[1:]} must be callable, got {fn!r}")
                setattr(self, name, fn)

    @property
    def _callback(self) -> tuple[Callable[..., Any] | None, ...]:
        """dask's 5-tuple form of this callback."""
        return tuple(getattr(self, name, None) for name in _FIELDS)

    # ------------------------------------------------------------ registration
    def __enter__(self) -> Callback:
        self._was_registered = self in Callback.active
        Callback.active.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if not getattr(self, "_was_registered", False):
            Callback.active.discard(self)

    def register(self) -> None:
        """Call this callback for every compute until :meth:`unregister`."""
        Callback.active.add(self)

    def unregister(self) -> None:
        """Stop calling this callback (no error if it was not registered)."""
        Callback.active.discard(self)

    # ------------------------------------------------------------ listener
    def wants(self, hook: str) -> bool:
        """Whether this callback needs ``hook`` (overridden ``on_*`` or a ``_*`` function)."""
        if getattr(type(self), hook) is not getattr(Callback, hook):
            return True
        field = _HOOK_FIELD.get(hook)
        return field is not None and getattr(self, field, None) is not None

    def on_compute_start(self, compute: Compute) -> None:
        self._start(compute.dsk)  # type: ignore[attr-defined]

    def on_start_state(self, compute: Compute, state: dict[str, Any]) -> None:
        self._start_state(compute.dsk, state)  # type: ignore[attr-defined]

    def on_submit(self, compute: Compute, key: Hashable, state: dict[str, Any]) -> None:
        self._pretask(key, compute.dsk, state)  # type: ignore[attr-defined]

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        if event.error is None:
            wid = dask_worker_id(compute, event)
            self._posttask(event.key, result, compute.dsk, state, wid)  # type: ignore[attr-defined]

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        self._finish(compute.dsk, state, failed)  # type: ignore[attr-defined]
