"""A cluster compute streamed to a connected panel: lag, slowdown, scheduler plugin CPU.

    .venv/bin/python benchmarks/bench_cluster_panel.py [--tasks 20000] [--rounds 5]
        [--workloads map,array] [--no-cpu] [--config KEY=VALUE ...] [--quick]

One process, one ``LocalCluster(n_workers=2, threads_per_worker=2, processes=True)``: the
scheduler runs in this process, as in a notebook that made its own cluster, so it shares
the GIL with the client, the panel's samplers and the publisher. Workloads (each about
``--tasks`` tasks; keys differ from one compute to the next):

* ``map``: ``client.map(inc, range(n), pure=False)`` gathered;
* ``array``: ``(x + x.T).sum().compute()`` of a ``da.full`` array of 10x10 chunks (about
  2.34 tasks per chunk: the transpose moves chunks between workers).

"panel" = a panel connected through the real comm handlers (``daskprofile.jupyter.comm``:
the per-cell recorder, the cluster source with its scheduler and worker plugins, the
publisher) with a comm object that timestamps and keeps what it is sent. Outside IPython
each compute is its own run, ending once its graph has run. ``--config`` sets dask config
for the whole run (``daskprofile.panel.rate=1000``, ``daskprofile.panel.stacks.interval=None``
...) to see what a setting costs or saves.

1. Lag (target <= 500 ms): for every task row, the time the ``tasks`` message carrying it
   was sent (the comm's ``send``) minus the time the task stopped on its worker (the row's
   ``stop``, in this process's ``perf_counter`` clock: the message's ``base + stop`` plus the
   run's ``t0``); median, p90, p99 and max over every row of the panel rounds, and when the
   last row and the ``run_end`` were sent after the compute returned. Split into three
   stages per row: stop -> batch made by the worker (its message's ``now``; the scheduler's
   when the scheduler measures the rows: workers without daskprofile), batch made ->
   rows applied in this process (the client's event loop), applied -> sent. Also the
   messages per second by type (the publisher sends at most ``daskprofile.panel.rate`` data
   messages a second per panel).
2. Slowdown (target <= 3%): rounds run as a chain bare, panel, bare, panel, ..., bare after
   a warm-up pair not counted; each panel compute is compared with the mean of the bare
   computes before and after it (a shared machine's drift cancels); median with a
   distribution-free 95% CI. Each slot first runs one tiny task (``client.submit``): with the
   panel it is the first graph after the panel connected, so it pays the plugins' install
   (as does the first compute of a cell after ``daskprofile.panel.idle-stop`` of idleness,
   which the report counts); the workloads that follow find the plugins installed unless
   they come later than that. Every timed compute starts right after a full garbage
   collection. Alongside, the CPU seconds (user + system) each compute cost, per thread
   group of this process and of the worker processes, bare and with the panel: where the
   slowdown comes from, and steadier than wall time on a shared machine.
3. CPU on the scheduler: daskprofile's scheduler plugin (``transition`` + ``update_graph`` +
   ``flush``, ``thread_time``, as ``bench_distributed.py``) vs distributed's
   ``TaskStreamPlugin``, per task; also this process's cost of receiving the rows (the
   cluster source's router, on the client's event loop) and the publisher thread's CPU.
   Distributed's task-stream plugin is never removed once added: this section runs last.
"""

from __future__ import annotations

import argparse
import ast
import gc
import math
import os
import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count, pairwise
from time import perf_counter, thread_time
from typing import Any

import dask
import dask.array as da
import numpy as np
import psutil
from distributed import Client, LocalCluster, get_task_stream

from bench_comm import RecordingComm  # (benchmarks/ is on sys.path when run as a script)
from daskprofile.collectors.tasks import TaskCollector
from daskprofile.distributed import source as cluster_source
from daskprofile.distributed import watch
from daskprofile.distributed.collector import DistributedCollector
from daskprofile.jupyter import comm as dpcomm
from daskprofile.jupyter import encode
from daskprofile.record import history
from daskprofile.record.per_cell import CellRecorder, panel_config

LAG_TARGET = 0.5
SLOWDOWN_TARGET = 3.0
#: tasks per 10x10 chunk of the array workload (measured: 2,110 tasks for 30x30 chunks)
ARRAY_TASKS_PER_CHUNK = 2.34


