"""Resource sampler: CPU, memory and process count of the kernel's whole process tree.

A thread of the current process (not a tracker process, which would count itself) wakes
every ``dt`` seconds, lists the current process and all its descendants (worker processes
started mid-run included), and records the summed CPU (% of one core) and RSS. The CPU
time of the sampling thread itself is subtracted, so the profiler does not see its own
cost. On Linux ``/proc`` is read with the GIL kept (:mod:`._procfs`: one hand-over per
sample, not one per file), elsewhere through psutil. Samples live in a bounded ring
buffer; ``since(cursor)`` streams new ones; ``forget(before)`` lets go of old ones (a
long-lived sampler shared by runs: those no run reads any more).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np
import psutil

from . import _procfs

__all__ = ["COLUMNS", "ResourceCollector"]

#: the columns of a snapshot, in order
COLUMNS = ("time", "cpu", "memory", "processes")
_DTYPES = {"time": np.float64, "cpu": np.float64, "memory": np.int64, "processes": np.int32}


def _check_dt(dt: object) -> float:
    if isinstance(dt, bool) or not isinstance(dt, (int, float)):
        raise TypeError(f"dt must be a number of seconds, got {dt!r}")
    if not math.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a finite number of seconds > 0, got {dt!r}")
    return float(dt)


class _Ring:
    """Columnar ring buffer of at most ``capacity`` rows; grows by doubling up to it.

    Row ``k`` (the ``k``-th sample ever appended, ``0 <= k < total``) lives at index
    ``k % size`` of the columns, whatever the size: growing or shrinking lays the rows
    held out again. Rows ``first .. total-1`` are held; older ones were overwritten (at the
    cap: counted in ``dropped``) or forgotten (:meth:`forget`). ``total`` never goes back:
    it is the cursor of :meth:`since`, which stays valid across both.
    """

    #: rows allocated at first (and the least a shrink leaves)
    MIN_SIZE = 1024

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"max_samples must be >= 1, got {capacity!r}")
        self.capacity = capacity
        self.total = 0  # samples ever appended; the cursor of since()
        self.first = 0  # the oldest row held
        self.dropped = 0  # rows overwritten at the cap (forgotten ones are not counted)
        self._size = min(capacity, self.MIN_SIZE)
        self._cols = {c: np.zeros(self._size, _DTYPES[c]) for c in COLUMNS}

    def __len__(self) -> int:
        return self.total - self.first

    @property
    def size(self) -> int:
        """Rows allocated."""
        return self._size

    def append(self, row: tuple[float, float, int, int]) -> None:
        if len(self) >= self._size:
            if self._size < self.capacity:
                self._resize(min(self.capacity, self._size * 2))
            else:  # full at the cap: the oldest row goes
                self.first += 1
                self.dropped += 1
        i = self.total % self._size
        for col, value in zip(COLUMNS, row, strict=True):
            self._cols[col][i] = value
        self.total += 1

    def _resize(self, size: int) -> None:
        """Lay the rows held out in columns of ``size`` rows (``>= len(self)``)."""
        rows = np.arange(self.first, self.total)
        old, new = rows % self._size, rows % size
        for col in COLUMNS:
            resized = np.zeros(size, _DTYPES[col])
            resized[new] = self._cols[col][old]
            self._cols[col] = resized
        self._size = size

    def since(self, cursor: int) -> dict[str, np.ndarray]:
        """Copies of rows ``cursor .. total-1`` still held, oldest first."""
        idx = np.arange(max(cursor, self.first), self.total) % self._size
        return {col: self._cols[col][idx] for col in COLUMNS}

    def forget(self, before: float) -> int:
        """Let go of the rows sampled before ``before`` (their ``time``); the columns shrink
        where at most a quarter of them is left in use. Returns the rows forgotten."""
        held = np.arange(self.first, self.total) % self._size
        # rows are appended in time order: those before ``before`` are the oldest
        n = int(np.searchsorted(self._cols["time"][held], before, side="left"))
        self.first += n
        size, left = self._size, len(self)
        floor = min(self.capacity, self.MIN_SIZE)
        while size // 2 >= floor and left <= size // 4:
            size //= 2
        if size < self._size:
            self._resize(max(size, floor))
        return n


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(stat: bytes) -> list[bytes]:
    """The fields of a ``/proc/<pid>/stat`` line after the command: field ``n`` (1-based,
    as in proc(5)) is at index ``n - 3``."""
    return stat[stat.rindex(b")") + 2 :].split()


def _proc_stat(pid: int) -> tuple[int, float, int] | None:
    """(start time in clock ticks since boot, CPU seconds, rss bytes) of ``pid`` from
    one read of ``/proc/<pid>/stat``; None where there is none (then ask psutil)."""
    stat = _procfs.read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    try:
        f = _stat_fields(stat)
        return int(f[19]), (int(f[11]) + int(f[12])) / _TICK, int(f[21]) * _PAGE
    except (ValueError, IndexError):
        return None


def _read_ppid(pid: int) -> int | None:
    """Parent pid of ``pid`` (None if gone); reads /proc directly where there is one."""
    stat = _procfs.read(f"/proc/{pid}/stat")
    if stat is not None:
        try:
            return int(_stat_fields(stat)[1])
        except (ValueError, IndexError):
            return None
    if os.path.isdir("/proc/self"):
        return None  # gone
    try:  # no /proc: ask psutil
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


#: whether the kernel lists each thread's children (Linux >= 3.5, CONFIG_PROC_CHILDREN)
PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _thread_children(pid: int) -> list[int]:
    """Child pids of ``pid``: the union of its threads' ``/proc/.../children`` lists (a
    child stays listed under a live thread of its parent when the thread that forked it
    ends). A process or thread that is gone lists nothing."""
    out: list[int] = []
    for tid in _procfs.listdir(f"/proc/{pid}/task") or ():
        children = _procfs.read(f"/proc/{pid}/task/{tid}/children")
        if children:
            out.extend(_pids(children))
    return out


def _pids(text: bytes) -> list[int]:
    try:
        return [int(child) for child in text.split()]
    except ValueError:
        return []


class _Descendants:
    """Finds a process's descendants without reading every process of the system.

    Where the kernel lists each thread's children (``/proc/<pid>/task/<tid>/children``,
    Linux >= 3.5) only the tree itself is read: a few small files per process, whatever
    runs beside it. Elsewhere the parent of every process is read, as
    ``psutil.Process.children(recursive=True)`` does (~2 ms CPU for 100 processes), but
    only for new pids, with a full refresh every ``refresh`` seconds to catch re-parenting
    and reused pids.
    """

    def __init__(self, root: int, refresh: float = 5.0) -> None:
        self.root = root
        self.refresh = refresh
        self.use_proc_children = PROC_CHILDREN
        self._ppid: dict[int, int] = {}
        self._refreshed = -math.inf

    def __call__(self) -> list[int]:
        """``root`` and all its descendants, ``root`` first."""
        return self._walk() if self.use_proc_children else self._scan()

    def _walk(self) -> list[int]:
        out, todo, seen = [], [self.root], {self.root}
        while todo:
            pid = todo.pop()
            out.append(pid)
            children = [c for c in _thread_children(pid) if c not in seen]
            seen.update(children)
            todo.extend(children)
        return out

    def _scan(self) -> list[int]:
        pids = set(psutil.pids())
        now = perf_counter()
        if now - self._refreshed > self.refresh:
            self._ppid, self._refreshed = {}, now
        ppid = {pid: parent for pid, parent in self._ppid.items() if pid in pids}
        for pid in pids.difference(ppid):
            parent = _read_ppid(pid)
            if parent is not None:
                ppid[pid] = parent
        self._ppid = ppid
        children: dict[int, list[int]] = {}
        for pid, parent in ppid.items():
            children.setdefault(parent, []).append(pid)
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, ()))
        return out


@dataclass
class _Tracked:
    ident: Any  # start time in ticks (read from /proc) or the psutil.Process: pid reuse shows
    cpu: float  # user + system seconds at the last sample


@dataclass
class _Tree:
    """The psutil.Process objects of the tree, cached so CPU deltas are per process."""

    root: psutil.Process
    tracked: dict[int, _Tracked] = field(default_factory=dict)
    last: float | None = None  # time.time() of the previous sample (psutil's create times)
    last_perf: float = 0.0  # perf_counter() of the previous sample (for intervals)
    debt: float = 0.0  # own CPU not yet subtracted (process CPU comes in 10 ms ticks)

    def __post_init__(self) -> None:
        self.descendants = _Descendants(self.root.pid)

    def sample(self, own_cpu: float) -> tuple[float, int, int]:
        """(cpu %, rss bytes, processes) since the previous call; ``own_cpu`` is subtracted."""
        now, now_perf = time.time(), perf_counter()
        seen: dict[int, _Tracked] = {}
        cpu_s, rss, count = 0.0, 0, 0
        for pid in self.descendants():
            item = self._measure(pid, now)
            if item is None:
                continue
            tracked, delta, mem = item
            seen[pid] = tracked
            cpu_s, rss, count = cpu_s + delta, rss + mem, count + 1
        self.tracked = seen
        elapsed = None if self.last is None else now_perf - self.last_perf
        self.last, self.last_perf = now, now_perf
        if not elapsed or elapsed <= 0:
            return 0.0, rss, count
        # the kernel's CPU is read in clock ticks: carry what cannot be subtracted yet
        net = cpu_s - own_cpu - self.debt
        self.debt = max(0.0, -net)
        return 100.0 * max(0.0, net) / elapsed, rss, count

    def _measure(self, pid: int, now: float) -> tuple[_Tracked, float, int] | None:
        """(tracking entry, CPU seconds since the last sample, rss) or None if it is gone."""
        reading = self._read(pid)
        if reading is None:
            return None
        ident, total, rss, born = reading
        known = self.tracked.get(pid)
        if known is not None and known.ident != ident:  # pid reused
            known = None
        if known is not None:
            delta = total - known.cpu
        elif self.last is not None and born >= self.last:
            delta = total  # born since the last sample: all its CPU is new
        else:
            delta = 0.0  # first sight of an old process: no interval to divide by
        return _Tracked(ident, total), max(0.0, delta), rss

    def _read(self, pid: int) -> tuple[Any, float, int, float] | None:
        """(identity, CPU seconds, rss, creation time since the epoch) of ``pid``: one read
        of ``/proc/<pid>/stat`` (GIL kept on Linux), else psutil; None if it is gone."""
        stat = _proc_stat(pid)
        if stat is not None:
            started, total, rss = stat
            return started, total, rss, _boot_time() + started / _TICK
        try:
            proc = self.root if pid == self.root.pid else psutil.Process(pid)
            with proc.oneshot():
                times = proc.cpu_times()
                rss = int(proc.memory_info().rss)
                born = proc.create_time()
        except psutil.Error:  # vanished, zombie, access denied: skip this one
            return None
        return proc, times.user + times.system, rss, born


@functools.cache
def _boot_time() -> float:
    return float(psutil.boot_time())


class ResourceCollector:
    """Samples CPU, memory and process count of this process and all its descendants.

    ``dt`` seconds between samples; at most ``max_samples`` are kept (the oldest are
    dropped and counted in ``dropped``). ``snapshot()`` and ``since()`` work while running.
    """

    #: whether :meth:`start` is quick (~0.2 ms: the tree is read from ``/proc/<pid>/task``);
    #: where it is not (every process on the machine is read), start it from a thread
    quick_start = PROC_CHILDREN

    def __init__(self, dt: float = 0.1, *, max_samples: int = 100_000) -> None:
        self.dt = _check_dt(dt)
        self._ring = _Ring(max_samples)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tree: _Tree | None = None
        self._carry = 0.0
        self.error: str | None = None

    @property
    def dropped(self) -> int:
        """Samples lost to the ``max_samples`` cap."""
        return self._ring.dropped

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Take a first sample now, then one every ``dt`` in a daemon thread (idempotent)."""
        if self.running or self.error is not None:
            return
        self._stop.clear()
        self._tree = _Tree(psutil.Process(os.getpid()))
        before = time.thread_time()
        if self._guarded_sample(before) is None:
            return
        # the first sample ran in the caller's thread: its cost counts as the sampler's
        self._carry = time.thread_time() - before
        thread = threading.Thread(target=self._run, name="daskprofile-resources", daemon=True)
        thread.start()  # before it is published: a stop() from another thread joins a
        self._thread = thread  # started thread, or finds none and the set event ends it

    def stop(self) -> None:
        """Stop sampling; returns within one sample's time (a few ms), whatever ``dt``."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)

    def __enter__(self) -> ResourceCollector:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        deadline = perf_counter()
        mark: float | None = time.thread_time() - self._carry
        while mark is not None:
            now = perf_counter()
            deadline = max(deadline + self.dt, now)
            stopping = self._stop.wait(deadline - now)
            mark = self._guarded_sample(mark)  # one last sample on stop: the end state
            if stopping:
                return

    def _guarded_sample(self, mark: float) -> float | None:
        """Sample once; returns this sample's thread-CPU mark, or None once switched off.

        The sampler's own CPU between two samples is its thread time between their marks;
        it is subtracted from the kernel process's CPU.
        """
        now_mark = time.thread_time()
        try:
            self._sample(now_mark - mark)
        except Exception as exc:  # never raise into the computation: switch off, once
            self.error = repr(exc)
            warnings.warn(
                f"daskprofile: resource sampler switched off after an error: {exc!r}",
                RuntimeWarning,
                stacklevel=1,
            )
            return None
        return now_mark

    def _sample(self, own_cpu: float) -> None:
        assert self._tree is not None
        t = perf_counter()
        cpu, rss, count = self._tree.sample(own_cpu)
        with self._lock:
            self._ring.append((t, cpu, rss, count))

    def snapshot(self) -> dict[str, np.ndarray]:
        """All samples held: ``time`` (perf_counter s), ``cpu``, ``memory``, ``processes``."""
        return self.since(0)[0]

    def since(self, cursor: int = 0) -> tuple[dict[str, np.ndarray], int]:
        """Samples taken since ``cursor`` (0 at first) and the cursor for the next call."""
        with self._lock:
            return self._ring.since(cursor), self._ring.total

    def forget(self, before: float) -> int:
        """Let go of the samples taken before ``before`` (perf_counter s) that nobody reads
        any more (a shared sampler's readers say when); the memory they held is given back
        where that frees most of it. Cursors stay valid: ``since`` goes on from the
        oldest sample left. Not counted in ``dropped``. Returns the samples let go of."""
        with self._lock:
            return self._ring.forget(before)
