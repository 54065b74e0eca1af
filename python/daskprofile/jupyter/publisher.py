"""The comm publisher: streams runs to every connected panel.

The live runs' collectors are read through cursors every ``tick`` seconds (rows accumulate
in the collectors meanwhile, so a busy or slow panel gets bigger batches, not more
messages). While a compute hands over batches of task rows, that poll runs in the thread
that handed them over (:meth:`Publisher.pump`, a drain observer of the scheduler hook): a
poll gives the GIL up many times (numpy, locks), and done in another thread each of those
would be a hand-over the computing thread waits for. The sender thread polls when no compute
did (long tasks, between computes), and it alone calls ``comm.send``: at most ``rate`` live
messages per second per panel, from a bounded outbox per panel (when it is full the oldest
data batch is dropped and counted, ``dropped``: a run's count goes with its end at the
latest). A panel is sent only the messages its protocol version reads (``encode.needs``,
``encode.adapt``: a 1.1 panel gets no cluster tables nor spans, and task batches without
their span column; a 1.0 one no sourced resources either). A 1.3 panel gets a run's
``sources`` (the text of the sampled functions) just before the first ``stacks`` message
that holds them, each function once per run and panel (again after a replay of the run).
Requests (keys, export, replay, pause) arrive on any thread and are handed to the sender
thread as jobs. Polls, jobs and sends hold ``Publisher._work``; a computing thread only ever
tries it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import queue
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from .. import codemap, gil, hooks, stacktree
from ..record import history
from ..record.cursors import Cursors, frozen_cursors
from ..run import Run
from . import encode
from .feed import Feed

log = logging.getLogger("daskprofile")

#: message types a full outbox may drop (never the run structure, nor ``exceptions`` and
#: ``cluster_workers``: rare, and what the panel lists)
DROPPABLE = frozenset(
    {"tasks", "resources", "cache", "stacks", "progress", "actions", "memory", "transfers"}
)
MAX_KEYS = 10_000
#: droppable data that costs no token: it rides along with the task rows of its poll
_RIDE_ALONG = frozenset({"actions", "transfers"})
#: the messages that open and close a run
_BOUNDS = frozenset({"run_start", "run_end"})
#: at most ~4 progress messages per second per run
PROGRESS_PERIOD = 0.25
#: shortest time between two polls when a cluster's rows arrive (:meth:`Publisher.nudge`):
#: each poll reads every live table and wakes this thread, which then takes the GIL from
#: the client's event loop (the scheduler's too, in a notebook's LocalCluster); a poll
#: costs ~1.2 ms however few rows it finds. A tick (0.2 s) rather than 0.1 s: ~3 us/task
#: of kernel CPU less on a 2-worker map; lag p50/p99 ~180/360 ms (target 500)
NUDGE_GAP = 0.2
#: the sampled series of a live run are polled when this share of a tick has passed since
#: their last poll (polls a tick apart: every one; nudged polls between: not)
SERIES_SHARE = 0.9
#: switch interval while the publisher thread works (a poll takes a few ms of CPU)
WORK_SWITCH_INTERVAL = 0.001
EXPORTS = {
    "html": ("to_html", ".html", "text/html"),
    "trace": ("to_chrome_trace", ".trace.json", "application/json"),
    "speedscope": ("to_speedscope", ".speedscope.json", "application/json"),
    "run": ("save", ".npz", "application/octet-stream"),
}

Job = Callable[[], None]
#: ``lookup(run id, identifiers) -> {identifier: source}`` (those found)
SourceLookup = Callable[[str, set[str]], dict[str, dict[str, Any]]]
#: ``greeting(paused, kept runs) -> hello message`` (the comm module's, with its version)
Greeting = Callable[[bool, int], encode.Message]


class BadRequest(ValueError):
    """A request the panel should not have sent (answered with an ``error``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Connection:
    """One panel: its comm, outbox, pause state and drop counts."""

    comm: Any
    max_queue: int
    rate: float
    #: the panel's protocol version (what it can decode)
    protocol: str = "1.0"
    paused: bool = False
    outbox: deque[encode.Message] = field(default_factory=deque)
    replays: deque[Iterator[encode.Message]] = field(default_factory=deque)
    stale: set[str] = field(default_factory=set)
    #: runs replayed whole at the last greeting (live messages for them are not needed)
    replayed: set[str] = field(default_factory=set)
    #: per run: [messages, rows] dropped so far for this panel, until its end is sent
    dropped: dict[str | None, list[int]] = field(default_factory=dict)
    #: runs whose counts changed since the last ``dropped`` message
    dropped_dirty: set[str | None] = field(default_factory=set)
    tokens: float = 0.0
    refilled: float = field(default_factory=perf_counter)
    sent: int = 0
    #: finds the text of sampled functions (protocol 1.3 ``sources``); None: send none
    lookup: SourceLookup | None = None
    #: per run: identifiers whose source this panel was sent (or that have none)
    sources_sent: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    @property
    def burst(self) -> float:
        return max(1.0, self.rate / 4)

    def reads(self, message: encode.Message) -> bool:
        """Whether this panel's protocol version reads ``message``."""
        return encode.speaks(self.protocol, encode.needs(message[0]))

    def fit(self, messages: list[encode.Message]) -> list[encode.Message]:
        """``messages`` as this panel reads them (``encode.adapt``); the others left out.
        A 1.3 panel gets ``sources`` before the ``stacks`` that first hold them."""
        fitted = (encode.adapt(m, self.protocol) for m in messages)
        out = [m for m in fitted if m is not None]
        if self.lookup is None or not encode.speaks(self.protocol, encode.SOURCES_VERSION):
            return out
        return [x for m in out for x in self._with_sources(m)]

    def _with_sources(self, message: encode.Message) -> list[encode.Message]:
        data = message[0]
        kind, run = data.get("type"), data.get("run")
        if not isinstance(run, str) or self.lookup is None:
            return [message]
        if kind in ("run_start", "run_end"):  # a replay starts afresh; an ended run sends
            self.sources_sent.pop(run, None)  # no more stacks (kept, one set per run grew)
        if kind != "stacks":
            return [message]
        sent = self.sources_sent.setdefault(run, set())
        new = stacktree.identifiers((data.get("trees") or {}).values()) - sent
        if not new:
            return [message]
        sent |= new
        try:
            found = self.lookup(run, new)
        except Exception:  # text is a nicety: the samples still go
            log.exception("daskprofile: could not read the sources of run %s", run)
            found = {}
        return [encode.sources(run, found), message] if found else [message]

    def push(self, messages: list[encode.Message], run: str | None = None) -> None:
        """Queue live messages (as this panel reads them); drop the oldest data batches
        beyond ``max_queue``."""
        self.outbox.extend(self.fit(messages))
        while len(self.outbox) > self.max_queue and self._drop_one(run):
            pass

    def _drop_one(self, run: str | None) -> bool:
        for i, (data, _) in enumerate(self.outbox):
            # a transfers batch that names new addresses or types is kept: later ids need them
            if data.get("type") in DROPPABLE and not (data.get("addresses") or data.get("types")):
                del self.outbox[i]
                owner = data.get("run", run)
                counts = self.dropped.setdefault(owner, [0, 0])
                counts[0] += 1
                counts[1] += int(data.get("n", 0) or 0)
                self.dropped_dirty.add(owner)
                return True
        return False

    def settle(self, run: str | None) -> encode.Message | None:
        """``run``'s end leaves for the panel, the last message queued for it: its counts are
        final and forgotten. Returns their notice if not sent yet (it goes with the end,
        free like the end). (Before, every run's counts stayed, ~190 B a run, and notices
        taking a token each starved the outbox while runs ended faster than the rate.)"""
        counts = self.dropped.pop(run, None)
        if counts is None or run not in self.dropped_dirty:
            return None
        self.dropped_dirty.discard(run)
        return encode.dropped(run, *counts)

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.refilled) * self.rate)
        self.refilled = now