def inc(x: int) -> int:
    return x + 1


# ---------------------------------------------------------------- workloads
_fill = count(1)


def run_map(client: Client, n: int) -> None:
    futures = client.map(inc, range(n), pure=False)
    client.gather(futures)
    del futures


def run_array(client: Client, n: int) -> None:
    b = max(2, round(math.sqrt(n / ARRAY_TASKS_PER_CHUNK)))
    x = da.full((10 * b, 10 * b), float(next(_fill)), chunks=10)  # new keys every time
    (x + x.T).sum().compute()


def run_tiny(client: Client, n: int) -> None:
    client.submit(inc, 0, pure=False).result()


WORKLOADS: dict[str, Callable[[Client, int], None]] = {"map": run_map, "array": run_array}


# ---------------------------------------------------------------- CPU accounting
# (as bench_distributed.py: thread CPU in wrapped plugin hooks, the wrapper's cost taken off)
HOOKS = ("transition", "update_graph", "flush")


class Meter:
    """Thread CPU seconds spent in wrapped methods."""

    def __init__(self) -> None:
        self.raw = 0.0
        self.calls = 0

    @property
    def cpu(self) -> float:
        return max(0.0, self.raw - self.calls * wrapper_cost())

    def wrap(self, obj: Any, name: str) -> None:
        inner = getattr(obj, name, None)
        if inner is None:
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.raw += thread_time() - t
                self.calls += 1

        setattr(obj, name, timed)

    def wrap_plugins(self, scheduler: Any, prefix: str, seen: set[str]) -> None:
        """Wrap the hooks of the scheduler plugins named ``prefix...`` not in ``seen``."""
        for name, plugin in list(scheduler.plugins.items()):
            if name.startswith(prefix) and name not in seen:
                seen.add(name)
                for hook in HOOKS:
                    self.wrap(plugin, hook)


class _Noop:
    def hook(self, *args: Any, **kwargs: Any) -> None:
        pass


_calibration: list[float] = []


def wrapper_cost() -> float:
    """CPU seconds one wrapped call of a no-op costs (the measurement's own cost)."""
    if not _calibration:
        meter, obj = Meter(), _Noop()
        meter.wrap(obj, "hook")
        for _ in range(20_000):
            obj.hook(1, 2, finish="memory")
        _calibration.append(meter.raw / meter.calls)
    return _calibration[0]


# ---------------------------------------------------------------- instrumentation
@dataclass
class Probes:
    """What the wrappers below note (per batch, never per row)."""

    #: id(TaskCollector) -> [(first row, rows, applied at, batch made at)] of cluster rows
    arrived: dict[int, list[tuple[int, int, float, float]]] = field(default_factory=dict)
    #: router calls: (applied at, task rows, thread CPU seconds)
    routed: list[tuple[float, int, float]] = field(default_factory=list)
    #: submission hook calls: (called at, seconds in the panel's listener, of which
    #: installing a client's plugins)
    hooked: list[tuple[float, float, float]] = field(default_factory=list)
    installing: float = 0.0  # seconds spent in DistributedCollector.start so far
    batch_now: float = math.nan  # ``now`` of the batch being routed (perf_counter)


PROBES = Probes()


