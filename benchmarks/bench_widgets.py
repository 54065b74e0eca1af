"""Progress bar cost per task in a real IPython kernel, side by side with dask's.

    .venv/bin/python benchmarks/bench_widgets.py [--tasks 50000] [--rounds 5]

Starts a kernel with jupyter_client and, inside it, times the threaded scheduler on a
graph of trivial tasks: bare, under dask's text ``ProgressBar`` (writing to the kernel's
stdout), under daskprofile's hook with an empty callback (the core's fixed price of any
daskprofile callback), and under ``daskprofile.ProgressBar`` (the ipywidget bar in a
kernel). Variants are interleaved round by round; medians are printed as us/task over
bare, and as ratios to dask's bar. The kernel's IOPub messages are counted per variant
(the widget bar must send a bounded number, not one per task).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from jupyter_client.manager import start_new_kernel

KERNEL_CODE = r"""
import json, time, io, sys
import dask, dask.threaded
from dask.diagnostics import ProgressBar as DaskBar
import daskprofile
from daskprofile.callbacks import Callback

def _noop(x):
    return x

N = {tasks}
graph = {{("t", i): (_noop, i) for i in range(N)}}
keys = list(graph)

def _empty():
    class Empty(Callback):
        def _start(self, dsk):
            pass
    return Empty()

VARIANTS = {{
    "bare": None,
    "dask ProgressBar": lambda: DaskBar(),
    "daskprofile hook only": _empty,
    "daskprofile.ProgressBar": lambda: _keep(daskprofile.ProgressBar()),
}}
BARS = []

def _keep(bar):
    BARS.append(bar)
    return bar


def _time(make):
    start, cpu = time.perf_counter(), time.process_time()
    if make is None:
        dask.threaded.get(graph, keys)
    else:
        with make():
            dask.threaded.get(graph, keys)
    return [time.perf_counter() - start, time.process_time() - cpu]
"""

ROUND_CODE = "print('RESULT', json.dumps(_time(VARIANTS[{name!r}])))"
CHECK_CODE = "print('RESULT', json.dumps(type(daskprofile.ProgressBar()).__module__))"
OWN_CPU_CODE = "print('RESULT', json.dumps([b.own_cpu for b in BARS[1:]]))"


def run_code(client: Any, code: str, timeout: float = 600) -> tuple[Any, int]:
    """Execute ``code``; (the value printed after ``RESULT``, IOPub messages seen)."""
    msg_id = client.execute(code)
    result, messages = None, 0
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages += 1
        content = msg["content"]
        if msg["msg_type"] == "stream" and "RESULT" in content["text"]:
            line = next(x for x in content["text"].splitlines() if x.startswith("RESULT"))
            result = json.loads(line.split(" ", 1)[1])
        if msg["msg_type"] == "error":
            raise RuntimeError("\n".join(content["traceback"]))
        if msg["msg_type"] == "status" and content["execution_state"] == "idle":
            return result, messages


def measure(client: Any, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Interleaved rounds: seconds and IOPub message counts per variant."""
    names = ["bare", "dask ProgressBar", "daskprofile hook only", "daskprofile.ProgressBar"]
    out: dict[str, dict[str, list[float]]] = {n: {"s": [], "cpu": [], "msgs": []} for n in names}
    for r in range(rounds + 1):  # round 0 warms up imports, pools and caches
        for name in names if r % 2 else reversed(names):
            (seconds, cpu), messages = run_code(client, ROUND_CODE.format(name=name))
            if r:
                out[name]["s"].append(seconds)
                out[name]["cpu"].append(cpu)
                out[name]["msgs"].append(messages)
    return out


def _row(
    name: str,
    r: dict[str, list[float]],
    bare: dict[str, float],
    dask_cost: dict[str, float],
    tasks: int,
) -> str:
    cells = [f"{name:<26}"]
    for col in ("s", "cpu"):
        value = statistics.median(r[col])
        over = (value - bare[col]) / tasks * 1e6
        ratio = (value - bare[col]) / dask_cost[col] if dask_cost[col] > 0 else float("nan")
        cells.append(f"{value / tasks * 1e6:>9.1f}{over:>9.2f}{ratio:>8.2f}")
    cells.append(f"{int(statistics.median(r['msgs'])):>7}")
    return "".join(cells)


def report(results: dict[str, dict[str, list[float]]], tasks: int) -> None:
    """us/task (wall and kernel-process CPU), over bare, and as a ratio to dask's bar."""
    med = {name: {c: statistics.median(r[c]) for c in ("s", "cpu")} for name, r in results.items()}
    bare = med["bare"]
    dask_cost = {c: med["dask ProgressBar"][c] - bare[c] for c in ("s", "cpu")}
    print(f"threaded scheduler, {tasks:,} trivial tasks, real kernel; medians of rounds")
    print(f"{'':<26}{'--- wall us/task ---':>26}{'--- CPU us/task ---':>26}")
    print(f"{'variant':<26}" + f"{'total':>9}{'over':>9}{'/dask':>8}" * 2 + f"{'iopub':>7}")
    for name, r in results.items():
        print(_row(name, r, bare, dask_cost, tasks))
    for col, label in (("s", "wall"), ("cpu", "CPU")):
        extra = (med["daskprofile.ProgressBar"][col] - med["daskprofile hook only"][col]) / tasks
        print(f"widget bar over the hook alone ({label}): {extra * 1e6:.2f} us/task")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        run_code(client, KERNEL_CODE.format(tasks=args.tasks))
        kind, _ = run_code(client, CHECK_CODE)
        print(f"daskprofile.ProgressBar in the kernel: {kind}")
        report(measure(client, args.rounds), args.tasks)
        own, _ = run_code(client, OWN_CPU_CODE)
        per_task = statistics.median(own) / args.tasks * 1e6
        print(f"widget bar's own CPU (timer thread + callbacks, measured): {per_task:.2f} us/task")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
