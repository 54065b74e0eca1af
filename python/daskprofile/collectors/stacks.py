"""Statistical stack sampler: where, line by line, the running tasks spend their time.

A sampler thread wakes every ``interval`` on absolute deadlines (so the time it waits for
the GIL does not stretch the period), reads ``worker.snapshot()`` to learn which threads run
which task, and reads the stacks of those threads only (:func:`._frames.read`: one C-level
pass per stack, with no collection inside it on Python 3.11).
Each stack becomes a tuple of small frame ids (a ``(code, line)`` pair is interned once, so
a sample costs a dict lookup per frame) counted per task group in time buckets of
``cycle`` seconds. Trees in ``distributed.profile``'s format are built only when asked for.

With ``scheduler="processes"`` the task hook calls :func:`ensure_worker_sampler` and
:func:`drain_worker_samples` inside each worker process; the kernel side feeds the drained
payloads to :meth:`StackCollector.merge_remote`.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
import uuid
import warnings
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any

from .. import codemap, stacktree, worker
from ..gil import switch as _switch
from ..stacktree import FrameInfo, Tree
from . import _frames
from ._frames import Walk
from .stackcut import Memo, Rules, cut

__all__ = [
    "PAYLOAD_VERSION",
    "StackCollector",
    "drain_worker_samples",
    "ensure_worker_sampler",
    "stop_worker_sampler",
]

#: version of the payload :func:`drain_worker_samples` returns
PAYLOAD_VERSION = 1

#: where the stacks of dask's local schedulers are cut (see :mod:`.stackcut`): at the
#: scheduler, which runs tasks from ``dask/local.py``, and at dask's task-calling machinery
#: where it sits at the outer end of a stack. A thread caught in the scheduler's own code
#: (a task about to start or just ended) keeps that frame, one caught in dask's wrappers
#: keeps those: every sample has a leaf.
_CUT = Rules(
    stop=("dask/local.py",),
    omit=("dask/_task_spec.py", "dask/core.py", "daskprofile/hooks.py"),
    keep_boundary=True,
    keep_empty=True,
)

#: after a late sample, the next one waits at least this fraction of the interval (the GIL
#: wait that follows spaces samples further; 0.1 beat 0.5 by 10-25% samples/s under load)
_MIN_SPACING = 0.1
#: late wake-ups in a row before the switch interval is lowered; on-time ones before restored
_LATE_TO_LOWER = 2
_ON_TIME_TO_RESTORE = 100

#: short tasks: the switch interval is lowered to a quarter of the tasks' mean duration,
#: within these bounds, and not for tasks shorter than twice the floor (too short to catch)
_CATCH_FLOOR, _CATCH_CEILING = 1e-4, 2e-3
#: in-task samples an unhindered sampler would have taken before the shortfall is judged
_CATCH_WINDOW = 20
#: below this share of those samples, tasks are hidden from the sampler
_CATCH_MISSING = 0.6
#: seconds with no task time and no task sampled before the sampler stops catching
_CATCH_IDLE = 1.0
#: the switch interval is lowered this many of its own lengths before a sample is due
_CATCH_LEAD = 10

Stack = tuple[int, ...]
#: group -> stack -> samples
Counts = dict[str, dict[Stack, int]]


def _check_positive(name: str, value: object) -> float:
    """``value`` as a finite positive float, or TypeError/ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


class _FrameTable:
    """Interns frames to small ints; keeps the code objects alive so their ids stay unique.

    ``relabel`` (the kernel's tables: :func:`.stacktree.relabel`) maps each frame once, as
    it is first interned, to the file the user knows."""

    def __init__(
        self, max_frames: int = 500_000, relabel: Callable[[FrameInfo], FrameInfo] | None = None
    ) -> None:
        self.infos: list[FrameInfo] = []
        self._index: dict[FrameInfo, int] = {}
        self._codes: Memo = {}
        self._max = max_frames
        self._relabel = relabel
        self.overflow = self.intern(FrameInfo("<daskprofile>", "<frame table full>", 0, 0))

    def intern(self, info: FrameInfo) -> int:
        if self._relabel is not None:
            info = self._relabel(info)
        fid = self._index.get(info)
        if fid is None:
            if len(self.infos) >= self._max:
                return self.overflow
            fid = self._index[info] = len(self.infos)
            self.infos.append(info)
        return fid

    def stack(self, frames: Walk) -> Stack:
        """The frame ids of a walked stack (innermost first), outermost first, cut at the
        scheduler (:data:`_CUT`).

        Never empty for a non-empty walk: a thread caught in the scheduler's own per-task
        code (a task about to start or just ended) keeps that one frame, so every sample has
        a leaf that flame graphs and exports can show.
        """
        return cut(frames, _CUT, self._codes, self.intern)


