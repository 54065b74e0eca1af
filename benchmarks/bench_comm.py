"""Cost of streaming to the lab panel: slowdown, bytes per task on the wire, lag.

    .venv/bin/python benchmarks/bench_comm.py [--tasks 100000] [--repeat 15] [--scheduler sync]
                                              [--no-gc]

One process. After a warm-up round that is not counted (a process's first profiled
computes also pay one-time imports and the growth of its heap: +10..+14% where later
ones read +5..+10%), the computes run as a chain bare, panel, bare, profile(), bare,
panel, ... so every panel and profile() compute sits between two bare ones, and its
ratio is taken against their mean: a shared machine's speed drifts over seconds, and a
ratio to both neighbours cancels a steady drift where a ratio to one neighbour does not.
The slowdown is the median of those ratios, printed with a distribution-free 95%
confidence interval of the median (order statistics of the binomial). The run history is
cleared before each connect, so what is measured is live streaming, not the replay of
earlier rounds' runs.
"panel" = a panel connected through the real comm handlers (``daskprofile.jupyter.comm``)
with a comm object that timestamps and keeps what it is given instead of writing to
IOPub - so the kernel side does everything it does for a real panel (auto-profiling
session: tasks + cache + resources + stacks; publisher thread: cursors, encoding, rate
limit). Messages are decoded as the browser decodes them (``encode.decode``, the
fixtures' format). Wire bytes are the comm payload (compact JSON data + raw buffers), and
with the Jupyter message envelope (header, parent header, metadata, comm id) as
``jupyter_client.Session`` serialises it.
Anchor: distributed's task-stream record (``TaskStreamPlugin``), pickled.
Garbage collection: a compute of 100k tasks spends ~30% of its time in Python's collector
(9 full collections of the graph, whose total varies by up to +-10% from one compute to the next,
with or without daskprofile); that spread, not our cost, is most of the spread of the
ratios. Every timed compute starts right after a full collection, so each starts from the
same collector state (otherwise whether a compute pays one full collection more depends on
what ran before it). The slowdown of the time spent outside the collector is printed too.
``--no-gc`` disables the collector during each timed compute to measure what streaming
itself costs; the default is what a user sees.
"""

from __future__ import annotations

import argparse
import gc
import math
import pickle
import statistics
import time
import uuid
from itertools import pairwise
from time import perf_counter
from typing import Any

import dask

import daskprofile
from daskprofile.jupyter import comm as dpcomm
from daskprofile.jupyter import encode
from daskprofile.record import history as recorder

#: an explicit profile() with the panel session's defaults (daskprofile.panel.*)
PANEL_LIKE: dict[str, Any] = {"dt": 0.2, "interval": 0.02}


class RecordingComm:
    """Stands for the panel's comm: keeps (send time, data, buffers), sends nothing."""

    def __init__(self) -> None:
        self.comm_id = uuid.uuid4().hex
        self.sent: list[tuple[float, dict[str, Any], list[bytes]]] = []
        self._close: Any = None

    def send(self, data: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        self.sent.append((perf_counter(), data, list(buffers or [])))

    def on_msg(self, cb: Any) -> None:
        pass

    def on_close(self, cb: Any) -> None:
        self._close = cb

    def close(self) -> None:
        pass


def inc(x: int) -> int:
    return x + 1


def graph(n: int, fan: int = 100) -> dict[Any, Any]:
    """``n`` trivial tasks summed by a tree of ``fan``-way sums (about ``n`` tasks in all)."""
    dsk: dict[Any, Any] = {("inc-bench", i): (inc, i) for i in range(n)}
    level, keys = 0, [("inc-bench", i) for i in range(n)]
    while len(keys) > 1:
        parts = [keys[i : i + fan] for i in range(0, len(keys), fan)]
        keys = [(f"sum-bench{level}", j) for j in range(len(parts))]
        dsk.update({k: (sum, p) for k, p in zip(keys, parts, strict=True)})
        level += 1
    dsk["total-bench"] = keys[0]
    return dsk


#: seconds each timed compute spent in garbage collection (the last compute's)
GC_SECONDS: list[float] = []
#: whether the collector is off during timed computes (``--no-gc``)
NO_GC = False


def _gc_timer() -> Any:
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(perf_counter())
        elif started:
            spent = perf_counter() - started.pop()
            if GC_SECONDS:
                GC_SECONDS[-1] += spent

    return on_gc


def compute(n: int, scheduler: str) -> float:
    dsk = graph(n)
    get = dask.base.named_schedulers[scheduler]
    GC_SECONDS.append(0.0)
    gc.collect()  # every compute starts from the same collector state
    if NO_GC:
        gc.disable()
    t = perf_counter()
    try:
        get(dsk, "total-bench")
        return perf_counter() - t
    finally:
        gc.enable()


def connect() -> RecordingComm:
    c = RecordingComm()
    meta = {"daskprofile_protocol": dpcomm.PROTOCOL_VERSION}
    dpcomm._on_open(c, {"metadata": meta, "content": {"data": {"type": "hello"}}})
    return c


def disconnect(c: RecordingComm) -> None:
    c._close({})
    dpcomm.shutdown()


def wait_for_run_end(c: RecordingComm, rid: str, timeout: float = 60) -> None:
    """Wait until run ``rid`` has been sent whole (its ``run_end``)."""
    deadline = time.monotonic() + timeout
    while not any(d.get("type") == "run_end" and d.get("run") == rid for _, d, _ in c.sent):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no run_end for {rid}")
        time.sleep(0.05)


def last_run_id() -> str:
    """The id of the run that finished last (the one the panel session just recorded)."""
    return str(recorder.history()[-1].meta["id"])


def envelope_bytes(data: dict[str, Any]) -> int:
    """Bytes of a comm_msg's Jupyter envelope around ``data`` (signed, serialised)."""
    from jupyter_client.session import Session

    session = Session(key=b"0" * 32)
    msg = session.msg("comm_msg", {"comm_id": uuid.uuid4().hex, "data": data})
    frames = session.serialize(msg)
    return sum(len(f) for f in frames) - encode.wire_size(data)


def distributed_record_bytes() -> int:
    """One task-stream record as distributed's TaskStreamPlugin keeps it, pickled."""
    record = {
        "key": "('inc-3d1f7b0e9a8c4b5d6e7f8a9b0c1d2e3f', 1234)",
        "name": "inc-3d1f7b0e9a8c4b5d6e7f8a9b0c1d2e3f",
        "worker": "tcp://127.0.0.1:40123",
        "status": "OK",
        "nbytes": 28,
        "type": pickle.dumps(int),
        "typename": "int",
        "metadata": {},
        "thread": 140234567890123,
        "startstops": (
            {"action": "compute", "start": 1767225600.123456, "stop": 1767225600.12349},
        ),
    }
    return len(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))


