"""The scheduler hook: task events timed where tasks run, for any number of listeners.

While at least one :class:`Listener` is registered, ``dask.local.get_async`` (and the
bindings ``dask.threaded`` and ``dask.multiprocessing`` made of it) is replaced by
:func:`get_async`; the originals come back when the last listener goes.

For each outermost compute the wrapper passes callbacks explicitly (dask's
``Callback.active`` or the caller's, plus our dispatcher), so dask's global callback swap -
which loses records when two threads compute at once - never runs. To time tasks where they
run it works in one of two modes:

* **local** (sync and threads schedulers, when every listener takes task events in
  batches): dask's ``submit`` is wrapped, so the executor runs dask's batches of tasks
  through our ``run_batch``, which times each task around dask's own ``execute_task``
  and appends one plain tuple to the compute's pending list. Nothing else happens per
  task, on either side: pending rows reach listeners' :meth:`Listener.on_tasks` in batches
  (every :data:`BATCH` tasks, when a reader calls :func:`flush`, and when the compute ends).
  The submit time is taken per batch, except on the sync scheduler, where a task runs as
  it is handed out.
* **envelope** (the processes scheduler, or a listener that wants each result through
  :meth:`Listener.on_task`): the result travels back inside a picklable :class:`TaskEvent`;
  the scheduling side unwraps it in ``loads`` before dask sees it.

Results and ``worker_id`` are unchanged for every other callback. Computes started inside a
task are nested: they run untouched and without global callbacks, as in dask. Listener
calls are guarded: a listener that raises is switched off (until it is registered again),
one warning is issued and the listener is told through :meth:`Listener.on_listener_error`;
the computation never sees it.

While hooked, ``dask.compute``/``dask.persist`` (and ``dask.base``'s, which collections'
``.compute()`` call) are wrapped too, reversibly: the outermost call's time is noted
(:class:`Call`), so a compute knows when it was asked for (``Compute.t_call``) and the time
spent building and optimizing its graph can be told apart from its tasks.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import itertools
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping
from functools import cached_property
from threading import get_ident
from time import perf_counter
from types import ModuleType
from typing import Any, Protocol

from . import failures
from . import spans as _spans
from . import worker as _worker

__all__ = [
    "BATCH",
    "Call",
    "Compute",
    "Listener",
    "TaskBatch",
    "TaskEvent",
    "WorkerHook",
    "add_call_listener",
    "add_drain_observer",
    "call_listeners",
    "current_call",
    "add_listener",
    "drain_observers",
    "enter_scope",
    "exit_scope",
    "flush",
    "in_scope",
    "installed",
    "listeners",
    "original_get_async",
    "remove_call_listener",
    "remove_drain_observer",
    "remove_listener",
]

log = logging.getLogger("daskprofile")

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


#: pending task rows of a compute are handed to listeners once this many have finished
BATCH = 512

#: a row of a compute's pending list:
#: (key, submit, start, stop, pid, tid, error, extra, number of dependencies or None)
Row = tuple[
    Hashable, float, float, float, int, int, "str | None", "dict[str, Any] | None", "int | None"
]


class TaskBatch:
    """Task events of one compute, in the order they finished, as parallel columns.

    ``key``, ``submit``/``start``/``stop`` (perf_counter seconds), ``pid``, ``tid``,
    ``error`` (exception type name or ``None``), ``extra`` (worker-hook payloads or
    ``None``) and ``deps`` (how many results the task was given, ``None`` where not
    known) are tuples of equal length. Iterating gives :class:`TaskEvent` objects.
    """

    __slots__ = ("deps", "error", "extra", "key", "pid", "start", "stop", "submit", "tid")

    def __init__(self, rows: list[Row]) -> None:
        cols: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 9
        self.key, self.submit, self.start, self.stop = cols[0], cols[1], cols[2], cols[3]
        self.pid, self.tid, self.error, self.extra = cols[4], cols[5], cols[6], cols[7]
        self.deps = cols[8]

    def __len__(self) -> int:
        return len(self.key)

    def __iter__(self) -> Iterator[TaskEvent]:
        cols = (self.key, self.submit, self.start, self.stop, self.pid, self.tid)
        for key, submit, start, stop, pid, tid, error, extra in zip(
            *cols, self.error, self.extra, strict=True
        ):
            ev = TaskEvent(key, start, stop, pid, tid, error, None, extra)
            ev.submit = submit
            yield ev


class WorkerHook(Protocol):
    """Picklable code run where tasks run (e.g. a per-process stack sampler).

    ``on_start`` runs in the worker thread just before a task, ``on_stop`` just after;
    what ``on_stop`` returns (unless ``None``) travels back in ``TaskEvent.extra[name]``.
    A hook with ``remote_only = True`` is not called for tasks run by the computing
    process itself (sync and threads schedulers).
    """

    name: str

    def on_start(self, key: Hashable) -> None: ...

    def on_stop(self) -> Any: ...


class Listener:
    """Base class of what listens to scheduler events; override what you need.

    Task events come one of two ways: :meth:`on_tasks` receives them in batches (cheap:
    nothing is done per task on the scheduling side), :meth:`on_task` one by one with each
    result and dask's state (a compute with such a listener costs more per task). Batches
    of one compute are delivered one at a time, in order, but from whichever thread drains
    them (a worker thread, a reader calling :func:`flush`, or the scheduling thread); the
    other methods run in the scheduling thread. ``worker_hooks`` are shipped with every task
    of a compute; ``track_running`` asks for :mod:`daskprofile.worker` to be kept up to date
    where tasks run. Only overridden methods are called (a listener may instead define
    ``wants(name) -> bool``).
    """

    worker_hooks: tuple[WorkerHook, ...] = ()
    track_running: bool = False
    #: the block this listener records for (:func:`enter_scope`); None: every compute
    scope: object | None = None

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

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        """Tasks done, in a batch (failed ones have their ``error`` set)."""

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        """The compute ended (``failed`` if it raised)."""

    def on_listener_error(self, exc: BaseException) -> None:
        """This listener raised and has been switched off."""


_HOOK_NAMES = (
    "on_compute_start",
    "on_start_state",
    "on_submit",
    "on_task",
    "on_tasks",
    "on_compute_end",
)


def _overrides(listener: Any, name: str) -> bool:
    wants = getattr(listener, "wants", None)
    if wants is not None:
        return bool(wants(name))
    base = getattr(Listener, name)
    return getattr(type(listener), name, base) is not base


# ---------------------------------------------------------------- where tasks run


class _Local(threading.local):
    """Per-thread state: in envelope mode, the running task's ``(key, start)`` where it
    runs (local mode keeps its tasks in :data:`worker.running` instead)."""

    task: tuple[Any, ...] | None = None
    raised: TaskEvent | None = None  # envelope mode, sync: a failure dask re-raised


_tls = _Local()
_pid = os.getpid()
_running = _worker.running
_spent = _worker.spent


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
    if track:  # raw key and task: worker.snapshot() names them when a sample needs it
        _running[get_ident()] = (key, task)
    for hook in hooks:
        _call_hook(hook.on_start, key)


def _local_hooks(hooks: tuple[WorkerHook, ...]) -> tuple[WorkerHook, ...]:
    """The worker hooks worth calling where tasks run in this process (not remote-only)."""
    return tuple(h for h in hooks if not getattr(h, "remote_only", False))


def _error_name(packed: Any) -> str:
    """Exception type name of a task dask reports failed (``(exception, traceback)``)."""
    try:
        return type(packed[0]).__name__
    except Exception:
        return "Exception"


def _packed_exception(packed: Any) -> BaseException | None:
    """The exception of a task dask reports failed (``(exception, traceback)``), if any."""
    try:
        exc = packed[0]
    except Exception:
        return None
    return exc if isinstance(exc, BaseException) else None


def _with_failure(extra: dict[str, Any] | None, exc: BaseException | None) -> dict[str, Any]:
    """``extra`` with the failed task's ``(message, traceback)`` (:mod:`.failures`): made
    where the task ran, for failed tasks only."""
    out = dict(extra) if extra else {}
    out[failures.EXTRA] = failures.describe(exc) if exc is not None else ("", "")
    return out


def _local_submit(compute: Compute, submit: Callable[..., Any]) -> Callable[..., Any]:
    """Local-mode ``submit`` for ``compute``: hands dask's batches of tasks to the executor
    as :func:`run_batch`, which times each task where it runs.

    On the scheduling side this is one call per batch (a submit time is taken unless the
    executor runs the batch right here: then it would be the start). Where the batch runs,
    each task is noted in :data:`worker.running` (what the stack sampler reads, and how a
    compute started inside a task knows it is nested) while dask's own ``execute_task``
    runs it; then its row goes to ``compute.pending``. Nothing wraps dask's
    ``loads``/``dumps`` (identities here), so nothing else runs per task.
    """
    import dask.local

    batch_execute = dask.local.batch_execute_tasks
    execute: Callable[..., Any] = dask.local.execute_task
    hooks = _local_hooks(compute.worker_hooks)
    pending = compute.pending
    append = pending.append
    drain = compute.drain
    running = _running
    inline = _runs_inline(submit)  # sync: the batch runs here, as it is handed out
    # task time for the stack sampler, which looks for tasks it misses: a thread that runs
    # batches as they are handed out never gives the GIL up between tasks, so none are missed
    spent = None if inline else _spent

    def run_batch(args: list[tuple[Any, ...]], submitted: float | None) -> list[Any]:
        tid = get_ident()
        out = []
        busy = 0.0
        for a in args:
            key = a[0]
            try:
                task, data = a[1]
                deps: int | None = len(data)
            except Exception:
                task = deps = None
            for hook in hooks:
                _call_hook(hook.on_start, key)
            running[tid] = (key, task)
            done: Any = None
            error: str | None = None
            raised: BaseException | None = None
            start = perf_counter()  # the task runs from here
            try:
                done = execute(*a)
            except BaseException as exc:  # dask's sync default re-raises a task's error
                error = type(exc).__name__
                raised = exc
                raise
            finally:
                stop = perf_counter()
                running.pop(tid, None)
                if done is not None and done[2]:  # failed, packed by dask
                    error = _error_name(done[1])
                    raised = _packed_exception(done[1])
                extra = _task_done(False, hooks) if hooks else None
                if error is not None:
                    extra = _with_failure(extra, raised)
                sub = start if submitted is None else submitted
                append((key, sub, start, stop, _pid, tid, error, extra, deps))
                busy += stop - start
            if len(pending) >= BATCH:
                drain()
            out.append(done)
        if spent is not None:  # no lock: a rare lost update only blurs the sampler's estimate
            spent[0] += busy
            spent[1] += len(out)
        return out

    def timed_submit(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if fn is not batch_execute or len(args) != 1 or kwargs:
            return submit(fn, *args, **kwargs)  # not what we know how to time
        return submit(run_batch, args[0], None if inline else perf_counter())

    return timed_submit


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
        extra = None
        if self.slow:
            extra = _task_done(self.track, self.hooks)
            if self.track:  # task time for the stack sampler, which looks for tasks it misses
                _spent[0] += stop - task[1]
                _spent[1] += 1
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
        ev.extra = _with_failure(extra, exc)
        inner_dumps = dumps.inner if type(dumps) is _Dumps else dumps
        try:
            ev.payload = self.inner(exc, inner_dumps)
        except BaseException:
            _tls.raised = ev  # dask's default re-raises here (sync): picked up at finish
            raise
        return ev


def _task_done(track: bool, hooks: tuple[WorkerHook, ...]) -> dict[str, Any] | None:
    if track:
        _running.pop(get_ident(), None)
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

    def __init__(
        self, listeners: tuple[Any, ...], scheduler: str, outputs: frozenset[Any] = frozenset()
    ) -> None:
        self.id = next(_ids)
        self.scheduler = scheduler
        self.thread = get_ident()
        self.t_start = perf_counter()
        call = _call.get()
        #: ``perf_counter()`` of the outermost ``dask.compute`` call that led here (None: not
        #: called through it), and of this compute's end (None: running)
        self.t_call: float | None = call.t_call if call is not None else None
        self.t_end: float | None = None
        #: ``{key: set of dependency keys}`` (dask's own, from its scheduler state; kept
        #: after :meth:`close` for whoever holds this compute: the edges recorder)
        self.dependencies: Mapping[Any, Any] | None = None
        self.dsk: Mapping[Any, Any] = {}
        self.state: dict[str, Any] = {}
        #: the graph ``get_async`` was given (an expression keeps its layers' annotations)
        self.graph: Any = None
        #: the span open when the compute started (:func:`.spans.current`)
        self.span: _spans.Name | None = None
        #: the keys the compute returns (dask never releases their results)
        self.outputs = outputs
        #: rows of finished tasks not yet handed to ``on_tasks`` listeners (see :data:`Row`)
        self.pending: list[Row] = []
        self._drain_lock = threading.RLock()
        self._submitted: dict[Hashable, float] = {}
        self._last: TaskEvent | None = None
        self._hooks: dict[str, list[tuple[Any, Callable[..., None]]]] = {}
        self._set_hooks(
            {
                name: [(lst, getattr(lst, name)) for lst in listeners if _overrides(lst, name)]
                for name in _HOOK_NAMES
            }
        )
        self.track_running = any(getattr(lst, "track_running", False) for lst in listeners)
        self.worker_hooks = tuple(h for lst in listeners for h in getattr(lst, "worker_hooks", ()))
        #: whether tasks are timed where they run; not when no listener wants task events
        #: (progress bars read dask's state): then nothing is done per task
        self.timed = (
            bool(self._on_task or self._on_tasks) or self.track_running or bool(self.worker_hooks)
        )
        #: whether each result must come back through ``on_task`` (envelope mode)
        self.per_task = bool(self._on_task)
        #: whether tasks are timed in local mode (set by the hook before the compute runs)
        self.local = False

    @cached_property
    def spans(self) -> _spans.SpanMap | None:
        """The spans of this compute's tasks (:func:`.spans.of_compute`); None when no span
        is in use. Read once the compute has started."""
        return _spans.of_compute(self.graph, self.span)

    def _set_hooks(self, table: dict[str, list[tuple[Any, Callable[..., None]]]]) -> None:
        # a listener with on_tasks gets batches only, even if it also has on_task
        batched = {id(lst) for lst, _ in table["on_tasks"]}
        table["on_task"] = [e for e in table["on_task"] if id(e[0]) not in batched]
        self._hooks = table
        self._on_task = table["on_task"]
        self._on_tasks = table["on_tasks"]
        self._on_submit = table["on_submit"]

    def callback(self) -> tuple[Callable[..., None] | None, ...]:
        """The dask callback tuple ``(start, start_state, pretask, posttask, finish)``.

        ``pretask`` notes submit times in envelope mode only (local mode tags the task
        itself); ``posttask`` runs only for listeners that want each result.
        """
        envelope = self.timed and not self.local
        pretask = self._pretask if envelope or self._on_submit else None
        posttask = self._posttask if envelope and self.per_task else None
        return (self._start, self._start_state, pretask, posttask, self._finish)

    # dask callbacks --------------------------------------------------------
    def _start(self, dsk: Mapping[Any, Any]) -> None:
        self.dsk = dsk
        self._emit("on_compute_start")

    def _start_state(self, dsk: Mapping[Any, Any], state: dict[str, Any]) -> None:
        self.state = state
        self.dependencies = state.get("dependencies")  # never mutated by dask once made
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
        raised = _tls.raised
        if raised is not None:
            _tls.raised = None
            if self._on_tasks:  # (dask re-raised it: ``unwrap`` never saw it)
                raised.submit = self._submitted.pop(raised.key, raised.start)
                self._pend(raised)
            self._deliver_error(raised)
        self.t_end = perf_counter()
        self.drain()
        self._emit("on_compute_end", state, failed)

    # batches ---------------------------------------------------------------
    def drain(self) -> None:
        """Hand the pending rows to the ``on_tasks`` listeners (from any thread), then tell
        the drain observers (:func:`add_drain_observer`)."""
        with self._drain_lock:
            pending = self.pending
            n = len(pending)
            if not n:
                return
            rows = pending[:n]
            del pending[:n]  # rows appended meanwhile by worker threads stay
            if not self._on_tasks:
                return
            batch = TaskBatch(rows)
            for lst, fn in self._on_tasks:
                try:
                    fn(self, batch)
                except Exception as exc:
                    self._fault(lst, exc)
        for observer in _drain_observers:
            try:
                observer()
            except Exception:  # an observer never fails the compute
                log.exception("daskprofile: a drain observer failed")

    # envelopes -------------------------------------------------------------
    def unwrap(self, ev: TaskEvent) -> Any:
        """Scheduling side of ``loads``: note the event, give dask the inner payload."""
        payload = ev.payload
        ev.payload = None
        ev.submit = self._submitted.pop(ev.key, ev.start)
        if self._on_tasks:
            self._pend(ev)
        if ev.error is None:
            if self.per_task:
                self._last = ev
        else:
            self._deliver_error(ev)
        return payload

    def _pend(self, ev: TaskEvent) -> None:
        pending = self.pending
        pending.append(
            (ev.key, ev.submit, ev.start, ev.stop, ev.pid, ev.tid, ev.error, ev.extra, None)
        )
        if len(pending) >= BATCH:
            self.drain()

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
        self._set_hooks(
            {name: [e for e in entries if e[0] is not lst] for name, entries in self._hooks.items()}
        )
        _switch_off(lst, exc)

    def close(self) -> None:
        """Hand over what is pending, then drop references to the graph and state."""
        self.drain()
        self.dsk = {}
        self.state = {}
        self.graph = None
        self._submitted.clear()
        self._last = None


# ---------------------------------------------------------------- registry + patching

_lock = threading.RLock()
_listeners: tuple[Any, ...] = ()
_drain_observers: tuple[Callable[[], None], ...] = ()
_running_computes: set[Compute] = set()
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
    """Whether this thread is inside a compute or a task (then dask runs untouched)."""
    return _current.get() is not None or _tls.task is not None or get_ident() in _running


# ---------------------------------------------------------------- scopes
# A ``profile()`` block is a scope: its listeners get the computes started where the block
# is open (its thread, or a context copied from it), so blocks open in several threads at
# once keep their runs apart. A compute started where no open block is (a thread the
# block's code started) goes to every open block, as it did before scopes.
_scopes: contextvars.ContextVar[tuple[object, ...]] = contextvars.ContextVar(
    "daskprofile_scopes", default=()
)
_open_scopes: set[int] = set()  # id() of the scopes open anywhere


def enter_scope(scope: object) -> contextvars.Token[tuple[object, ...]]:
    """Open ``scope`` in this context (innermost last); give the token to :func:`exit_scope`."""
    with _lock:
        _open_scopes.add(id(scope))
    return _scopes.set((*_scopes.get(), scope))


def exit_scope(scope: object, token: contextvars.Token[tuple[object, ...]]) -> None:
    """Close ``scope`` (from any context: a token of another context is ignored)."""
    with _lock:
        _open_scopes.discard(id(scope))
    with contextlib.suppress(ValueError, RuntimeError):
        _scopes.reset(token)


def _here() -> tuple[object, ...]:
    """The scopes open in this context that are still open."""
    return tuple(s for s in _scopes.get() if id(s) in _open_scopes)


def in_scope(scope: object | None) -> bool:
    """Whether what starts in this context belongs to ``scope`` (None: to everything)."""
    if scope is None:
        return True
    here = _here()
    return not here or any(s is scope for s in here)


def _scoped(active: tuple[Any, ...]) -> tuple[Any, ...]:
    """The listeners of ``active`` a compute starting in this context belongs to."""
    if not _scopes.get():
        return active
    here = _here()
    if not here:
        return active
    return tuple(lst for lst in active if getattr(lst, "scope", None) in (None, *here))


def get_async(*args: Any, **kwargs: Any) -> Any:
    """Drop-in for ``dask.local.get_async`` that feeds the registered listeners."""
    active = _scoped(tuple(lst for lst in _listeners if id(lst) not in _faulted))
    if _nested():
        kwargs.setdefault("callbacks", ())  # dask: only the outermost compute uses globals
        return original_get_async(*args, **kwargs)
    if not active:
        return original_get_async(*args, **kwargs)
    bound = _SIGNATURE.bind(*args, **kwargs)
    bound.apply_defaults()
    return _run_hooked(bound, active)


get_async.__wrapped__ = original_get_async  # type: ignore[attr-defined]


def _outputs(result: Any) -> frozenset[Any]:
    from dask.core import flatten

    try:  # dask's own rule for which keys it keeps
        if isinstance(result, list):
            return frozenset(flatten(result))  # type: ignore[no-untyped-call]
        return frozenset([result])
    except TypeError:  # an unhashable output key: dask itself will complain
        return frozenset()


def _runs_inline(submit: Any) -> bool:
    """Whether ``submit`` is dask's synchronous executor's (tasks run in the caller)."""
    from dask.local import SynchronousExecutor

    return isinstance(getattr(submit, "__self__", None), SynchronousExecutor)


def _wrap(a: dict[str, Any], compute: Compute) -> None:
    """Swap in ``compute``'s timing: its ``submit`` (local mode), or ``loads``/``dumps``/
    ``pack_exception`` wrappers (envelope mode)."""
    track, hooks = compute.track_running, compute.worker_hooks
    if compute.local:
        a["submit"] = _local_submit(compute, a["submit"])
    else:
        a["loads"] = _Loads(a["loads"], compute, track, hooks)
        a["dumps"] = _Dumps(a["dumps"], track, hooks)
        a["pack_exception"] = _PackException(a["pack_exception"], track, hooks)


def _run_hooked(bound: inspect.BoundArguments, active: tuple[Any, ...]) -> Any:
    a = bound.arguments
    compute = Compute(active, _scheduler_kind(a.get("get_id")), _outputs(a.get("result")))
    compute.graph, compute.span = a.get("dsk"), _spans.current()
    callbacks = a.get("callbacks")
    if callbacks is None:
        from dask.callbacks import Callback as DaskCallback

        callbacks = list(DaskCallback.active)
    compute.local = (
        compute.timed
        and not compute.per_task
        and _is_identity(a["loads"])
        and _is_identity(a["dumps"])
    )
    a["callbacks"] = [*callbacks, compute.callback()]
    if compute.timed:
        _wrap(a, compute)
    token = _current.set(compute)
    with _lock:
        _running_computes.add(compute)
    try:
        return original_get_async(*bound.args, **bound.kwargs)
    finally:
        with _lock:
            _running_computes.discard(compute)
        _current.reset(token)
        _tls.raised = None
        compute.close()


def flush() -> None:
    """Hand every running compute's pending task rows to its listeners now (readers call
    this before reading a collector, so what they read is current)."""
    with _lock:
        computes = list(_running_computes)
    for compute in computes:
        compute.drain()


def _targets() -> list[ModuleType]:
    return [m for name in _MODULES if (m := sys.modules.get(name)) is not None]


def _install() -> None:
    for module in _targets():
        if getattr(module, "get_async", None) is original_get_async:
            module.get_async = get_async  # type: ignore[attr-defined]
    _install_calls()


def _uninstall() -> None:
    for module in _targets():
        if getattr(module, "get_async", None) is get_async:
            module.get_async = original_get_async  # type: ignore[attr-defined]
    _uninstall_calls()


# ---------------------------------------------------------------- compute() calls


class Call:
    """One outermost ``dask.compute``/``dask.persist`` call made while hooked: when it was
    made (``t_call``) and returned (``t_return``), and when it handed graphs to a cluster
    (``submits``), all ``perf_counter()`` seconds. What separates ``t_call`` from a
    compute's first task is graph building, optimization and submission."""

    __slots__ = ("submits", "t_call", "t_return")

    def __init__(self) -> None:
        self.t_call = perf_counter()
        self.t_return: float | None = None
        self.submits: list[float] = []