def install_probes() -> None:
    """Note when each batch of cluster rows was made and applied, and the submission
    hook's time (class-level wrappers: a few calls a second, none per row)."""
    route = cluster_source._Router.scheduler_batch
    add_rows = TaskCollector.add_rows
    on_graph = CellRecorder._on_graph
    start = DistributedCollector.start

    def scheduler_batch(self: Any, collector: Any, msg: dict[str, Any]) -> None:
        t, cpu = perf_counter(), thread_time()
        PROBES.batch_now = float(msg.get("now") or math.nan) + collector.to_perf
        try:
            route(self, collector, msg)
        finally:
            rows = len(msg["tasks"]["key"])
            PROBES.routed.append((t, rows, thread_time() - cpu))

    def added(self: TaskCollector, rows: Any) -> int:
        first = add_rows(self, rows)
        entry = (first, len(rows.key), perf_counter(), PROBES.batch_now)
        PROBES.arrived.setdefault(id(self), []).append(entry)
        return first

    def timed_on_graph(self: CellRecorder, client: Any, keys: Any) -> None:
        t, installing = perf_counter(), PROBES.installing
        try:
            on_graph(self, client, keys)
        finally:
            spent = perf_counter() - t
            PROBES.hooked.append((t, spent, PROBES.installing - installing))

    def timed_start(self: DistributedCollector) -> None:
        t = perf_counter()
        try:
            start(self)
        finally:
            PROBES.installing += perf_counter() - t

    cluster_source._Router.scheduler_batch = scheduler_batch  # type: ignore[method-assign]
    TaskCollector.add_rows = added  # type: ignore[method-assign]
    CellRecorder._on_graph = timed_on_graph  # type: ignore[method-assign]
    DistributedCollector.start = timed_start  # type: ignore[method-assign]


# ---------------------------------------------------------------- the panel
def connect() -> RecordingComm:
    c = RecordingComm()
    meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
    dpcomm._on_open(c, {"metadata": meta, "content": {"data": {"type": "hello"}}})
    wait_until(lambda: any(d.get("type") == "hello" for _, d, _ in c.sent), "hello")
    return c


def disconnect(c: RecordingComm) -> None:
    c._close({})
    dpcomm.shutdown()


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout} s")
        time.sleep(0.01)


def sent_run_end(c: RecordingComm, rid: str) -> bool:
    return any(d.get("type") == "run_end" and d.get("run") == rid for _, d, _ in c.sent)


@dataclass
class Compute:
    """One compute with the panel connected: its run and its timing."""

    workload: str
    run: str
    collector: int  # id() of the run's TaskCollector
    began: float
    returned: float


@dataclass
class Slot:
    kind: str  # "bare" or "panel"
    seconds: dict[str, float] = field(default_factory=dict)  # workload -> compute time
    computes: list[Compute] = field(default_factory=list)
    comm: RecordingComm | None = None
    publisher_cpu: float = math.nan
    #: (submission hook seconds, of which installing plugins) per compute, in order
    hook: list[tuple[float, float]] = field(default_factory=list)
    #: workload -> CPU seconds spent during the compute, per thread group / the workers
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)


class CpuClock:
    """CPU seconds (user + system) by thread group (thread names without their numbers)
    of this process (``kernel/...``) and of the worker processes (``workers/...``, summed;
    ``workers/(process)``: their whole processes): where a compute's time goes, bare or
    with the panel. A sum of CPU, not wall time: steadier than the slowdown on a shared
    machine. Read outside the timed interval (the workers' through ``client.run``)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def read(self) -> dict[str, float]:
        out = {f"kernel/{k}": v for k, v in thread_cpu().items()}
        for cpu in self.client.run(thread_cpu).values():
            for k, v in cpu.items():
                out[f"workers/{k}"] = out.get(f"workers/{k}", 0.0) + v
        return out

    @staticmethod
    def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
        return {k: v - before.get(k, 0.0) for k, v in after.items()}


def thread_cpu() -> dict[str, float]:
    """This process's CPU seconds by thread group, and ``(process)``: all of it."""
    names = {t.native_id: _thread_group(t.name) for t in threading.enumerate()}
    me = psutil.Process()
    out: dict[str, float] = {}
    for t in me.threads():
        group = names.get(t.id, "(not a Python thread)")
        out[group] = out.get(group, 0.0) + t.user_time + t.system_time
    times = me.cpu_times()
    out["(process)"] = times.user + times.system
    return out


def _thread_group(name: str) -> str:
    """A thread's name without its numbers (``Dask-Offload_0`` -> ``Dask-Offload``)."""
    return re.sub(r"[-_ ]?\d+", "", name).strip(" -_") or name


CLOCK: CpuClock | None = None


def timed(
    client: Client, fn: Callable[[Client, int], None], n: int
) -> tuple[float, float, dict[str, float]]:
    gc.collect()  # every compute starts from the same collector state
    cpu = CLOCK.read() if CLOCK is not None else {}
    t = perf_counter()
    fn(client, n)
    returned = perf_counter()
    spent = CLOCK.delta(CLOCK.read(), cpu) if CLOCK is not None else {}
    return t, returned, spent