class _ShortTaskCatcher:
    """Notices the GIL hiding short tasks from the sampler; lowers the switch interval.

    A thread that holds the GIL for less than the switch interval and then gives it up by
    itself (a worker of dask's threaded scheduler running a pure-Python task, then waiting
    for the next) is never made to hand it over inside the task: the sampler gets the GIL
    between tasks only and finds none running. Tasks of 1 ms on two threads gave no sample
    at all. The task hook adds up the time of the tasks it ran (:data:`worker.spent`);
    when the samples taken inside tasks fall well short of what that time should have
    given, :attr:`level` is set below the tasks' mean duration. The sampler then lowers
    ``sys.setswitchinterval`` to it just before each sample (Python hands the GIL over
    inside a task then), until no task has run for :data:`_CATCH_IDLE` seconds.
    """

    def __init__(self, spent: list[float] | None = None) -> None:
        #: ``[seconds, tasks]`` of the tasks run so far (default: :data:`worker.spent`)
        self.spent = worker.spent if spent is None else spent
        #: while catching, the switch interval to set just before each sample
        self.level: float | None = None
        self._busy, self._tasks = self.spent[0], self.spent[1]
        self._t: float | None = None
        self._quiet = 0.0
        self._new_window()

    def _new_window(self) -> None:
        self._w_busy = self._w_tasks = self._w_time = 0.0
        self._w_ticks = self._w_seen = 0

    def tick(self, now: float, seen: int) -> None:
        """After a sample at ``now`` that found ``seen`` threads inside a task."""
        busy, tasks = self.spent[0], self.spent[1]
        d_busy, d_tasks = busy - self._busy, tasks - self._tasks
        self._busy, self._tasks = busy, tasks
        last, self._t = self._t, now
        if last is None:
            return
        dt = now - last
        self._quiet = 0.0 if d_busy > 0 or seen else self._quiet + dt
        if self._quiet >= _CATCH_IDLE:
            self.release()
            self._new_window()
            return
        self._w_busy += d_busy
        self._w_tasks += d_tasks
        self._w_time += dt
        self._w_ticks += 1
        self._w_seen += seen
        # what the tasks took, in samples at the pace samples really came
        expected = self._w_busy * self._w_ticks / self._w_time if self._w_time > 0 else 0.0
        mean = self._w_busy / max(self._w_tasks, 1.0)
        # a task is counted when it ends, with its time before the window too: a window
        # spans many tasks so that this evens out
        if expected < _CATCH_WINDOW or self._w_time < 10 * mean:
            return
        if self._w_seen < _CATCH_MISSING * expected and mean >= 2 * _CATCH_FLOOR:
            self._lower(mean)
        self._new_window()

    def _lower(self, mean: float) -> None:
        target = min(max(mean / 4, _CATCH_FLOOR), _CATCH_CEILING)
        if self.level is not None:  # catching already and still short: halve it
            target = max(min(target, self.level / 2), _CATCH_FLOOR)
        self.level = target

    def release(self) -> None:
        """Stop catching (idempotent)."""
        self.level = None


