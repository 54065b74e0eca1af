"""The panel's always-on recording: while a panel is connected, every compute is profiled.

The panel connects with no user code, so :class:`CellRecorder` records every outermost
dask compute that no explicit ``daskprofile.profile()`` block is recording, local or on a
``distributed.Client``. One run spans the computes of one notebook cell (or one compute
outside a cell); its title is the cell's source. Each run is a
:class:`~.recording.Recording` with fresh task and cache collectors; the resource and
stack samplers (modest rates, ``daskprofile.panel.*`` in dask's config) are shared: they
run while a run is open and for ``daskprofile.panel.idle-stop`` seconds after the last one
closes (back-to-back computes share them instead of paying a start and a stop each), so
an idle kernel has no sampler thread; each run reads its time slice of them.

Clusters: every client's graphs are seen as they are submitted (``distributed/watch``),
the client's plugins are installed on its first graph, and the rows of a graph go to the
run of the cell that submitted it, even when its futures finish after the cell: such a run
ends once its graphs have run (or ``daskprofile.panel.cluster-linger`` seconds after its
cell). The plugins are removed once idle, like the samplers. :meth:`CellRecorder.stop`
leaves no listener, sampler thread, plugin or IPython callback behind.

Settings (dask config, defaults in ``DEFAULTS``)::

    daskprofile.panel.auto              profile every compute while a panel is connected
    daskprofile.panel.keep-recording    go on after the last panel leaves (it may come back)
    daskprofile.panel.tasks / .cache    collect task rows / cache occupancy
    daskprofile.panel.resources.dt      resource sampling period (None/false: off)
    daskprofile.panel.stacks.interval   stack sampling period (None/false: off)
    daskprofile.panel.cluster-linger    longest wait for a cell's cluster tasks after it
    daskprofile.panel.rate / .tick      publisher: live messages per second, poll period
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from time import perf_counter
from typing import Any

from .. import hooks
from ..collectors import StackWorkerHook, merge_stacks
from ..hooks import Compute, Listener, TaskBatch
from ..options import ProfileOptions, config, duration, register_defaults
from . import clusters, history
from .recording import Recording, Samplers

__all__ = ["DEFAULTS", "CellRecorder", "panel_config"]

DEFAULTS: dict[str, Any] = {
    "daskprofile": {
        "panel": {
            "auto": True,
            "keep-recording": True,
            "tasks": True,
            "cache": True,
            "resources": {"dt": "200ms"},
            "stacks": {"interval": "20ms", "switch-interval": None},
            "max-records": 1_000_000,
            "rate": 20,
            "tick": "200ms",
            "max-queue": 256,
            "idle-stop": "2s",
            "cluster-linger": "60s",
        }
    }
}
register_defaults(DEFAULTS)

#: how often a run whose cluster tasks are still running checks whether they are done
CLUSTER_POLL = 0.05
#: seconds of resource samples kept before the oldest open run (and before now): a run
#: that ended is read live by its sinks a last time after it is frozen
KEEP_SAMPLES = 30.0


def panel_config(name: str) -> Any:
    """``daskprofile.panel.<name>`` from dask's config."""
    return config(f"panel.{name}")


def _period(name: str) -> float | None:
    value = panel_config(name)
    return None if value in (None, False, 0) else duration(name, value)


def _options() -> ProfileOptions:
    dt, interval = _period("resources.dt"), _period("stacks.interval")
    return ProfileOptions(
        tasks=bool(panel_config("tasks")),
        resources=dt is not None,
        cache=bool(panel_config("cache")),
        stacks=interval is not None,
        dt=dt or 0.2,
        interval=interval or 0.02,
        max_records=int(panel_config("max-records")),
    )


