"""The scheduler hook: task events timed where tasks run, for any number of listeners.

While at least one :class:`Listener` is registered, ``dask.local.get_async`` (and the
bindings ``dask.threaded`` and ``dask.multiprocessing`` made of it) is replaced by
:func:`get_async`; the originals come back when the last listener goes.

For each outermost compute the wrapper:

* passes callbacks explicitly (dask's ``Callback.active`` or the caller's, plus our
  dispatcher), so dask's global callback swap - which loses records when two threads
  compute at once - never runs;
* wraps ``loads``/``dumps``/``pack_exception`` in small picklable objects. Where the task
  runs (worker thread or worker process), ``loads`` of the task notes its start and
  ``dumps`` of its result its stop, and the result travels back inside a
  :class:`TaskEvent` envelope; the scheduling side unwraps it in ``loads`` before dask
  sees it, so results and ``worker_id`` are unchanged for every other callback.

Computes started inside a task are nested: they run untouched and without global
callbacks, as in dask. Listener calls are guarded: a listener that raises is switched off
(until it is registered again), one warning is issued and the listener is told through
:meth:`Listener.on_listener_error`; the computation never sees it.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import os
import sys
import threading
import warnings
from collections.abc import Callable, Hashable, Mapping
from threading import get_ident
from time import perf_counter
from types import ModuleType
from typing import Any, Protocol

from . import worker as _worker
from .keys import key_label, task_group

__all__ = [
    "Compute",
    "Listener",
    "TaskEvent",
    "WorkerHook",
    "add_listener",
    "installed",
    "listeners",
    "original_get_async",
    "remove_listener",
]

#: modules whose ``get_async`` binding is replaced while hooked
_MODULES = ("dask.local", "dask.threaded", "dask.multiprocessing")


class TaskEvent:
    """One task timed where it ran; also the envelope carrying its result back.

    ``start``/``stop``/``submit`` are ``perf_counter()`` seconds (comparable across the
    kernel and its worker processes on Linux); ``pid``/``tid`` name the process and
    thread that ran the task; ``error`` is the exception type name or ``None``.
    """

    __slots__ = ("error", "extra", "key", "payload", "pid", "start", "stop", "submit", "tid")

    def __init__(  # noqa: PLR0917 - positional: built once per task on the hot path
        self,
        key: Hashable,
        start: float,
        stop: float,
        pid: int,
        tid: int,
        error: str | None = None,
        payload: Any = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.key = key
        self.start = self.submit = start
        self.stop = stop
        self.pid = pid
        self.tid = tid
        self.error = error
        self.payload = payload
        self.extra = extra

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.key, self.start, self.stop, self.pid, self.tid, self.error)
        return (TaskEvent, (*args, self.payload, self.extra))

    @property
    def status(self) -> str:
        """``"ok"`` or ``"error"``."""
        return "ok" if self.error is None else "error"

    @property
    def worker(self) -> str:
        """``"<pid>:<thread ident>"`` of where the task ran."""
        return f"{self.pid}:{self.tid}"

    def __repr__(self) -> str:
        return (
            f"TaskEvent(key={self.key!r}, submit={self.submit:.6f}, start={self.start:.6f},"
            f" stop={self.stop:.6f}, worker={self.worker!r}, status={self.status!r})"
        )


class WorkerHook(Protocol):
    """Picklable code run where tasks run (e.g. a per-process stack sampler).

    ``on_start`` runs in the worker thread just before a task, ``on_stop`` just after;
    what ``on_stop`` returns (unless ``None``) travels back in ``TaskEvent.extra[name]``.
    """

    name: str

    def on_start(self, key: Hashable) -> None: ...

    def on_stop(self) -> Any: ...


class Listener:
    """Base class of what listens to scheduler events; override what you need.

    All methods run in the scheduling thread of the compute, never where tasks run.
    ``worker_hooks`` are shipped with every task of a compute; ``track_running`` asks
    for :mod:`daskprofile.worker` to be kept up to date where tasks run. Only overridden
    methods are called (a listener may instead define ``wants(name) -> bool``).
    """

    worker_hooks: tuple[WorkerHook, ...] = ()
    track_running: bool = False

    def on_compute_start(self, compute: Compute) -> None:
        """A compute starts; ``compute.dsk`` is its graph."""

    def on_start_state(self, compute: Compute, state: dict[str, Any]) -> None:
        """dask's scheduler state is ready (mutated in place as the compute runs)."""

    def on_submit(self, compute: Compute, key: Hashable, state: dict[str, Any]) -> None:
        """Task ``key`` is handed to the workers."""

    def on_task(
        self, compute: Compute, event: TaskEvent, result: Any, state: dict[str, Any]
    ) -> None:
        """Task done (``event.error`` set and ``result`` None if it failed)."""

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        """The compute ended (``failed`` if it raised)."""

    def on_listener_error(self, exc: BaseException) -> None:
        """This listener raised and has been switched off."""


