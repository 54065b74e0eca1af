"""The panel's always-on recorder: while a panel is connected, every compute is profiled.

The panel connects with no user code, so :class:`PanelSession` records every outermost
dask compute that no explicit ``daskprofile.profile()`` block is recording. One run spans
the computes of one notebook cell (or one compute outside a cell); its title is the cell's
source. Task and cache collectors are fresh per run; the resource and stack samplers
(modest rates, ``daskprofile.panel.*`` in dask's config) run while a run is open and for
``daskprofile.panel.idle-stop`` seconds after the last one closes (back-to-back computes
share them instead of paying a start and a stop each), so an idle kernel has no sampler
thread; each run reads its time slice of them. Runs join
the recorder's history like any other, so the publisher streams and replays them the same
way. :meth:`PanelSession.stop` leaves no listener, sampler thread or IPython callback
behind.

Settings (dask config, defaults in ``DEFAULTS``)::

    daskprofile.panel.auto              profile every compute while a panel is connected
    daskprofile.panel.keep-recording    go on after the last panel leaves (it may come back)
    daskprofile.panel.tasks / .cache    collect task rows / cache occupancy
    daskprofile.panel.resources.dt      resource sampling period (None/false: off)
    daskprofile.panel.stacks.interval   stack sampling period (None/false: off)
    daskprofile.panel.rate / .tick      publisher: live messages per second, poll period
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np

from .. import hooks, recorder
from ..collectors import StackWorkerHook, merge_stacks, optional
from ..collectors.cache import CacheCollector
from ..collectors.tasks import TaskCollector
from ..hooks import Compute, Listener, TaskBatch
from ..keys import task_group
from ..options import config, duration, register_defaults
from ..run import Run
from .feed import Sources, live_table, live_tasks

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
        }
    }
}
register_defaults(DEFAULTS)

_ids = iter(range(1, 1 << 62))


def panel_config(name: str) -> Any:
    """``daskprofile.panel.<name>`` from dask's config."""
    return config(f"panel.{name}")


def _period(name: str) -> float | None:
    value = panel_config(name)
    return None if value in (None, False, 0) else duration(name, value)