class CellRecorder(Listener):
    """Records every compute outside explicit ``profile()`` blocks into per-cell runs."""

    name = "panel"

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.options = _options()
        switch = panel_config("stacks.switch-interval")
        switch_s = None if switch in (None, False) else duration("switch-interval", switch)
        self.switch_interval = switch_s
        self.samplers = Samplers.for_options(self.options, switch_interval=switch_s)
        self.samplers.shared = True
        stacks = self.samplers.stacks
        if stacks is not None:
            self.track_running = True
            self.worker_hooks = (StackWorkerHook(stacks.interval, stacks.cycle),)
        self.errors: list[dict[str, str]] = []
        self._current: Recording | None = None  # the open cell's run
        self._computes: dict[int, Recording] = {}
        self._inflight: dict[int, int] = {}  # id(recording) -> local computes running
        #: cell over, cluster tasks still running: id -> (recording, when to give up)
        self._lingering: dict[int, tuple[Recording, float]] = {}
        self._in_cell = False
        self._title: str | None = None
        self._ipython: Any = None
        self._open_runs = 0
        #: runs that read the shared samplers, until frozen: id -> recording
        self._reading: dict[int, Recording] = {}
        self._idle: threading.Timer | None = None  # stops the samplers once idle
        self._poll: threading.Timer | None = None  # ends lingering runs
        self.idle_stop = _period("idle-stop")  # None: stop with the last run
        self.linger = _period("cluster-linger") or 0.0
        self.cluster: Any = None  # ClusterSource, once distributed is in use
        self._cancel_hook: Any = lambda: None
        self.started = False

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Listen to computes (local and on clusters) and to IPython cells."""
        if self.started:
            return
        self.started = True
        hooks.add_listener(self)
        atexit.register(self.stop)  # a kernel shut down removes its plugins from clusters
        self._cancel_hook = clusters.when_distributed(self._watch_clusters)
        self._ipython = _ipython()
        if self._ipython is not None:
            self._ipython.events.register("pre_run_cell", self._pre_run_cell)
            self._ipython.events.register("post_run_cell", self._post_run_cell)

    def _watch_clusters(self) -> None:
        with self.lock:
            if not self.started or self.cluster is not None:
                return
            module = clusters.source_module()
            # the workers' samplers leave the switch interval alone too, unless configured
            settings = module.ClusterSettings.of(self.options, switch_interval=self.switch_interval)
            self.cluster = module.ClusterSource(settings, self.samplers.stacks)
        watch = clusters.watch_module()
        watch.add_listener(self._on_graph)
        watch.add_close_listener(self.cluster.client_closing)  # its last rows, its plugins

    def stop(self) -> None:
        """Undo :meth:`start`: the current runs end, nothing is left running."""
        if not self.started:
            return
        self.started = False
        hooks.remove_listener(self)
        atexit.unregister(self.stop)
        self._cancel_hook()
        if self.cluster is not None:
            watch = clusters.watch_module()
            watch.remove_listener(self._on_graph)
            watch.remove_close_listener(self.cluster.client_closing)
        if self._ipython is not None:
            for name, cb in (
                ("pre_run_cell", self._pre_run_cell),
                ("post_run_cell", self._post_run_cell),
            ):
                with contextlib.suppress(ValueError):
                    self._ipython.events.unregister(name, cb)
            self._ipython = None
        with self.lock:
            current, self._current = self._current, None
            lingering = [r for r, _ in self._lingering.values()]
            self._lingering = {}
            self._computes.clear()
            poll, self._poll = self._poll, None
        for recording in [*lingering, *([current] if current is not None else [])]:
            self._close(recording)
        with self.lock:
            self._open_runs = 0
            timer, self._idle = self._idle, None
            self._samplers(False)
        for t in (timer, poll):  # (outside the lock: a firing timer takes it)
            if t is not None:
                t.cancel()
                t.join()

    def _samplers(self, on: bool, local: bool = True) -> None:
        """Start or stop the samplers and the cluster plugins (caller holds the lock);
        starting cancels a pending idle stop (its thread sees it is no longer current).
        ``local=False``: a run opened by a cluster graph; the kernel's samplers wait for a
        local compute (:meth:`_sample_kernel`): on a cluster the stacks and the CPU/memory
        lines are the workers', and sampling the kernel would slow an in-process scheduler
        for nothing."""
        if on and self._idle is not None:
            self._idle.cancel()
            self._idle = None
        for sampler in (self.samplers.resources, self.samplers.stacks):
            if sampler is None or (on and not local):
                continue
            sampler.start() if on else sampler.stop()
        if not on and self.cluster is not None:
            self.cluster.stop()
            self.cluster.clear()

    def _stop_when_idle(self) -> None:
        """The last run closed: stop the samplers ``idle_stop`` seconds from now unless a
        run opens meanwhile (caller holds the lock)."""
        if self.idle_stop is None:
            self._samplers(False)
            return
        timer = threading.Timer(self.idle_stop, self._idle_timeout)
        timer.name, timer.daemon = "daskprofile-idle", True
        if self._idle is not None:
            self._idle.cancel()
        self._idle = timer
        timer.start()

    def _idle_timeout(self) -> None:
        with self.lock:
            if self._idle is not threading.current_thread() or self._open_runs:
                return  # cancelled, or a run opened meanwhile
            self._idle = None
            self._samplers(False)

    # ------------------------------------------------------------ IPython cells
    def _pre_run_cell(self, info: Any) -> None:
        self._in_cell = True
        raw = getattr(info, "raw_cell", None)
        self._title = raw if isinstance(raw, str) else None

    def _post_run_cell(self, result: Any) -> None:
        self._in_cell = False
        with self.lock:
            current = self._current
            if current is None or self._inflight.get(id(current)):
                return
            self._current = None
        self._end_or_linger(current)

    # ------------------------------------------------------------ computes
    def _run_for_compute(self, cluster: Any = None) -> Recording | None:
        """The open cell's recording, opened if needed (with ``cluster`` plugged in before
        it is announced); None inside an explicit block."""
        if _explicit_run_live():
            return None
        with self.lock:
            if not self.started:
                return None
            current = self._current
            if current is None:
                current = self._current = self._open(cluster)
            return current

    def on_compute_start(self, compute: Compute) -> None:
        recording = self._run_for_compute()
        if recording is None:
            return
        with self.lock:
            self._sample_kernel()
            self._inflight[id(recording)] = self._inflight.get(id(recording), 0) + 1
            self._computes[compute.id] = recording
        for listener in recording.listeners:
            recording.forward(listener, "on_compute_start", compute)

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        recording = self._computes.get(compute.id)
        if recording is None:
            return
        recording.forward(recording.tasks, "on_tasks", compute, batch)
        recording.forward(recording.cache, "on_tasks", compute, batch)
        if self.samplers.stacks is not None:
            merge_stacks(self.samplers.stacks, batch.extra, compute)

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        with self.lock:
            recording = self._computes.pop(compute.id, None)
            if recording is None:
                return
            left = self._inflight[id(recording)] = self._inflight.get(id(recording), 1) - 1
            closing = not self._in_cell and not left and recording is self._current
            if closing:
                self._current = None
        for listener in recording.listeners:  # (cache; graphs and edges let go of)
            recording.forward(listener, "on_compute_end", compute, state, failed)
        if closing:
            self._end_or_linger(recording)

    def _sample_kernel(self) -> None:
        """A local compute: the kernel's stacks and resources are sampled (caller holds
        the lock)."""
        if not self._open_runs:
            return
        for sampler in (self.samplers.resources, self.samplers.stacks):
            if sampler is not None and not sampler.running:
                sampler.start()

    def on_listener_error(self, exc: BaseException) -> None:
        self.errors.append({"collector": self.name, "error": repr(exc)})

    def _on_graph(self, client: Any, keys: Any) -> None:
        """A client is about to submit a graph (watch listener, the submitting thread)."""
        cluster = self.cluster
        recording = self._run_for_compute(cluster)
        if recording is None or cluster is None:
            return
        target = recording.plug(cluster)
        cluster.expect(client, keys, target)
        if not self._in_cell:  # a script's compute: its run ends once its graph has run
            with self.lock:
                if self._current is recording:
                    self._current = None
            self._end_or_linger(recording)

    # ------------------------------------------------------------ runs
    def _open(self, cluster: Any = None) -> Recording:
        """A new run, announced to the sinks (caller holds the lock)."""
        recording = Recording(self.options, samplers=self.samplers, title=self._title, auto=True)
        self._reading[id(recording)] = recording
        if cluster is not None:
            recording.plug(cluster)
        self._open_runs += 1
        if self._open_runs == 1:  # after slicing: the first sample is this run's
            self._samplers(True, local=cluster is None)
        recording.start()
        return recording

    def _end_or_linger(self, recording: Recording) -> None:
        """Close ``recording`` now, or once its cluster graphs have run."""
        if not recording.pending():
            self._close(recording)
            return
        with self.lock:
            self._lingering[id(recording)] = (recording, perf_counter() + self.linger)
            if self._poll is None and self.started:
                self._schedule_poll()

    def _schedule_poll(self) -> None:
        timer = threading.Timer(CLUSTER_POLL, self._poll_lingering)
        timer.name, timer.daemon = "daskprofile-cluster-wait", True
        self._poll = timer
        timer.start()

    def _poll_lingering(self) -> None:
        with self.lock:
            if self._poll is not threading.current_thread():
                return
            self._poll = None
            if self.cluster is not None:
                self.cluster.drop_closed_clients()
            now = perf_counter()
            done = [r for r, until in self._lingering.values() if not r.pending() or now >= until]
            for recording in done:
                del self._lingering[id(recording)]
            if self._lingering and self.started:
                self._schedule_poll()
        for recording in done:
            self._close(recording)

    def _close(self, recording: Recording) -> None:
        """End a run: freeze it, keep it in the history, notify; then the shared resource
        sampler forgets the samples no open run reads (:meth:`_forget_samples`)."""
        with self.lock:
            self._inflight.pop(id(recording), None)
            self._open_runs = max(0, self._open_runs - 1)
            if self._open_runs == 0:
                self._stop_when_idle()
        try:
            recording.finish()
        finally:
            with self.lock:
                self._reading.pop(id(recording), None)
                self._forget_samples()

    def _forget_samples(self) -> None:
        """Let the shared resource sampler go of samples older than every open run (its
        ring would otherwise keep them while back-to-back computes keep it running, up
        to ``max-records``) and than :data:`KEEP_SAMPLES` seconds: a finished run's last
        rows are still read live by its sinks (the publisher's final poll) for a moment.
        Caller holds the lock."""
        sampler = self.samplers.resources
        if sampler is None:
            return
        before = perf_counter() - KEEP_SAMPLES
        for open_run in self._reading.values():
            before = min(before, open_run.run.t0 - KEEP_SAMPLES)
        try:
            sampler.forget(before)
        except Exception as exc:  # never fail the end of a run
            self.on_listener_error(exc)


# ---------------------------------------------------------------- helpers


def _explicit_run_live() -> bool:
    return any(not r.meta.auto for r in history.live_runs())


def _ipython() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