def analyse(c: RecordingComm, rid: str) -> dict[str, float]:
    """Bytes per task and lag of run ``rid``, from the messages decoded as the browser does
    (runs replayed from the history when the panel connected are left out)."""
    msgs = [(t, encode.decode(d, b), encode.wire_size(d, b)) for t, d, b in c.sent]
    (start,) = [m for _, m, _ in msgs if m["type"] == "run_start" and m["run"] == rid]
    t0 = start["t0"]
    mine = [(t, m, w) for t, m, w in msgs if m.get("run") == rid]
    tasks = [(t, m, w) for t, m, w in mine if m["type"] == "tasks"]
    rows = sum(m["n"] for _, m, _ in tasks)
    env = statistics.mean(envelope_bytes(dict(c.sent[0][1])) for _ in range(3))
    total = sum(w for _, _, w in mine)
    lags = [t - (t0 + float(m["times"]["stop"].min())) for t, m, _ in tasks if m["n"]]
    newest = [t - (t0 + float(m["times"]["stop"].max())) for t, m, _ in tasks if m["n"]]
    return {
        "rows": rows,
        "messages": len(mine),
        "tasks_messages": len(tasks),
        "tasks_bytes_per_task": sum(w for _, _, w in tasks) / rows,
        "all_bytes_per_task": total / rows,
        "all_bytes_per_task_env": (total + env * len(mine)) / rows,
        "lag_p50": statistics.median(lags),
        "lag_max": max(lags),
        "lag_newest_p50": statistics.median(newest),
        "duration": max(t for t, _, _ in mine) - min(t for t, _, _ in mine),
    }


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of ``values``: the order
    statistics ``k`` and ``n - k + 1`` with ``P(Binomial(n, 1/2) < k) <= (1 - level) / 2``
    (the widest interval, the range, when ``n`` is too small for ``level``)."""
    xs = sorted(values)
    n = len(xs)
    tail, k = 0.0, 0
    while k < n // 2:
        tail += math.comb(n, k) / 2**n  # P(X = k): fewer than k+1 values below the median
        if tail > (1 - level) / 2:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def _spread(values: list[float]) -> str:
    """Median and its 95% confidence interval (percent), as text."""
    lo, hi = median_ci(values)
    return f"{statistics.median(values):+.1f}% (95% CI of the median {lo:+.1f}..{hi:+.1f}%)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument(
        "--warmup", type=int, default=1, help="rounds run first and not counted (default 1)"
    )
    ap.add_argument("--scheduler", default="sync", choices=["sync", "threads", "processes"])
    ap.add_argument("--no-gc", action="store_true", help="no garbage collection while timed")
    args = ap.parse_args()
    n, sched = args.tasks, args.scheduler
    global NO_GC
    NO_GC = args.no_gc
    gc.callbacks.append(_gc_timer())
    compute(2000, sched)  # warm up
    bare: list[float] = []
    panel: list[float] = []
    prof: list[float] = []
    cpus: list[float] = []
    stats: dict[str, float] = {}
    gc_of: dict[str, list[float]] = {"bare": [], "panel": []}

    def run_bare() -> None:
        bare.append(compute(n, sched))
        gc_of["bare"].append(GC_SECONDS[-1])

    def run_panel() -> None:
        nonlocal stats
        recorder.clear_history()  # steady streaming: no replay of earlier repeats' runs
        c = connect()
        time.sleep(0.3)  # samplers up, hello sent
        panel.append(compute(n, sched))
        gc_of["panel"].append(GC_SECONDS[-1])
        rid = last_run_id()
        wait_for_run_end(c, rid)
        hub = dpcomm.hub()
        cpus.append(hub.publisher.cpu_time if hub is not None else float("nan"))
        stats = analyse(c, rid)
        disconnect(c)

    def run_profiled() -> None:
        with daskprofile.profile(**PANEL_LIKE):
            prof.append(compute(n, sched))

    for _ in range(args.warmup):  # imports, caches and the heap fill up: not counted
        run_bare()
        run_panel()
        run_profiled()
    for kept in (bare, panel, prof, cpus, *gc_of.values()):
        kept.clear()
    run_bare()
    for _ in range(args.repeat):  # each setup between two bare computes
        run_panel()
        run_bare()
        run_profiled()
        run_bare()
    around = [(a + b) / 2 for a, b in pairwise(bare)]
    slow = [100 * (p / around[2 * i] - 1) for i, p in enumerate(panel)]
    slow_prof = [100 * (p / around[2 * i + 1] - 1) for i, p in enumerate(prof)]
    bare_gc = [b - g for b, g in zip(bare, gc_of["bare"], strict=True)]
    around_gc = [(a + b) / 2 for a, b in pairwise(bare_gc)]
    slow_gc = [
        100 * ((p - g) / around_gc[2 * i] - 1)
        for i, (p, g) in enumerate(zip(panel, gc_of["panel"], strict=True))
    ]
    b, p, pr = (statistics.median(x) for x in (bare, panel, prof))
    gc_share = statistics.median(g / b for g, b in zip(gc_of["bare"], bare, strict=True))
    gc_note = (
        "garbage collection off while timed"
        if NO_GC
        else f"garbage collection {100 * gc_share:.0f}% of the bare compute"
    )
    print(
        f"{n:,} trivial tasks, scheduler={sched}, {args.repeat} rounds after"
        f" {args.warmup} not counted; {gc_note}"
    )
    print(f"  no panel          {b:8.3f} s   {n / b:>9,.0f} tasks/s (median)")
    print(f"  panel connected   {p:8.3f} s   {n / p:>9,.0f} tasks/s (median)")
    print(
        f"    slowdown {_spread(slow)}, each compute against the bare ones before and"
        " after it; target <= +10%"
    )
    print("    per round: " + " ".join(f"{x:+.1f}" for x in slow))
    if not NO_GC:
        print(f"    outside garbage collection: {_spread(slow_gc)}")
    print(f"  profile(), no panel {pr:6.3f} s   the collectors alone: {_spread(slow_prof)}")
    cpu = statistics.median(cpus)
    print(f"  publisher thread CPU {cpu:.3f} s = {100 * cpu / b:.1f}% of the bare compute")
    msgs_per_s = stats["messages"] / max(stats["duration"], 1e-9)
    print(
        f"  messages          {stats['messages']:.0f} ({stats['tasks_messages']:.0f} tasks)"
        f" over {stats['duration']:.2f} s = {msgs_per_s:.1f}/s; rows {stats['rows']:,.0f}"
    )
    anchor = distributed_record_bytes()
    print("bytes per task on the wire (decoded as the browser does)")
    print(f"  tasks messages only             {stats['tasks_bytes_per_task']:6.1f} B")
    print(f"  whole run (all message types)   {stats['all_bytes_per_task']:6.1f} B")
    print(f"  + Jupyter message envelopes     {stats['all_bytes_per_task_env']:6.1f} B")
    print(
        f"  distributed task-stream record  {anchor:6d} B pickled"
        f"   ratio {anchor / stats['all_bytes_per_task_env']:.1f}x"
    )
    print("lag of what was sent vs the kernel (send time - task stop)")
    print(
        f"  oldest row of a batch  p50 {1000 * stats['lag_p50']:6.0f} ms   max"
        f" {1000 * stats['lag_max']:6.0f} ms (target <= 500 ms)"
    )
    print(f"  newest row of a batch  p50 {1000 * stats['lag_newest_p50']:6.0f} ms")


if __name__ == "__main__":
    main()