_HOOK_NAMES = ("on_compute_start", "on_start_state", "on_submit", "on_task", "on_compute_end")


def _overrides(listener: Any, name: str) -> bool:
    wants = getattr(listener, "wants", None)
    if wants is not None:
        return bool(wants(name))
    base = getattr(Listener, name)
    return getattr(type(listener), name, base) is not base


# ---------------------------------------------------------------- where tasks run

_tls = threading.local()
_pid = os.getpid()


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _identity(x: Any) -> Any:
    return x


def _is_identity(fn: Any) -> bool:
    return fn is _identity or (
        getattr(fn, "__name__", None) == "identity"
        and getattr(fn, "__module__", None) == "dask.local"
    )


def _task_started(key: Hashable, task: Any, track: bool, hooks: tuple[WorkerHook, ...]) -> None:
    if track:  # the same group name as the task table's (fused tasks: their layers)
        _worker.task_started(key_label(key), task_group(key, task))
    for hook in hooks:
        _call_hook(hook.on_start, key)


class _Loads:
    """``loads`` wrapper: a task's start where it runs; unwraps results where scheduled."""

    __slots__ = ("compute", "hooks", "identity", "inner", "slow", "track")

    def __init__(
        self,
        inner: Callable[[Any], Any],
        compute: Compute | None = None,
        track: bool = False,
        hooks: tuple[WorkerHook, ...] = (),
    ) -> None:
        self.inner = inner
        self.identity = _is_identity(inner)
        self.compute = compute
        self.track = track
        self.hooks = hooks
        self.slow = track or bool(hooks)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Loads, (self.inner, None, self.track, self.hooks))

    def __call__(self, obj: Any) -> Any:
        if type(obj) is TaskEvent:  # the scheduling side receiving a result
            payload = self.compute.unwrap(obj)  # type: ignore[union-attr]
            return payload if self.identity else self.inner(payload)
        out = obj if self.identity else self.inner(obj)
        try:
            task = out[0]
            key = task.key
        except Exception:
            task = key = None
        _tls.task = (key, perf_counter())  # after unpickling: the task runs from here
        if self.slow:
            _task_started(key, task, self.track, self.hooks)
        return out


class _Dumps:
    """``dumps`` wrapper: a task's stop where it runs, result wrapped in a TaskEvent."""

    __slots__ = ("hooks", "identity", "inner", "slow", "track")

    def __init__(
        self, inner: Callable[[Any], Any], track: bool = False, hooks: tuple[WorkerHook, ...] = ()
    ) -> None:
        self.inner = inner
        self.identity = _is_identity(inner)
        self.track = track
        self.hooks = hooks
        self.slow = track or bool(hooks)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Dumps, (self.inner, self.track, self.hooks))

    def __call__(self, obj: Any) -> Any:
        task = getattr(_tls, "task", None)
        if task is None:  # the scheduling side packing a task
            return obj if self.identity else self.inner(obj)
        stop = perf_counter()
        _tls.task = None
        extra = _task_done(self.track, self.hooks) if self.slow else None
        payload = obj if self.identity else self.inner(obj)
        return TaskEvent(task[0], task[1], stop, _pid, get_ident(), None, payload, extra)


class _PackException:
    """``pack_exception`` wrapper: the failing task's stop and error type."""

    __slots__ = ("hooks", "inner", "track")

    def __init__(
        self,
        inner: Callable[[BaseException, Any], Any],
        track: bool = False,
        hooks: tuple[WorkerHook, ...] = (),
    ) -> None:
        self.inner = inner
        self.track = track
        self.hooks = hooks

    def __reduce__(self) -> tuple[Any, ...]:
        return (_PackException, (self.inner, self.track, self.hooks))

    def __call__(self, exc: BaseException, dumps: Any) -> Any:
        stop = perf_counter()
        task = getattr(_tls, "task", None) or (None, stop)
        _tls.task = None
        extra = _task_done(self.track, self.hooks)
        ev = TaskEvent(task[0], task[1], stop, _pid, get_ident(), type(exc).__name__)
        ev.extra = extra
        inner_dumps = dumps.inner if type(dumps) is _Dumps else dumps
        try:
            ev.payload = self.inner(exc, inner_dumps)
        except BaseException:
            _tls.raised = ev  # dask's default re-raises here (sync): picked up at finish
            raise
        return ev


def _task_done(track: bool, hooks: tuple[WorkerHook, ...]) -> dict[str, Any] | None:
    if track:
        _worker.task_stopped()
    if not hooks:
        return None
    extra = {}
    for hook in hooks:
        payload = _call_hook(hook.on_stop)
        if payload is not None:
            extra[hook.name] = payload
    return extra or None