@dataclass
class _Bundle:
    """One auto run: its collectors and what the publisher needs to stream it."""

    run: Run
    tasks: TaskCollector | None
    cache: CacheCollector | None
    sources: Sources
    graphs: list[Mapping[Any, Any]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    inflight: int = 0


class PanelSession(Listener):
    """Records every compute outside explicit ``profile()`` blocks into per-cell runs."""

    name = "panel"

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.with_tasks = bool(panel_config("tasks"))
        self.with_cache = bool(panel_config("cache"))
        self.max_records = int(panel_config("max-records"))
        self.resources = _resource_sampler()
        self.stacks = _stack_sampler()
        if self.stacks is not None:
            self.track_running = True
            self.worker_hooks = (StackWorkerHook(self.stacks.interval, self.stacks.cycle),)
        self.errors: list[dict[str, str]] = []
        self._bundle: _Bundle | None = None
        self._computes: dict[int, _Bundle] = {}
        self._by_run: dict[str, Sources] = {}
        self._in_cell = False
        self._title: str | None = None
        self._ipython: Any = None
        self._open_runs = 0
        self._idle: threading.Timer | None = None  # stops the samplers once idle
        self.idle_stop = _period("idle-stop")  # None: stop with the last run
        self.started = False

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Listen to computes and to IPython cells."""
        if self.started:
            return
        self.started = True
        hooks.add_listener(self)
        self._ipython = _ipython()
        if self._ipython is not None:
            self._ipython.events.register("pre_run_cell", self._pre_run_cell)
            self._ipython.events.register("post_run_cell", self._post_run_cell)

    def stop(self) -> None:
        """Undo :meth:`start`: the current run ends, nothing is left running."""
        if not self.started:
            return
        self.started = False
        hooks.remove_listener(self)
        if self._ipython is not None:
            for name, cb in (
                ("pre_run_cell", self._pre_run_cell),
                ("post_run_cell", self._post_run_cell),
            ):
                with contextlib.suppress(ValueError):
                    self._ipython.events.unregister(name, cb)
            self._ipython = None
        with self.lock:
            bundle, self._bundle = self._bundle, None
            self._computes.clear()
        if bundle is not None:
            self._close(bundle)
        with self.lock:
            self._open_runs = 0
            timer, self._idle = self._idle, None
            self._samplers(False)
        if timer is not None:  # (outside the lock: a firing timer takes it)
            timer.cancel()
            timer.join()

    def _samplers(self, on: bool) -> None:
        """Start or stop the samplers (caller holds the lock); starting cancels a pending
        idle stop (its thread sees it is no longer current and ends)."""
        if on and self._idle is not None:
            self._idle.cancel()
            self._idle = None
        for sampler in (self.resources, self.stacks):
            if sampler is not None:
                sampler.start() if on else sampler.stop()

    def _stop_when_idle(self) -> None:
        """The last run closed: stop the samplers ``idle_stop`` seconds from now unless a
        run opens meanwhile (caller holds the lock)."""
        if self.resources is None and self.stacks is None:
            return
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

    def sources(self, run: Run) -> Sources | None:
        """Readers of one of this session's runs (None if the run is not ours)."""
        with self.lock:
            return self._by_run.get(str(run.meta.get("id")))

    # ------------------------------------------------------------ IPython cells
    def _pre_run_cell(self, info: Any) -> None:
        self._in_cell = True
        raw = getattr(info, "raw_cell", None)
        self._title = raw if isinstance(raw, str) else None

    def _post_run_cell(self, result: Any) -> None:
        self._in_cell = False
        with self.lock:
            bundle = self._bundle
            if bundle is None or bundle.inflight:
                return
            self._bundle = None
        self._close(bundle)

    # ------------------------------------------------------------ computes
    def on_compute_start(self, compute: Compute) -> None:
        if _explicit_run_live():
            return
        with self.lock:
            bundle = self._bundle
            if bundle is None:
                bundle = self._bundle = self._open()
            bundle.inflight += 1
            self._computes[compute.id] = bundle
            bundle.graphs.append(compute.dsk)
        meta = bundle.run.meta
        meta["computes"] = meta.get("computes", 0) + 1
        if compute.scheduler not in meta["schedulers"]:
            meta["schedulers"].append(compute.scheduler)
        for collector in (bundle.tasks, bundle.cache):
            if collector is not None:
                collector.on_compute_start(compute)

    def on_tasks(self, compute: Compute, batch: TaskBatch) -> None:
        bundle = self._computes.get(compute.id)
        if bundle is None:
            return
        if bundle.tasks is not None:
            bundle.tasks.on_tasks(compute, batch)
        if bundle.cache is not None:
            bundle.cache.on_tasks(compute, batch)
        if self.stacks is not None:
            merge_stacks(self.stacks, batch.extra)

    def on_compute_end(self, compute: Compute, state: dict[str, Any], failed: bool) -> None:
        with self.lock:
            bundle = self._computes.pop(compute.id, None)
            if bundle is None:
                return
            bundle.inflight -= 1
            closing = not self._in_cell and not bundle.inflight and bundle is self._bundle
            if closing:
                self._bundle = None
        if bundle.cache is not None:
            bundle.cache.on_compute_end(compute, state, failed)
        if closing:
            self._close(bundle)

    def on_listener_error(self, exc: BaseException) -> None:
        self.errors.append({"collector": self.name, "error": repr(exc)})

    # ------------------------------------------------------------ runs
    def _open(self) -> _Bundle:
        """A new run, announced to the recorder's subscribers (caller holds the lock)."""
        run = Run(_meta(self._title))
        tasks = TaskCollector(self.max_records) if self.with_tasks else None
        cache = CacheCollector(None, self.max_records) if self.with_cache else None
        for collector in (tasks, cache):
            if collector is not None:
                collector.errors = run.meta["errors"]
        sources = Sources()
        bundle = _Bundle(run, tasks, cache, sources)
        sources.totals = lambda: _totals(bundle)
        if tasks is not None:
            run.attach("tasks", tasks.snapshot_compact)
            sources.tasks = live_tasks(tasks)
            sources.keys = tasks.keys_at
        if cache is not None:
            run.attach("cache", cache.snapshot)
            sources.cache = live_table(cache.since)
        self._slice_samplers(run, sources)
        self._open_runs += 1
        if self._open_runs == 1:
            self._samplers(True)  # after slicing: the first sample is this run's
        self._by_run[str(run.meta["id"])] = sources
        recorder.add_live(run)
        return bundle

    def _slice_samplers(self, run: Run, sources: Sources) -> None:
        t0 = run.t0
        if self.resources is not None:
            res = self.resources
            _, start = res.since(1 << 62)
            sources.resources = live_table(res.since, start)
            run.attach("resources", lambda: _after(res.since(start)[0], t0))
        if self.stacks is not None:
            st = self.stacks

            def history(t_from: float | None) -> list[tuple[float, float, dict[str, Any]]]:
                out: list[tuple[float, float, dict[str, Any]]] = st.history(
                    max(t0, t_from if t_from is not None else t0), _t1(run)
                )
                return out

            sources.stacks = history
            run.attach("stacks", lambda: st.trees(t0, _t1(run)))
            run.attach("stack_history", lambda: history(None))

    def _close(self, bundle: _Bundle) -> None:
        """End a run: freeze it, keep it in the recorder's history, notify."""
        run = bundle.run
        run.meta["t1"] = perf_counter()
        with self.lock:
            self._open_runs = max(0, self._open_runs - 1)
            if self._open_runs == 0:
                self._stop_when_idle()
        bundle.totals = _totals(bundle)
        run.finish(run.meta["t1"], {"stacks": 0})
        recorder.finish_live(run)
        with self.lock:
            self._by_run.pop(str(run.meta["id"]), None)


# ---------------------------------------------------------------- helpers


def _explicit_run_live() -> bool:
    return any(not r.meta.get("auto") for r in recorder.live_runs())


def _meta(title: str | None) -> dict[str, Any]:
    options = {
        "tasks": bool(panel_config("tasks")),
        "cache": bool(panel_config("cache")),
        "resources": _period("resources.dt") is not None,
        "stacks": _period("stacks.interval") is not None,
        "dt": _period("resources.dt"),
        "interval": _period("stacks.interval"),
        "max_records": int(panel_config("max-records")),
    }
    return {
        "id": f"{os.getpid()}-p{next(_ids)}-{int(time.time() * 1000)}",
        "wall0": time.time(),
        "t0": perf_counter(),
        "t1": None,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "options": options,
        "schedulers": [],
        "computes": 0,
        "dropped": {},
        "errors": [],
        "finished": False,
        "auto": True,
        "title": title,
    }


def _t1(run: Run) -> float | None:
    t1 = run.meta.get("t1")
    return float(t1) if t1 is not None else None


def _after(cols: dict[str, np.ndarray], t0: float) -> dict[str, np.ndarray]:
    keep = np.asarray(cols["time"]) >= t0 - 1e-3
    return {k: np.asarray(v)[keep] for k, v in cols.items()}


def _totals(bundle: _Bundle) -> dict[str, int]:
    """Tasks per group in the run's graphs (counted on the caller's thread, then dropped)."""
    graphs, bundle.graphs = bundle.graphs, []
    for dsk in graphs:
        try:
            _count_graph(dsk, bundle.totals)
        except Exception:  # a graph we cannot read: progress falls back to done counts
            continue
    return bundle.totals


def _count_graph(dsk: Mapping[Any, Any], totals: dict[str, int]) -> None:
    """Add ``dsk``'s tasks per group; one group lookup per key *name*, as the collector does."""
    counts: dict[Any, int] = {}
    first: dict[Any, Any] = {}
    for key in list(dsk):
        name = key[0] if type(key) is tuple and key else key
        n = counts.get(name)
        if n is None:
            first[name] = key
            counts[name] = 1
        else:
            counts[name] = n + 1
    for name, n in counts.items():
        key = first[name]
        group = task_group(key, dsk.get(key))
        totals[group] = totals.get(group, 0) + n


def _resource_sampler() -> Any:
    dt = _period("resources.dt")
    module = optional("resources") if dt is not None else None
    return None if module is None else module.ResourceCollector(dt)


def _stack_sampler() -> Any:
    interval = _period("stacks.interval")
    module = optional("stacks") if interval is not None else None
    if module is None:
        return None
    switch = panel_config("stacks.switch-interval")
    switch_s = None if switch in (None, False) else duration("switch-interval", switch)
    return module.StackCollector(interval, switch_interval=switch_s)


def _ipython() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