def run_slot(client: Client, kind: str, n: int, names: list[str]) -> Slot:
    slot = Slot(kind)
    todo = [("tiny", run_tiny), *((name, WORKLOADS[name]) for name in names)]
    if kind == "bare":
        for name, fn in todo:
            began, returned, slot.cpu[name] = timed(client, fn, n)
            slot.seconds[name] = returned - began
        return slot
    history.clear_history()  # live streaming, not the replay of earlier rounds' runs
    c = slot.comm = connect()
    started: list[tuple[str, int]] = []

    def on_start(run: Any, cursors: Any) -> None:
        collector = id(cursors.keys.__self__)
        PROBES.arrived.pop(collector, None)  # an id an earlier, freed collector had
        started.append((str(run.meta.id), collector))

    unsubscribe = history.subscribe(on_start=on_start)
    hooked = len(PROBES.hooked)
    hub = dpcomm.hub()
    try:
        for name, fn in todo:
            known = len(started)
            began, returned, slot.cpu[name] = timed(client, fn, n)
            slot.seconds[name] = returned - began
            (rid, collector), *more = started[known:]
            assert not more, f"{name}: {len(more) + 1} runs for one compute"
            slot.computes.append(Compute(name, rid, collector, began, returned))
            wait_until(lambda rid=rid: sent_run_end(c, rid), f"run_end of {rid}")
    finally:
        unsubscribe()
        disconnect(c)
    slot.hook = [(spent, install) for _, spent, install in PROBES.hooked[hooked:]]
    slot.publisher_cpu = hub.publisher.cpu_time if hub is not None else math.nan
    return slot


# ---------------------------------------------------------------- lag
@dataclass
class Lags:
    rows: int = 0
    expected: int = 0  # rows applied in this process
    total: list[np.ndarray] = field(default_factory=list)
    flush: list[np.ndarray] = field(default_factory=list)  # stop -> batch made
    transport: list[np.ndarray] = field(default_factory=list)  # made -> applied here
    publish: list[np.ndarray] = field(default_factory=list)  # applied -> sent
    last_row: list[float] = field(default_factory=list)  # last row sent - returned
    run_end: list[float] = field(default_factory=list)  # run_end sent - returned
    dropped: int = 0
    messages: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    span: float = 0.0

    def add(self, c: RecordingComm, compute: Compute) -> None:
        mine = [(t, d, b) for t, d, b in c.sent if d.get("run") == compute.run]
        (t0,) = [float(d["t0"]) for _, d, _ in mine if d.get("type") == "run_start"]
        arrived = np.array(PROBES.arrived.get(compute.collector, []), np.float64).reshape(-1, 4)
        firsts = arrived[:, 0]
        self.expected += int(arrived[:, 1].sum())
        last = -math.inf
        for t, data, buffers in mine:
            kind = data.get("type")
            if kind == "run_end":
                self.run_end.append(t - compute.returned)
            elif kind == "dropped":
                self.dropped = max(self.dropped, int(data.get("rows", 0)))
            if kind != "tasks" or not data.get("n"):
                continue
            m = encode.decode(data, buffers)
            stop = t0 + m["times"]["stop"]
            index = int(m["first"]) + np.arange(m["n"])
            batch = np.searchsorted(firsts, index, side="right") - 1
            applied, made = arrived[batch, 2], arrived[batch, 3]
            self.total.append(t - stop)
            self.flush.append(made - stop)
            self.transport.append(applied - made)
            self.publish.append(t - applied)
            self.rows += int(m["n"])
            last = max(last, t)
        self.last_row.append(last - compute.returned)
        self.messages += len(mine)
        self.kinds.update(d.get("type", "?") for _, d, _ in mine)
        self.span += max(t for t, _, _ in mine) - min(t for t, _, _ in mine)


def _ms(values: list[np.ndarray]) -> str:
    x = 1000 * np.concatenate(values) if values else np.array([math.nan])
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return f"p50 {p50:6.0f}   p90 {p90:6.0f}   p99 {p99:6.0f}   max {x.max():6.0f} ms"