def _call_hook(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # a worker hook never fails a task
        return None


# ---------------------------------------------------------------- scheduling side

_ids = itertools.count(1)
_SCHEDULERS = {
    ("dask.threaded", "_thread_get_id"): "threads",
    ("dask.multiprocessing", "_process_get_id"): "processes",
    ("dask.local", "default_get_id"): "sync",
}


def _scheduler_kind(get_id: Any) -> str:
    ident = (getattr(get_id, "__module__", None), getattr(get_id, "__name__", None))
    return _SCHEDULERS.get(ident, "other")  # type: ignore[arg-type]


class Compute:
    """One outermost compute as listeners see it; also its dask callback dispatcher."""

    def __init__(self, listeners: tuple[Any, ...], scheduler: str) -> None:
        self.id = next(_ids)
        self.scheduler = scheduler
        self.thread = get_ident()
        self.t_start = perf_counter()
        self.dsk: Mapping[Any, Any] = {}
        self.state: dict[str, Any] = {}
        self._submitted: dict[Hashable, float] = {}
        self._last: TaskEvent | None = None
        self._hooks: dict[str, list[tuple[Any, Callable[..., None]]]] = {
            name: [(lst, getattr(lst, name)) for lst in listeners if _overrides(lst, name)]
            for name in _HOOK_NAMES
        }
        self._on_task = self._hooks["on_task"]
        self._on_submit = self._hooks["on_submit"]
        self.track_running = any(getattr(lst, "track_running", False) for lst in listeners)
        self.worker_hooks = tuple(h for lst in listeners for h in getattr(lst, "worker_hooks", ()))
        #: whether tasks are timed where they run; not when no listener wants task events
        #: (progress bars read dask's state): then nothing is done per task
        self.timed = bool(self._on_task) or self.track_running or bool(self.worker_hooks)

    def callback(self) -> tuple[Callable[..., None] | None, ...]:
        """The dask callback tuple ``(start, start_state, pretask, posttask, finish)``."""
        if not self.timed:
            pretask = self._pretask if self._on_submit else None
            return (self._start, self._start_state, pretask, None, self._finish)
        return (self._start, self._start_state, self._pretask, self._posttask, self._finish)

    # dask callbacks --------------------------------------------------------
    def _start(self, dsk: Mapping[Any, Any]) -> None:
        self.dsk = dsk
        self._emit("on_compute_start")

    def _start_state(self, dsk: Mapping[Any, Any], state: dict[str, Any]) -> None:
        self.state = state
        self._emit("on_start_state", state)

    def _pretask(self, key: Hashable, dsk: Mapping[Any, Any], state: dict[str, Any]) -> None:
        self._submitted[key] = perf_counter()
        for lst, fn in self._on_submit:
            try:
                fn(self, key, state)
            except Exception as exc:
                self._fault(lst, exc)

    def _posttask(
        self, key: Hashable, result: Any, dsk: Mapping[Any, Any], state: dict[str, Any], wid: Any
    ) -> None:
        ev = self._last
        self._last = None
        if ev is None or ev.key != key:
            ev = self._orphan(key)
        for lst, fn in self._on_task:
            try:
                fn(self, ev, result, state)
            except Exception as exc:
                self._fault(lst, exc)

    def _finish(self, dsk: Mapping[Any, Any], state: dict[str, Any], failed: bool) -> None:
        raised = getattr(_tls, "raised", None)
        if raised is not None:
            _tls.raised = None
            self._deliver_error(raised)
        self._emit("on_compute_end", state, failed)

    # envelopes -------------------------------------------------------------
    def unwrap(self, ev: TaskEvent) -> Any:
        """Scheduling side of ``loads``: note the event, give dask the inner payload."""
        payload = ev.payload
        ev.payload = None
        ev.submit = self._submitted.pop(ev.key, ev.start)
        if ev.error is None:
            self._last = ev
        else:
            self._deliver_error(ev)
        return payload

    def _deliver_error(self, ev: TaskEvent) -> None:
        for lst, fn in self._on_task:
            try:
                fn(self, ev, None, self.state)
            except Exception as exc:
                self._fault(lst, exc)

    def _orphan(self, key: Hashable) -> TaskEvent:
        now = perf_counter()
        ev = TaskEvent(key, now, now, _pid, get_ident())
        ev.submit = self._submitted.pop(key, now)
        return ev

    # guards ----------------------------------------------------------------
    def _emit(self, name: str, *args: Any) -> None:
        for lst, fn in self._hooks[name]:
            try:
                fn(self, *args)
            except Exception as exc:
                self._fault(lst, exc)

    def _fault(self, lst: Any, exc: Exception) -> None:
        # new lists (not in place): a loop over the old ones may be running
        self._hooks = {
            name: [e for e in entries if e[0] is not lst] for name, entries in self._hooks.items()
        }
        self._on_task = self._hooks["on_task"]
        self._on_submit = self._hooks["on_submit"]
        _switch_off(lst, exc)

    def close(self) -> None:
        """Drop references to the graph and state once the compute is over."""
        self.dsk = {}
        self.state = {}
        self._submitted.clear()
        self._last = None


# ---------------------------------------------------------------- registry + patching

_lock = threading.RLock()
_listeners: tuple[Any, ...] = ()
_faulted: set[int] = set()
_current: contextvars.ContextVar[Compute | None] = contextvars.ContextVar(
    "daskprofile_compute", default=None
)


def _load_original() -> Callable[..., Any]:
    import dask.local

    fn = dask.local.get_async
    return getattr(fn, "__wrapped__", fn)


original_get_async: Callable[..., Any] = _load_original()
_SIGNATURE = inspect.signature(original_get_async)


def _switch_off(lst: Any, exc: Exception) -> None:
    with _lock:
        first = id(lst) not in _faulted
        _faulted.add(id(lst))
    if first:
        name = getattr(lst, "name", None) or type(lst).__name__
        warnings.warn(
            f"daskprofile: {name} raised {exc!r} and is switched off for this run; "
            "the computation is not affected",
            RuntimeWarning,
            stacklevel=2,
        )
    with contextlib.suppress(Exception):
        lst.on_listener_error(exc)


def _nested() -> bool:
    return _current.get() is not None or getattr(_tls, "task", None) is not None


def get_async(*args: Any, **kwargs: Any) -> Any:
    """Drop-in for ``dask.local.get_async`` that feeds the registered listeners."""
    active = tuple(lst for lst in _listeners if id(lst) not in _faulted)
    if _nested():
        kwargs.setdefault("callbacks", ())  # dask: only the outermost compute uses globals
        return original_get_async(*args, **kwargs)
    if not active:
        return original_get_async(*args, **kwargs)
    bound = _SIGNATURE.bind(*args, **kwargs)
    bound.apply_defaults()
    return _run_hooked(bound, active)


get_async.__wrapped__ = original_get_async  # type: ignore[attr-defined]


def _run_hooked(bound: inspect.BoundArguments, active: tuple[Any, ...]) -> Any:
    a = bound.arguments
    compute = Compute(active, _scheduler_kind(a.get("get_id")))
    callbacks = a.get("callbacks")
    if callbacks is None:
        from dask.callbacks import Callback as DaskCallback

        callbacks = list(DaskCallback.active)
    a["callbacks"] = [*callbacks, compute.callback()]
    if compute.timed:
        track, hooks = compute.track_running, compute.worker_hooks
        a["loads"] = _Loads(a["loads"], compute, track, hooks)
        a["dumps"] = _Dumps(a["dumps"], track, hooks)
        a["pack_exception"] = _PackException(a["pack_exception"], track, hooks)
    token = _current.set(compute)
    try:
        return original_get_async(*bound.args, **bound.kwargs)
    finally:
        _current.reset(token)
        _tls.raised = None
        compute.close()


def _targets() -> list[ModuleType]:
    return [m for name in _MODULES if (m := sys.modules.get(name)) is not None]


def _install() -> None:
    for module in _targets():
        if getattr(module, "get_async", None) is original_get_async:
            module.get_async = get_async  # type: ignore[attr-defined]


def _uninstall() -> None:
    for module in _targets():
        if getattr(module, "get_async", None) is get_async:
            module.get_async = original_get_async  # type: ignore[attr-defined]


def add_listener(listener: Any) -> None:
    """Register ``listener`` (installs the hook if it is the first)."""
    global _listeners
    with _lock:
        _faulted.discard(id(listener))
        if any(lst is listener for lst in _listeners):
            return
        _listeners = (*_listeners, listener)
        _install()


def remove_listener(listener: Any) -> None:
    """Unregister ``listener`` (uninstalls the hook when none is left); idempotent."""
    global _listeners
    with _lock:
        _faulted.discard(id(listener))
        _listeners = tuple(lst for lst in _listeners if lst is not listener)
        if not _listeners:
            _uninstall()


def listeners() -> tuple[Any, ...]:
    """The registered listeners."""
    return _listeners


def installed() -> bool:
    """Whether any dask module currently calls our wrapper."""
    return any(getattr(m, "get_async", None) is get_async for m in _targets())


def current_compute() -> Compute | None:
    """The outermost compute running in this context, if any."""
    return _current.get()