_call: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "daskprofile_call", default=None
)
#: (module, attribute) of the calls timed while hooked: the methods (``x.compute()``) and
#: dask-expr collections call ``dask.base.compute`` by its module global
_CALLS = (
    ("dask.base", "compute"),
    ("dask", "compute"),
    ("dask.base", "persist"),
    ("dask", "persist"),
)
_call_wrappers: dict[Callable[..., Any], Callable[..., Any]] = {}  # original -> wrapper
_call_listeners: tuple[Callable[[Call], None], ...] = ()


def _timed_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (``dask.compute``), noting the outermost call in :data:`_call`."""

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if _call.get() is not None or _tls.task is not None or get_ident() in _running:
            return original(*args, **kwargs)  # nested: the outermost call is timed
        record = Call()
        token = _call.set(record)
        try:
            return original(*args, **kwargs)
        finally:
            record.t_return = perf_counter()
            _call.reset(token)
            _tell_call(record)

    return call


def _tell_call(record: Call) -> None:
    for listener in _call_listeners:
        try:
            listener(record)
        except Exception:  # a listener never fails the user's compute
            log.exception("daskprofile: a compute-call listener failed")


def _install_calls() -> None:
    for module_name, name in _CALLS:
        module = sys.modules.get(module_name)
        fn = getattr(module, name, None)
        if fn is None or fn in _call_wrappers.values():
            continue
        wrapper = _call_wrappers.get(fn)
        if wrapper is None:
            wrapper = _call_wrappers[fn] = _timed_call(fn)
        setattr(module, name, wrapper)


def _uninstall_calls() -> None:
    originals = {id(w): o for o, w in _call_wrappers.items()}
    for module_name, name in _CALLS:
        module = sys.modules.get(module_name)
        original = originals.get(id(getattr(module, name, None)))
        if original is not None:
            setattr(module, name, original)


def current_call() -> Call | None:
    """The outermost ``dask.compute``/``persist`` call running in this context, if any
    (only while hooked)."""
    return _call.get()


def add_call_listener(listener: Callable[[Call], None]) -> None:
    """Call ``listener(call)`` as each outermost timed call returns (in its thread)."""
    global _call_listeners
    with _lock:
        if listener not in _call_listeners:
            _call_listeners = (*_call_listeners, listener)


def remove_call_listener(listener: Callable[[Call], None]) -> None:
    """Stop calling ``listener``; idempotent."""
    global _call_listeners
    with _lock:
        _call_listeners = tuple(c for c in _call_listeners if c != listener)


def call_listeners() -> tuple[Callable[[Call], None], ...]:
    """The registered compute-call listeners."""
    return _call_listeners


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


def add_drain_observer(observer: Callable[[], None]) -> None:
    """Call ``observer()`` on the thread that handed a batch of task rows to the listeners,
    after it did (outside the compute's locks). It runs in the computing thread: it must be
    quick and must not wait on other threads (what it raises is logged, never raised)."""
    global _drain_observers
    with _lock:
        if observer not in _drain_observers:
            _drain_observers = (*_drain_observers, observer)


def remove_drain_observer(observer: Callable[[], None]) -> None:
    """Stop calling ``observer``; idempotent."""
    global _drain_observers
    with _lock:
        _drain_observers = tuple(o for o in _drain_observers if o != observer)


def drain_observers() -> tuple[Callable[[], None], ...]:
    """The registered drain observers."""
    return _drain_observers


def listeners() -> tuple[Any, ...]:
    """The registered listeners."""
    return _listeners


def installed() -> bool:
    """Whether any dask module currently calls our wrapper."""
    return any(getattr(m, "get_async", None) is get_async for m in _targets())


def current_compute() -> Compute | None:
    """The outermost compute running in this context, if any."""
    return _current.get()