# ---------------------------------------------------------------- statistics
def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of ``values``: the order
    statistics ``k`` and ``n - k + 1`` with ``P(Binomial(n, 1/2) < k) <= (1 - level) / 2``
    (the range when ``n`` is too small for ``level``)."""
    xs = sorted(values)
    n = len(xs)
    tail, k = 0.0, 0
    while k < n // 2:
        tail += math.comb(n, k) / 2**n
        if tail > (1 - level) / 2:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def spread(values: list[float], unit: str = "%") -> str:
    lo, hi = median_ci(values)
    med = statistics.median(values)
    return f"{med:+.1f}{unit} (95% CI of the median {lo:+.1f}..{hi:+.1f}{unit}, n={len(values)})"


# ---------------------------------------------------------------- CPU
def worker_meter(dask_worker: Any) -> float:
    """(On a worker) meter the ``transition`` hook of the panel's worker plugins not metered
    yet; returns the CPU seconds spent in them so far."""
    meter = getattr(dask_worker, "_bench_meter", None)
    if meter is None:
        meter = dask_worker._bench_meter = Meter()
        dask_worker._bench_metered = set()
    for name, plugin in dask_worker.plugins.items():
        if name.startswith("daskprofile-") and id(plugin) not in dask_worker._bench_metered:
            dask_worker._bench_metered.add(id(plugin))
            meter.wrap(plugin, "transition")
    return float(meter.cpu)


def cpu_section(
    cluster: LocalCluster, client: Client, n: int, names: list[str]
) -> dict[str, dict[str, float]]:
    """Scheduler-plugin CPU per task: the panel's plugin, then distributed's task stream;
    and the worker plugin's ``transition``, this process's router and publisher thread
    CPU per task with the panel."""
    scheduler = cluster.scheduler
    out: dict[str, dict[str, float]] = {}
    meter, seen = Meter(), set[str]()
    c = connect()
    hub = dpcomm.hub()
    started: list[str] = []
    unsubscribe = history.subscribe(on_start=lambda run, _: started.append(str(run.meta.id)))

    def wrap_new(client: Any, keys: Any) -> None:
        """(A watch listener after the panel's: a plugin it installed is there by now.)"""
        meter.wrap_plugins(scheduler, "daskprofile-", seen)
        client.run(worker_meter)

    watch.add_listener(wrap_new)
    try:
        for name in names:
            before, routed = (meter.raw, meter.calls), len(PROBES.routed)
            cpu0 = hub.publisher.cpu_time if hub is not None else math.nan
            workers0 = sum(client.run(worker_meter).values())
            WORKLOADS[name](client, n)
            wait_until(lambda: sent_run_end(c, started[-1]), "run_end")
            workers = sum(client.run(worker_meter).values()) - workers0
            rows = sum(r for _, r, _ in PROBES.routed[routed:])
            cost = meter.raw - before[0] - (meter.calls - before[1]) * wrapper_cost()
            router = sum(cpu for _, _, cpu in PROBES.routed[routed:])
            cpu1 = hub.publisher.cpu_time if hub is not None else math.nan
            out[name] = {
                "tasks": rows,
                "plugin": cost / max(rows, 1),
                "router": router / max(rows, 1),
                "publisher": (cpu1 - cpu0) / max(rows, 1),
                "worker plugin": workers / max(rows, 1),
            }
    finally:
        watch.remove_listener(wrap_new)
        unsubscribe()
        disconnect(c)
    with get_task_stream(client):  # adds distributed's plugin on first use
        pass
    stream = Meter()
    stream.wrap_plugins(scheduler, "task-stream", set())
    for name in names:
        before = (stream.raw, stream.calls)
        with get_task_stream(client) as ts:
            WORKLOADS[name](client, n)
        cost = stream.raw - before[0] - (stream.calls - before[1]) * wrapper_cost()
        out[name]["stream"] = cost / max(len(ts.data), 1)
        out[name]["stream_tasks"] = len(ts.data)
    return out


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5, help="panel rounds counted (default 5)")
    ap.add_argument("--workloads", default="map,array", help="comma-separated: map,array")
    ap.add_argument("--no-cpu", action="store_true", help="skip the scheduler-CPU section")
    ap.add_argument("--quick", action="store_true", help="1,000 tasks, 2 rounds: < 1 min")
    ap.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dask config for the whole run, e.g. daskprofile.panel.rate=1000 (repeatable)",
    )
    args = ap.parse_args()
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--config {item!r}: expected KEY=VALUE")
        try:
            parsed: Any = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = value
        dask.config.set({key: parsed})
    if args.quick:
        args.tasks, args.rounds = 1000, 2
    names = [w for w in args.workloads.split(",") if w]
    unknown = set(names) - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads {sorted(unknown)}; choose among {sorted(WORKLOADS)}")
    n = args.tasks
    install_probes()
    wall = perf_counter()
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=True,
            dashboard_address=":0",
            silence_logs=40,
        ) as cluster,
        Client(cluster) as client,
    ):
        global CLOCK
        CLOCK = CpuClock(client)
        try:
            warm = max(100, n // 4)  # imports, first plugin shipping: not counted
            run_slot(client, "bare", warm, names)
            run_slot(client, "panel", warm, names)
            slots = [run_slot(client, "bare", n, names)]
            for _ in range(args.rounds):
                slots.append(run_slot(client, "panel", n, names))
                slots.append(run_slot(client, "bare", n, names))
            cpu = None if args.no_cpu else cpu_section(cluster, client, n, names)
        finally:
            dpcomm.shutdown()
    report(slots, cpu, n, names, args, perf_counter() - wall)


def cpu_report(bare: list[Slot], panel: list[Slot], n: int, names: list[str]) -> None:
    """CPU per task during the computes (medians over the rounds): this process and the
    worker processes, and the thread groups where the panel adds more than 0.5 us/task."""
    if not any(s.cpu for s in bare):
        return
    print("  CPU during the compute, us per task (median of the rounds): bare -> panel")
    for name in names:
        groups = sorted({g for s in (*bare, *panel) for g in s.cpu.get(name, {})})

        def per_task(slots: list[Slot], group: str, name: str = name) -> float:
            return 1e6 * statistics.median(s.cpu[name].get(group, 0.0) for s in slots) / n

        whole = {
            side: (per_task(bare, f"{side}/(process)"), per_task(panel, f"{side}/(process)"))
            for side in ("kernel", "workers")
        }
        print(
            f"    {name:6} "
            + "   ".join(
                f"{'this process' if side == 'kernel' else 'worker processes'}"
                f" {b:7.1f} -> {p:7.1f} ({p - b:+.1f})"
                for side, (b, p) in whole.items()
            )
        )
        rows = []
        for group in groups:
            if group.endswith("/(process)"):
                continue
            b, p = per_task(bare, group), per_task(panel, group)
            if abs(p - b) > 0.5:
                rows.append((p - b, f"{group} {b:.1f} -> {p:.1f} ({p - b:+.1f})"))
        for _, text in sorted(rows, reverse=True):
            print(f"           {text}")


def report(
    slots: list[Slot],
    cpu: dict[str, dict[str, float]] | None,
    n: int,
    names: list[str],
    args: Any,
    wall: float,
) -> None:
    bare = [s for s in slots if s.kind == "bare"]
    panel = [s for s in slots if s.kind == "panel"]
    print(
        f"LocalCluster 2 workers x 2 threads (processes), ~{n:,} tasks per workload,"
        f" {len(panel)} panel rounds between {len(bare)} bare ones; {os.cpu_count()} cores,"
        f" load average {os.getloadavg()[0]:.1f}; benchmark {wall:.0f} s"
    )
    if args.config:
        print(f"dask config: {', '.join(args.config)}")
    print("slowdown with the panel connected (each panel compute vs the mean of its bare")
    print(f"neighbours; target <= +{SLOWDOWN_TARGET:.0f}%)")
    for name in names:
        b = [s.seconds[name] for s in bare]
        p = [s.seconds[name] for s in panel]
        around = [(x + y) / 2 for x, y in pairwise(b)]
        slow = [100 * (x / a - 1) for x, a in zip(p, around, strict=True)]
        tasks_s = n / statistics.median(b)
        print(
            f"  {name:6} bare {statistics.median(b):7.2f} s ({tasks_s:,.0f} tasks/s)"
            f"   panel {statistics.median(p):7.2f} s   slowdown {spread(slow)}"
        )
        print("         per round: " + " ".join(f"{x:+.1f}" for x in slow))
    cpu_report(bare, panel, n, names)
    b = [s.seconds["tiny"] for s in bare]
    p = [s.seconds["tiny"] for s in panel]
    around = [(x + y) / 2 for x, y in pairwise(b)]
    extra = [1000 * (x - a) for x, a in zip(p, around, strict=True)]
    hooks = [(1000 * spent, 1000 * install) for s in panel for spent, install in s.hook]
    cold = [h for h in hooks if h[1] > 0]
    warm = [spent for spent, install in hooks if install == 0]
    print(
        f"  first graph after the panel connects (one task): bare"
        f" {1000 * statistics.median(b):.0f} ms, panel {spread(extra, ' ms')} more"
    )
    print(
        f"  submission hook: {len(cold)} of {len(hooks)} graphs installed the plugins"
        f" (the first of a round, or after idle-stop = {panel_config('idle-stop')}): median"
        f" {statistics.median(s for s, _ in cold):.0f} ms (max {max(s for s, _ in cold):.0f}),"
        f" of which installing {statistics.median(i for _, i in cold):.0f} ms;"
    )
    if warm:
        print(f"    the others {statistics.median(warm):.1f} ms (max {max(warm):.1f} ms)")
    lags = Lags()
    for s in panel:
        assert s.comm is not None
        for compute in s.computes:
            if compute.workload != "tiny":
                lags.add(s.comm, compute)
    print(
        f"lag of what the panel was sent (send time - task stop), {lags.rows:,} rows"
        f" ({lags.expected:,} recorded, {lags.dropped} dropped);"
        f" target <= {LAG_TARGET * 1000:.0f} ms"
    )
    every = np.concatenate(lags.total) if lags.total else np.zeros(0)
    over = 100 * float(np.mean(every > LAG_TARGET)) if len(every) else math.nan
    print(f"  total                              {_ms(lags.total)}   ({over:.2f}% over)")
    print(f"    stop -> batch made (worker)      {_ms(lags.flush)}")
    print(f"    batch made -> applied (kernel)   {_ms(lags.transport)}")
    print(f"    applied -> sent (publisher)      {_ms(lags.publish)}")
    last = [1000 * x for x in lags.last_row]
    end = [1000 * x for x in lags.run_end]
    print(
        f"  after the compute returned (negative: before): last row sent"
        f" {statistics.median(last):+.0f} ms"
        f" (max {max(last):+.0f}), run_end sent {statistics.median(end):+.0f} ms"
        f" (max {max(end):+.0f})"
    )
    rate = lags.messages / max(lags.span, 1e-9)
    print(f"  messages {lags.messages} over {lags.span:.1f} s of streaming = {rate:.1f}/s:")
    mix = ", ".join(f"{k} {v / lags.span:.1f}" for k, v in lags.kinds.most_common())
    print(f"    per second: {mix}")
    pub = [s.publisher_cpu for s in panel]
    total = sum(s.seconds[name] for s in panel for name in names) / len(panel)
    print(
        f"  publisher thread CPU per panel round {statistics.median(pub):.3f} s"
        f" ({100 * statistics.median(pub) / total:.1f}% of the round's computes)"
    )
    if cpu is None:
        return
    print("CPU per task (thread_time): scheduler plugin vs distributed's TaskStreamPlugin")
    for name, c in cpu.items():
        print(
            f"  {name:6} daskprofile plugin {1e6 * c['plugin']:6.2f} us   task stream"
            f" {1e6 * c['stream']:6.2f} us   ratio {c['plugin'] / c['stream']:4.2f}x"
            f"   ({c['tasks']:,.0f} / {c['stream_tasks']:,.0f} tasks)"
        )
        print(
            f"         worker plugin (transition) {1e6 * c['worker plugin']:6.2f} us; in this"
            f" process: router (event loop) {1e6 * c['router']:6.2f} us, publisher thread"
            f" {1e6 * c['publisher']:6.2f} us"
        )


if __name__ == "__main__":
    main()