class _Sampler:
    """Sampling engine shared by the kernel collector and the worker-process sampler."""

    def __init__(
        self,
        interval: float,
        cycle: float,
        max_cycles: int,
        *,
        totals: bool = True,
        switch_interval: float | None = None,
        catcher: _ShortTaskCatcher | None = None,
        relabel: Callable[[FrameInfo], FrameInfo] | None = None,
    ) -> None:
        self.interval = _check_positive("interval", interval)
        self.catcher = catcher
        #: lowered ``sys.setswitchinterval`` while the GIL keeps the sampler waiting
        self.switch_interval = switch_interval
        self.lowered = False
        self._late = self._on_time = 0
        self.cycle = _check_positive("cycle", cycle)
        self.max_cycles = max_cycles
        self.table = _FrameTable(relabel=relabel)
        self.lock = threading.Lock()
        self.buckets: dict[int, Counts] = {}  # cycle index -> counts
        self.total: Counts | None = {} if totals else None  # all cycles, even evicted ones
        self.by_group: dict[str, int] = {}
        self.by_thread: dict[int | str, int] = {}  # thread ident, or "pid:ident" if remote
        self.ticks = 0
        self.dropped = 0
        #: samples lost because CPython handed back a broken stack (see :mod:`._frames`)
        self.unreadable = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._own = -1

    # -- thread ---------------------------------------------------------------------------
    def start(self, name: str) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        self._own = threading.get_ident()
        try:
            self._loop()
        finally:
            if self.lowered:
                self.lowered = False
                _switch.restore()

    def _loop(self) -> None:
        deadline = perf_counter()
        while True:
            interval, now = self.interval, perf_counter()
            # absolute deadlines: a late wake-up (waiting for the GIL) shortens the next wait;
            # slots missed by more than an interval are skipped, not made up in a burst
            deadline = max(deadline + interval, now + interval * _MIN_SPACING)
            level = None if self.catcher is None else self.catcher.level
            if level is None:
                if self._stop.wait(deadline - now):
                    return
            elif self._wait_inside_a_task(deadline, level):
                return
            self._pace(perf_counter() - deadline)
            try:
                seen = self.sample()
                if self.catcher is not None:
                    self.catcher.tick(perf_counter(), seen)
            except Exception as exc:  # never raise into the computation: switch off
                self.error = repr(exc)
                warnings.warn(
                    f"daskprofile: stack sampler switched off after an error: {exc!r}",
                    RuntimeWarning,
                    stacklevel=1,
                )
                return
            if self.idle():
                return

    def _wait_inside_a_task(self, deadline: float, level: float) -> bool:
        """Wait for ``deadline`` so as to get the GIL inside a short task; True if stopped.

        Wake up a little early (that wake-up gets the GIL between tasks, where the threads
        give it up), lower the switch interval to ``level`` for the rest of the wait, and
        restore it once the GIL is back: a running task is made to hand it over then.
        """
        lead = min(_CATCH_LEAD * level, 0.5 * self.interval)
        if self._stop.wait(deadline - lead - perf_counter()):
            return True
        _switch.lower(level)
        try:
            # give the GIL up even when that wake-up came late: it came between tasks
            return self._stop.wait(max(deadline - perf_counter(), level))
        finally:
            _switch.restore()

    def idle(self) -> bool:
        """Whether the thread should end on its own (the worker sampler does when idle)."""
        return False

    def _pace(self, late: float) -> None:
        """Lower the switch interval while busy threads keep the sampler from the GIL.

        Lowering it costs threads that hand the GIL around often (the threaded scheduler
        running small tasks) a few microseconds per task, so it is done only after two
        wake-ups in a row came more than a fifth of an interval late, and undone after a
        hundred on time (it is lowered again if lateness returns).
        """
        if self.switch_interval is None:
            return
        if late > 0.2 * self.interval:
            self._late, self._on_time = self._late + 1, 0
            if not self.lowered and self._late >= _LATE_TO_LOWER:
                _switch.lower(self.switch_interval)
                self.lowered = True
        else:
            self._late, self._on_time = 0, self._on_time + 1
            if self.lowered and self._on_time >= _ON_TIME_TO_RESTORE:
                _switch.restore()
                self.lowered = False

    # -- sampling -------------------------------------------------------------------------
    def sample(self) -> int:
        """Take one sample of every thread that runs a task (not of the calling thread);
        return how many were taken."""
        running = worker.snapshot()
        self.ticks += 1
        if not running:
            return 0
        own = threading.get_ident()
        stacks = _frames.read(ident for ident in running if ident != own)
        now = perf_counter()
        taken = 0
        with self.lock:
            k = int(now // self.cycle)
            for ident, frames in stacks.items():
                if frames is None:
                    self.unreadable += 1
                    continue
                self.record(k, running[ident][1], self.table.stack(frames), 1)
                self.by_thread[ident] = self.by_thread.get(ident, 0) + 1
                taken += 1
        return taken

    def record(self, k: int, group: str, stack: Stack, n: int) -> None:
        """Add ``n`` samples of ``stack`` to cycle ``k`` and the totals (lock held)."""
        bucket = self._bucket(k)
        for counts in (bucket, self.total) if self.total is not None else (bucket,):
            per_group = counts.get(group)
            if per_group is None:
                per_group = counts[group] = {}
            per_group[stack] = per_group.get(stack, 0) + n
        self.by_group[group] = self.by_group.get(group, 0) + n

    def _bucket(self, k: int) -> Counts:
        """Counts of cycle ``k`` (caller holds the lock); evicts the oldest beyond the cap."""
        counts = self.buckets.get(k)
        if counts is None:
            counts = self.buckets[k] = {}
            while len(self.buckets) > self.max_cycles:
                oldest = min(self.buckets)
                evicted = self.buckets.pop(oldest)
                self.dropped += sum(n for stacks in evicted.values() for n in stacks.values())
        return counts

    def counts_between(self, t_from: float | None, t_to: float | None) -> Counts:
        """Counts summed over the cycles that overlap ``[t_from, t_to]``."""
        total: Counts = {}
        with self.lock:
            if t_from is None and t_to is None and self.total is not None:
                return {group: dict(stacks) for group, stacks in self.total.items()}
            for k in sorted(self.buckets):
                if _overlaps(k, self.cycle, t_from, t_to):
                    _add_counts(total, self.buckets[k])
        return total


def _overlaps(k: int, cycle: float, t_from: float | None, t_to: float | None) -> bool:
    start, end = k * cycle, (k + 1) * cycle
    return (t_from is None or end > t_from) and (t_to is None or start <= t_to)


def _add_counts(dest: Counts, src: Mapping[str, Mapping[Stack, int]]) -> None:
    for group, stacks in src.items():
        target = dest.setdefault(group, {})
        for stack, n in stacks.items():
            target[stack] = target.get(stack, 0) + n


_owner_pids: set[int] = set()


class StackCollector:
    """Samples the stacks of threads running tasks; trees per task group, over time.

    ``interval`` is the time between samples, ``cycle`` the width of one history entry
    (both seconds). ``switch_interval`` (seconds, None to leave it): while busy pure-Python
    threads keep the sampler waiting for the GIL, ``sys.setswitchinterval`` is lowered to
    it so samples come in time; it is restored when they no longer do, and by ``stop()``.
    ``catch_short_tasks``: while tasks that hold the GIL for less than the switch interval
    hide from the sampler (see :class:`_ShortTaskCatcher`), lower it below their duration.
    """

    def __init__(
        self,
        interval: float = 0.01,
        cycle: float = 1.0,
        *,
        max_cycles: int = 3600,
        switch_interval: float | None = None,
        catch_short_tasks: bool = True,
    ) -> None:
        if switch_interval is not None:
            _check_positive("switch_interval", switch_interval)
        if not isinstance(catch_short_tasks, bool):
            raise TypeError(f"catch_short_tasks must be True or False, got {catch_short_tasks!r}")
        self.switch_interval = switch_interval
        self._sampler = _Sampler(
            interval,
            cycle,
            max_cycles,
            switch_interval=switch_interval,
            catcher=_ShortTaskCatcher() if catch_short_tasks else None,
            relabel=stacktree.relabel,
        )
        self._remote: dict[str, dict[int, int]] = {}  # process token -> remote fid -> fid
        self.t_start: float | None = None
        self.t_stop: float | None = None
        _owner_pids.add(os.getpid())

    @property
    def interval(self) -> float:
        return self._sampler.interval

    @property
    def cycle(self) -> float:
        return self._sampler.cycle

    @property
    def error(self) -> str | None:
        """The error that switched the sampler off, if any."""
        return self._sampler.error

    @property
    def dropped(self) -> int:
        """Samples whose cycle left the history (``max_cycles``); ``trees()`` still has them."""
        return self._sampler.dropped

    @property
    def unreadable(self) -> int:
        """Samples lost because CPython handed back a broken stack (see :mod:`._frames`)."""
        return self._sampler.unreadable

    @property
    def ticks(self) -> int:
        """How many times the sampler thread woke and sampled (in this process)."""
        return self._sampler.ticks

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the sampler thread runs."""
        return bool(self._sampler.alive)

    def start(self) -> None:
        """Start the sampler thread (idempotent)."""
        if self._sampler.alive:
            return
        _owner_pids.add(os.getpid())
        self.t_start, self.t_stop = perf_counter(), None
        self._sampler.start("daskprofile-stacks")

    def stop(self) -> None:
        """Stop sampling; returns as soon as the thread has ended (within one sample)."""
        was_alive = self._sampler.alive
        self._sampler.stop()
        if was_alive:
            self.t_stop = perf_counter()

    def __enter__(self) -> StackCollector:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading --------------------------------------------------------------------------
    def trees(self, t_from: float | None = None, t_to: float | None = None) -> dict[str, Tree]:
        """``{group: tree}`` merged over the cycles overlapping ``[t_from, t_to]``."""
        counts = self._sampler.counts_between(t_from, t_to)
        infos = self._frames()
        return {group: stacktree.build(stacks, infos) for group, stacks in counts.items()}

    snapshot = trees

    def history(
        self, t_from: float | None = None, t_to: float | None = None
    ) -> list[tuple[float, float, dict[str, Tree]]]:
        """``[(t_start, t_end, {group: tree})]`` one per cycle with samples, oldest first."""
        s = self._sampler
        with s.lock:
            keys = [k for k in sorted(s.buckets) if _overlaps(k, s.cycle, t_from, t_to)]
            picked = [(k, {g: dict(st) for g, st in s.buckets[k].items()}) for k in keys]
        infos = self._frames()
        out = []
        for k, counts in picked:
            trees = {g: stacktree.build(st, infos) for g, st in counts.items()}
            out.append((*self._span(k), trees))
        return out

    def _span(self, k: int) -> tuple[float, float]:
        start, end = k * self.cycle, (k + 1) * self.cycle
        if self.t_start is not None and start < self.t_start < end:
            start = self.t_start
        if self.t_stop is not None and start < self.t_stop < end:
            end = self.t_stop
        return start, end

    def hot_lines(
        self, func_or_name: object, t_from: float | None = None, t_to: float | None = None
    ) -> list[tuple[str, int, int]]:
        """``(filename, line, samples)`` for one function (object, code or name), hottest first."""
        return stacktree.hot_lines(self.trees(t_from, t_to), func_or_name)

    def samples_by_group(self) -> dict[str, int]:
        """Samples taken per task group (all processes)."""
        with self._sampler.lock:
            return dict(self._sampler.by_group)

    def samples_by_thread(self) -> dict[str, int]:
        """Samples per ``"<pid>:<thread ident>"`` worker label (kernel threads and remote)."""
        with self._sampler.lock:
            return {
                (k if isinstance(k, str) else f"{os.getpid()}:{k}"): n
                for k, n in self._sampler.by_thread.items()
            }

    def _frames(self) -> list[FrameInfo]:
        with self._sampler.lock:
            return list(self._sampler.table.infos)

    # -- processes scheduler --------------------------------------------------------------
    def merge_remote(self, payload: Mapping[str, Any] | None, graph: Any = None) -> None:
        """Add samples drained in a worker process (see :func:`drain_worker_samples`).

        Frames are relabelled as they arrive (:func:`.codemap.relabel`); ``graph``: a
        callable giving ``(token, dsk)`` of the graph the tasks came from, read only when
        a frame of code pickled by value arrives that the kernel cannot map yet."""
        if not payload or payload.get("v") != PAYLOAD_VERSION:
            return
        if graph is not None:
            _learn_if_needed(payload, graph)
        s = self._sampler
        with s.lock:
            fids = self._remote.setdefault(payload["proc"], {0: s.table.overflow})
            for remote_fid, *info in payload["frames"]:
                fids[remote_fid] = s.table.intern(FrameInfo(*info))
            unknown = s.table.intern(FrameInfo("<daskprofile>", "<unknown remote frame>", 0, 0))
            for t, groups in payload["buckets"]:
                k = int(t // s.cycle)
                for group, stacks in groups.items():
                    for remote_stack, n in stacks:
                        stack = tuple(fids.get(f, unknown) for f in remote_stack)
                        s.record(k, group, stack, n)
            pid = payload["pid"]
            for ident, n in payload["threads"].items():
                label = f"{pid}:{ident}"
                s.by_thread[label] = s.by_thread.get(label, 0) + n


def _learn_if_needed(payload: Mapping[str, Any], graph: Callable[[], Any]) -> None:
    """Learn the code of the tasks' graph when the payload brings dynamic code frames
    the kernel cannot map yet (once per graph: :func:`.codemap.learn_graph`)."""
    try:
        if all(codemap.knows(str(f[1])) for f in payload.get("frames") or ()):
            return
        token, dsk = graph()
        codemap.learn_graph(dsk, token)
    except Exception:  # mapping is a nicety: never lose the samples over it
        return


# -- worker-process side ----------------------------------------------------------------------
class _WorkerSampler(_Sampler):
    """The sampler of one worker process: drained after each task, ends itself when idle."""

    def __init__(
        self,
        interval: float,
        cycle: float,
        idle_timeout: float,
        spent: list[float] | None = None,
        switch_interval: float | None = None,
        *,
        catch_short_tasks: bool = True,
    ) -> None:
        """``spent``: where this process's task time is added up (:data:`worker.spent`);
        ``switch_interval``: lowered while tasks keep the sampler late (see ``_pace``);
        ``catch_short_tasks``: see :class:`StackCollector`."""
        catcher = _ShortTaskCatcher(spent) if catch_short_tasks else None
        super().__init__(
            interval,
            cycle,
            max_cycles=1_000_000,
            totals=False,
            catcher=catcher,
            switch_interval=switch_interval,
        )
        self.pid = os.getpid()
        self.token = f"{self.pid}-{uuid.uuid4().hex[:12]}"
        self.idle_timeout = idle_timeout
        self._sent_frames = 1  # frame 0 is the overflow marker, known to every receiver
        #: last time a task ran here or ensure_worker_sampler() was called
        self.busy_at = perf_counter()

    def idle(self) -> bool:
        now = perf_counter()
        if worker.running:
            self.busy_at = now
        return now - self.busy_at > self.idle_timeout

    def drain(self) -> dict[str, Any] | None:
        with self.lock:
            if not self.buckets:
                return None
            buckets, self.buckets = self.buckets, {}
            threads, self.by_thread = self.by_thread, {}
            self.by_group = {}
            infos = self.table.infos
            new = [(fid, *infos[fid]) for fid in range(self._sent_frames, len(infos))]
            self._sent_frames = len(infos)
        return {
            "v": PAYLOAD_VERSION,
            "proc": self.token,
            "pid": self.pid,
            "frames": new,
            "buckets": [
                ((k + 0.5) * self.cycle, {g: list(st.items()) for g, st in counts.items()})
                for k, counts in sorted(buckets.items())
            ],
            "threads": threads,
        }


_worker_sampler: _WorkerSampler | None = None
_worker_lock = threading.Lock()


def _is_worker_process(owner_pid: int | None) -> bool:
    pid = os.getpid()
    if owner_pid is not None:
        return pid != owner_pid
    return pid not in _owner_pids and multiprocessing.parent_process() is not None


def ensure_worker_sampler(
    interval: float = 0.01,
    cycle: float = 1.0,
    owner_pid: int | None = None,
    idle_timeout: float = 5.0,
) -> bool:
    """Make sure this worker process samples its task threads; cheap when it already does.

    Call it where a task starts in a worker process. It does nothing (and returns False) in
    the process that owns the collector: ``owner_pid`` when given, else any process that
    created a :class:`StackCollector`, or one not started by ``multiprocessing``. The
    sampler thread is a daemon and ends after ``idle_timeout`` seconds without tasks; the
    next call starts it again. Returns whether a sampler runs in this process; never raises.
    """
    current = _worker_sampler
    if current is not None and current.pid == os.getpid():
        current.busy_at = perf_counter()  # keeps an idle sampler from ending right now
        if current.alive and current.interval == interval and current.cycle == cycle:
            return True
    try:
        return _start_worker_sampler(interval, cycle, owner_pid, idle_timeout)
    except Exception:  # called inside the task: never raise into the computation
        return False


def _start_worker_sampler(
    interval: float, cycle: float, owner_pid: int | None, idle_timeout: float
) -> bool:
    global _worker_sampler
    if not _is_worker_process(owner_pid):
        return False
    with _worker_lock:
        current = _worker_sampler
        if current is None or current.pid != os.getpid():  # none yet, or inherited by fork
            current = _worker_sampler = _WorkerSampler(interval, cycle, idle_timeout)
        else:  # a later collector may ask for another rate
            current.interval = _check_positive("interval", interval)
            current.cycle = _check_positive("cycle", cycle)
        current.start("daskprofile-stacks-worker")
    return True


def drain_worker_samples() -> dict[str, Any] | None:
    """The samples taken in this process since the last drain, as a small picklable dict.

    None when there is nothing new or no sampler runs here. Frames are sent once per
    process: each payload carries only the frames that are new since the previous one, so
    payloads must reach :meth:`StackCollector.merge_remote` in the order they were drained.
    """
    current = _worker_sampler
    if current is None or current.pid != os.getpid():
        return None
    try:
        return current.drain()
    except Exception:  # never raise into the computation
        return None


def stop_worker_sampler() -> None:
    """Stop this process's worker sampler, if any (its undrained samples are discarded)."""
    global _worker_sampler
    current, _worker_sampler = _worker_sampler, None
    if current is not None and current.pid == os.getpid():
        current.stop()