class Publisher:
    """Streams runs to connected panels (see the module docstring)."""

    def __init__(
        self,
        rate: float = 20.0,
        tick: float = 0.2,
        max_queue: int = 256,
        greeting: Greeting | None = None,
    ) -> None:
        self.greeting = greeting or _greeting
        self.rate = rate
        self.tick = tick
        self.max_queue = max_queue
        self.lock = threading.RLock()
        self.connections: dict[str, Connection] = {}
        #: attached, not yet joined by the sender thread
        self.pending: dict[str, Connection] = {}
        self.feeds: dict[str, Feed] = {}
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        #: CPU seconds the sender thread has used (its whole cost to the kernel)
        self.cpu_time = 0.0
        #: held while polling, running jobs or sending (by the sender thread or a pump)
        self._work = threading.Lock()
        self._next_poll = 0.0
        self._pumped = -math.inf  # when a compute last handed over task rows
        self._last_poll = -math.inf
        self._nudged = False  # a source that is not polled had new rows since the last poll
        #: per live run: identifier -> its source (None: not found), looked up once
        self._live_sources: dict[str, dict[str, dict[str, Any] | None]] = {}

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Subscribe to runs and start the sender thread (idempotent)."""
        with self.lock:
            if self._thread is not None:
                return
            self._stopping.clear()
            self._unsubscribe = history.subscribe(self._on_run_start, self._on_run_end)
            for run, cursors in history.live():
                self._on_run_start(run, cursors)
            self._thread = threading.Thread(
                target=self._loop, name="daskprofile-publisher", daemon=True
            )
            self._thread.start()
            hooks.add_drain_observer(self.pump)

    def stop(self) -> None:
        """Unsubscribe and end the sender thread (it is joined unless this is it)."""
        hooks.remove_drain_observer(self.pump)
        with self.lock:
            thread, self._thread = self._thread, None
            unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()
        self._stopping.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
        with self.lock:
            feeds = list(self.feeds.values())
            self.feeds.clear()
        for feed in feeds:
            _unlisten(feed.cursors, self.nudge)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def post(self, job: Job) -> None:
        """Run ``job`` on the sender thread (O(1); safe from any thread)."""
        self._jobs.put(job)
        self._wake.set()

    # ------------------------------------------------------------ connections
    def attach(self, comm: Any, protocol: str = "1.0") -> Connection:
        """A panel said hello: answer, replay the kept runs, then stream live.

        The connection joins the fan-out on the sender thread, in the same step that
        snapshots what it must catch up on, so no run reaches it twice or not at all.
        """
        conn = Connection(comm, self.max_queue, self.rate, protocol, lookup=self._sources)
        with self.lock:
            self.pending[comm.comm_id] = conn
        self.post(lambda: self._join(conn))
        return conn

    def detach(self, comm_id: str) -> bool:
        """Forget a panel; returns whether it was the last one."""
        with self.lock:
            self.pending.pop(comm_id, None)
            self.connections.pop(comm_id, None)
            return not self.connections and not self.pending

    def _join(self, conn: Connection) -> None:
        with self.lock:
            if self.pending.pop(conn.comm.comm_id, None) is None:
                return  # closed before it joined
            self.connections[conn.comm.comm_id] = conn
        self._greet(conn)

    def _greet(self, conn: Connection) -> None:
        """Hello, then every live run caught up and every kept run replayed (sender thread)."""
        kept = history.history()
        conn.outbox.appendleft(self.greeting(conn.paused, len(kept)))
        for feed in list(self.feeds.values()):
            conn.outbox.extend(conn.fit(feed.catch_up()))
        # a kept run without a feed may still have its start/end queued behind this job
        conn.replayed = {_run_id(run) for run in kept} - set(self.feeds)
        for run in kept:
            if _run_id(run) in conn.replayed:
                conn.replays.append(self._replay(conn, run))

    def _replay(self, conn: Connection, run: Run) -> Iterator[encode.Message]:
        feed = Feed(run, frozen_cursors(run), _title(run))
        for message in feed.replay():
            yield from conn.fit([message])

    def _sources(self, rid: str, identifiers: set[str]) -> dict[str, dict[str, Any]]:
        """The text of functions ``identifiers`` of run ``rid``: kept with a finished run,
        looked up (and remembered) while it is live."""
        feed = self.feeds.get(rid)
        run = feed.run if feed is not None else _kept_run(rid)
        if run is None:
            return {}
        if run.finished:
            kept = run.sources
            return {i: kept[i] for i in identifiers if i in kept}
        cache = self._live_sources.setdefault(rid, {})
        missing = [i for i in identifiers if i not in cache]
        found = codemap.sources(missing)
        cache.update({i: found.get(i) for i in missing})
        return {i: e for i in identifiers if (e := cache.get(i)) is not None}

    # ------------------------------------------------------------ runs
    def _on_run_start(self, run: Run, cursors: Cursors) -> None:
        self.post(lambda: self._start_feed(run, cursors))

    def _on_run_end(self, run: Run) -> None:
        self.post(lambda: self._end_feed(run))

    def _start_feed(self, run: Run, cursors: Cursors) -> None:
        if run.finished or _run_id(run) in self.feeds:
            return  # ended before the sender got to it (its end sends it whole), or known
        feed = Feed(run, cursors, _title(run))
        self.feeds[feed.id] = feed
        cursors.listeners.append(self.nudge)
        self._fanout(feed.id, feed.start())

    def _end_feed(self, run: Run) -> None:
        rid = _run_id(run)
        feed = self.feeds.pop(rid, None)
        if feed is not None:
            _unlisten(feed.cursors, self.nudge)
        if feed is None:  # started before we listened: send it whole
            feed = Feed(run, frozen_cursors(run), _title(run))
            self._fanout(rid, feed.replay())
        else:
            # the worker processes' series as the finished run keeps them: from the rows
            # sent live on (same rows), not samples that came after the run was frozen
            kept = frozen_cursors(run).processes
            if kept is not None:
                feed.cursors = dataclasses.replace(feed.cursors, processes=kept)
            self._fanout(rid, feed.poll(final=True) + feed.progress() + feed.end())
        self._live_sources.pop(rid, None)

    def _poll(self) -> None:
        for rid, feed in list(self.feeds.items()):
            if feed.run.finished:
                continue  # its end (queued) sends the rest, read from the finished run
            rows = feed.rows
            # a cluster's rows bring polls closer than a tick (nudge): the sampled series
            # (a few samples each, ~half of a poll's work) go at most once a tick
            now = perf_counter()
            series = now - feed.series_at >= SERIES_SHARE * self.tick
            if series:
                feed.series_at = now
            messages = feed.poll(series=series)
            now = perf_counter()
            if feed.rows != rows and now - feed.progress_at >= PROGRESS_PERIOD:
                feed.progress_at = now
                messages += feed.progress()
            self._fanout(rid, messages)

    def _fanout(self, run: str, messages: list[encode.Message]) -> None:
        if not messages:
            return
        with self.lock:
            connections = list(self.connections.values())
        for conn in connections:
            if run in conn.replayed:
                continue
            if conn.paused:
                conn.stale.add(run)
            else:
                conn.push(messages, run)

    # ------------------------------------------------------------ sender thread
    def _loop(self) -> None:
        try:
            self._serve()
        finally:
            self.cpu_time = time.thread_time()

    def _serve(self) -> None:
        self._next_poll = perf_counter()
        while not self._stopping.is_set():
            self.cpu_time = time.thread_time()
            self._wake.clear()
            # a poll gives the GIL up often (locks, numpy, sends); while a compute keeps
            # it busy, each hand-back waits a switch interval: make that short meanwhile
            with self._work, gil.lowered(WORK_SWITCH_INTERVAL):
                self._run_jobs()
                if perf_counter() >= self._poll_at():
                    self._poll_due()
                wait = self._flush()
            self._wake.wait(max(0.002, min(self._poll_at() - perf_counter(), wait)))

    def _poll_at(self) -> float:
        """When the sender thread polls: when due, unless a compute handed over task rows
        within the last tick (then its thread polls: :meth:`pump`)."""
        return max(self._next_poll, self._pumped + self.tick)

    def pump(self) -> None:
        """Poll here and now if a poll is due; the sender thread then sends what it queued.
        The scheduler hook calls this in the computing thread after each batch of task rows
        it hands over. It never waits for the sender thread: while that one is at work
        (polling, or sending to a slow panel) this returns at once."""
        now = self._pumped = perf_counter()
        if now < self._next_poll or self._thread is None:
            return
        if not self._work.acquire(blocking=False):
            return
        try:
            if perf_counter() < self._next_poll:
                return
            self._poll_due()
        finally:
            self._work.release()
        self._wake.set()

    def nudge(self) -> None:
        """A source that is not polled (a cluster) has new task rows: poll on the sender
        thread now rather than at the next tick, unless a poll was less than ``NUDGE_GAP``
        ago (O(1); any thread: the client's event loop thread hands batches over). While
        rows keep coming, each poll sets the next one ``NUDGE_GAP`` away and no nudge
        wakes the thread (waking it took the GIL from the event loop 10-20 times a
        second): only one that finds it asleep for longer does."""
        if self._thread is None:
            return
        self._nudged = True
        soon = self._last_poll + NUDGE_GAP
        if soon < self._next_poll and self._next_poll - perf_counter() > NUDGE_GAP:
            self._next_poll = soon
            self._pumped = -math.inf  # its thread holds no rows of this source
            self._wake.set()

    def _poll_due(self) -> None:
        """Poll the live runs if some panel has room; the next poll is a tick away, or
        ``NUDGE_GAP`` if a source nudged since the last one (the caller holds ``_work``)."""
        self._last_poll = now = perf_counter()
        nudged, self._nudged = self._nudged, False
        self._next_poll = now + (NUDGE_GAP if nudged else self.tick)
        if nudged:
            self._pumped = -math.inf
        if self._ready():
            self._guard(self._poll)

    def _guard(self, fn: Job) -> None:
        try:
            fn()
        except Exception:  # the publisher never dies of one bad run or request
            log.exception("daskprofile: publisher error")

    def _run_jobs(self) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            self._guard(job)

    def _ready(self) -> bool:
        """Poll only when some panel has room: otherwise rows wait in the collectors."""
        with self.lock:
            active = [c for c in self.connections.values() if not c.paused]
        return not active or min(len(c.outbox) for c in active) <= 8

    def _flush(self) -> float:
        """Send what the rate allows; returns seconds until more may be sent."""
        with self.lock:
            connections = list(self.connections.values())
        wait = math.inf
        for conn in connections:
            wait = min(wait, self._flush_one(conn))
        return wait

    def _flush_one(self, conn: Connection) -> float:
        now = perf_counter()
        conn.refill(now)
        if conn.dropped_dirty and conn.tokens >= 1:
            # a notice follows its run's start (still queued when the drop was early); once
            # the run's end is queued, it goes with that end (settle)
            queued = {d.get("run") for d, _ in conn.outbox if d.get("type") in _BOUNDS}
            for run in sorted(conn.dropped_dirty - queued, key=str):
                if conn.tokens < 1:
                    break
                conn.dropped_dirty.discard(run)
                conn.tokens -= 1
                self._send(conn, encode.dropped(run, *conn.dropped[run]))
        while conn.outbox and conn.tokens >= 1:
            message = conn.outbox.popleft()
            if conn.reads(message):
                conn.tokens -= _cost(message)
                notice = conn.settle(message[0]["run"]) if _ends(message) else None
                if notice is not None:
                    self._send(conn, notice)
                self._send(conn, message)
        self._send_replays(conn)
        if conn.outbox or conn.dropped_dirty:
            return max(0.0, (1 - conn.tokens) / conn.rate)
        return math.inf

    def _send_replays(self, conn: Connection, budget: float = 0.05) -> None:
        """Replays are not rate-limited (few, large messages) but share the thread fairly."""
        deadline = perf_counter() + budget
        while conn.replays and perf_counter() < deadline:
            message = next(conn.replays[0], None)
            if message is None:
                conn.replays.popleft()
                continue
            if _ends(message):  # the panel holds the run whole: counts of live drops go
                conn.settle(message[0]["run"])
            self._send(conn, message)

    def _send(self, conn: Connection, message: encode.Message) -> None:
        fitted = encode.adapt(message, conn.protocol)
        if fitted is None:
            return  # e.g. a 1.0 panel would add a worker process's samples to the total
        data, buffers = fitted
        try:
            conn.comm.send(data, buffers=buffers or None)
            conn.sent += 1
        except Exception:
            log.exception("daskprofile: could not send a %s message", data.get("type"))

    # ------------------------------------------------------------ requests
    def request(self, conn: Connection, data: dict[str, Any]) -> None:
        """Handle one panel request (any thread); errors are answered, never raised."""
        kind = data.get("type")
        handler = {
            "hello": self._req_hello,
            "pause": self._req_pause,
            "resume": self._req_resume,
            "replay": self._req_replay,
            "keys": self._req_keys,
            "export": self._req_export,
        }.get(kind if isinstance(kind, str) else "")
        if handler is None:  # maybe from a newer panel of the same major version
            log.warning("daskprofile: ignoring unknown panel request type %r", kind)
            return
        try:
            handler(conn, data)
        except BadRequest as exc:
            log.error("daskprofile: rejected a panel request (%s): %s", exc.code, exc)
            self.reply(conn, encode.error(exc.code, str(exc), kind))

    def reply(self, conn: Connection, message: encode.Message) -> None:
        """Queue an answer (never dropped) for the sender thread."""
        self.post(lambda: conn.outbox.append(message))

    def _req_hello(self, conn: Connection, data: dict[str, Any]) -> None:
        self.post(lambda: self._greet(conn))

    def _req_pause(self, conn: Connection, data: dict[str, Any]) -> None:
        with self.lock:
            conn.paused = True
        self.reply(conn, encode.state(True))

    def _req_resume(self, conn: Connection, data: dict[str, Any]) -> None:
        def resume() -> None:
            with self.lock:
                conn.paused = False
                stale, conn.stale = conn.stale, set()
            conn.outbox.append(encode.state(False))
            self._send_runs(conn, stale)

        self.post(resume)

    def _req_replay(self, conn: Connection, data: dict[str, Any]) -> None:
        rid = data.get("run")
        if rid is not None and not isinstance(rid, str):
            raise BadRequest("bad-request", "replay: 'run' must be a run id (string)")
        if rid is not None:
            self._find_run(rid)

        def replay() -> None:
            ids = {rid} if rid is not None else {_run_id(r) for r in history.history()}
            self._send_runs(conn, ids | (set(self.feeds) if rid is None else set()))

        self.post(replay)

    def _send_runs(self, conn: Connection, ids: set[str]) -> None:
        """Catch up live runs and replay finished ones among ``ids`` (sender thread)."""
        for rid, feed in list(self.feeds.items()):
            if rid in ids:
                conn.outbox.extend(conn.fit(feed.catch_up()))
        for run in history.history():
            if _run_id(run) in ids:
                conn.replays.append(self._replay(conn, run))

    def _find_run(self, rid: Any) -> Run:
        if not isinstance(rid, str):
            raise BadRequest("bad-request", "'run' must be a run id (string)")
        feed = self.feeds.get(rid)
        if feed is not None:
            return feed.run
        for run in history.history():
            if _run_id(run) == rid:
                return run
        raise BadRequest("unknown-run", f"no run {rid!r} in this kernel (not kept any more?)")

    def _req_keys(self, conn: Connection, data: dict[str, Any]) -> None:
        indices = data.get("indices")
        if (
            not isinstance(indices, list)
            or len(indices) > MAX_KEYS
            or not all(type(i) is int and i >= 0 for i in indices)
        ):
            raise BadRequest(
                "bad-request", f"keys: 'indices' must be a list of at most {MAX_KEYS} ints >= 0"
            )
        run = self._find_run(data.get("run"))

        def answer() -> None:
            feed = self.feeds.get(_run_id(run))
            labels = _keys(run, feed, indices)
            conn.outbox.append(encode.keys(_run_id(run), indices, labels))

        self.post(answer)

    def _req_export(self, conn: Connection, data: dict[str, Any]) -> None:
        fmt = data.get("format")
        if not isinstance(fmt, str) or fmt not in EXPORTS:
            raise BadRequest("bad-request", f"export: 'format' must be one of {sorted(EXPORTS)}")
        run = self._find_run(data.get("run"))
        thread = threading.Thread(
            target=self._export, args=(conn, run, fmt), name="daskprofile-export", daemon=True
        )
        thread.start()

    def _export(self, conn: Connection, run: Run, fmt: str) -> None:
        method, suffix, mime = EXPORTS[fmt]
        rid = _run_id(run)
        try:
            payload = _export_bytes(run, method, suffix)
        except Exception as exc:
            log.exception("daskprofile: export of %s as %s failed", rid, fmt)
            self.reply(conn, encode.error("export-failed", f"{fmt}: {exc!r}", "export"))
            return
        filename = f"daskprofile-{rid}{suffix}"
        self.reply(conn, encode.export(rid, fmt, filename, mime, payload))


# ---------------------------------------------------------------- helpers


def _greeting(paused: bool, history: int) -> encode.Message:
    """A hello without versions (a publisher made outside the comm module, in tests)."""
    return encode.hello("", {}, os.getpid(), paused, history)


def _cost(message: encode.Message) -> float:
    """Tokens a message costs: structural ones ride along with the data they announce, and
    so do a cluster's per-process resource rows and per-worker memory samples (a few
    samples each, sent with the total's: counted, they took three tokens of every poll from
    the task rows), its actions (at most one batch per poll of the task rows they go with:
    counted, a 10k-task cluster compute used the whole rate and task rows queued ~150 ms)
    and its transfer logs (sent with the transfer actions they measure)."""
    data = message[0]
    if data.get("type") not in DROPPABLE or data.get("type") in _RIDE_ALONG:
        return 0.0
    return 1.0 if data.get("source") is None else 0.0


def _ends(message: encode.Message) -> bool:
    return message[0].get("type") == "run_end"


def _run_id(run: Run) -> str:
    return str(run.meta.id)


def _kept_run(rid: str) -> Run | None:
    for run in history.history():
        if _run_id(run) == rid:
            return run
    return None


def _title(run: Run) -> str | None:
    title = run.meta.title
    return title if isinstance(title, str) else None


def _export_bytes(run: Run, method: str, suffix: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="daskprofile-") as tmp:
        path = os.path.join(tmp, "export" + suffix)
        written = getattr(run, method)(path)
        with open(written if isinstance(written, str) else path, "rb") as f:
            return f.read()


def _keys(run: Run, feed: Feed | None, indices: list[int]) -> list[str]:
    """Key labels of task rows ``indices`` ("" for rows no longer kept)."""
    if not indices:
        return []
    lookup = feed.cursors.keys if feed is not None else None
    if lookup is not None:
        return lookup(indices)
    first = run.dropped("tasks")
    return run.task_keys([i - first for i in indices])


def _unlisten(cursors: Cursors, listener: Callable[[], None]) -> None:
    with contextlib.suppress(ValueError):
        cursors.listeners.remove(listener)
