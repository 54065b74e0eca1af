"""A cluster run's HTML snapshot beside distributed's ``performance_report`` of the same run.

    PYTHONPATH=python .venv/bin/python benchmarks/bench_cluster_snapshot.py [--size 4160]
        [--chunk 20] [--repeat 1] [--no-render]

One ``LocalCluster`` of 2 worker processes x 2 threads. The compute is ``(x + x.T).sum()``
over a ``--size`` square array in ``--chunk`` blocks (~2.3 tasks per block after
optimisation: ~100k tasks by default): each block and each sum needs blocks often held by
the other worker, so many tasks fetch their inputs first (transfers) while the workers hold
the blocks (memory samples). The same compute runs, taking turns, recorded by:

* ours: ``daskprofile.profile(client=client)``, then ``run.to_html(path)`` (BokehJS
  inlined; level of detail keeps the file bounded by pixels, not tasks);
* distributed: ``distributed.performance_report(filename=path)`` (BokehJS from a CDN, as
  shipped); the time it adds is the time its ``__exit__`` takes (it fetches the task
  stream, bandwidth and profiles from the scheduler and writes the file);
* a bare compute, for the cost of recording.

Targets (issue 15): our snapshot <= 6 MB, written in <= 3 s. Printed: each file's size and
write time, ratios, what the run holds (rows of tasks, actions, transfers, memory samples),
and whether each file renders offline in headless Chromium (with no console error).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import dask.array as da
import distributed

import daskprofile

#: distributed's API is untyped: used through Any
dist: Any = distributed

CHROMIUM = os.environ.get("DASKPROFILE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
IDLE = "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents.every(d => d.is_idle)"
TARGET_MB = 6.0
TARGET_WRITE_S = 3.0


def workload(size: int, chunk: int) -> Any:
    """``(x + x.T).sum()``, ``x`` an outer product: each block of ``x`` is made from two
    blocks of a vector and meets its mirror, both often on the other worker. (A random
    ``x`` ships a generator state per block: a 100 MB graph, half the speed.)"""
    v = da.arange(size, chunks=chunk, dtype=float)
    with warnings.catch_warnings():  # (the outer product has as many blocks as it should)
        warnings.simplefilter("ignore", da.PerformanceWarning)
        x = v[:, None] * v[None, :] / size
    return (x + x.T).sum()


def bare(client: Any, size: int, chunk: int) -> dict[str, float]:
    t = time.perf_counter()
    client.compute(workload(size, chunk)).result()
    return {"compute": time.perf_counter() - t}


def ours(client: Any, size: int, chunk: int, path: Path, save: str | None = None) -> dict[str, Any]:
    """Record with ``profile(client=...)``, then write the snapshot (and save the run)."""
    t = time.perf_counter()
    with daskprofile.profile(client=client) as run:
        client.compute(workload(size, chunk)).result()
        t_exit = time.perf_counter()
    done = time.perf_counter()
    gc.collect()
    w = time.perf_counter()
    run.to_html(path)
    write = time.perf_counter() - w
    if save:
        run.save(save)
    counts = {
        "tasks": len(run.tasks),
        "actions": len(run.actions),
        "transfers": len(run.transfers),
        "memory": len(run.memory),
    }
    actions = run.actions["action"].value_counts().to_dict() if counts["actions"] else {}
    return {
        "compute": t_exit - t,
        "exit": done - t_exit,
        "write": write,
        "size": path.stat().st_size,
        "counts": counts,
        "kinds": actions,
        "workers": len(run.workers),
    }


def report(client: Any, size: int, chunk: int, path: Path) -> dict[str, Any]:
    """distributed's ``performance_report`` around the same compute."""
    rep = dist.performance_report(filename=str(path))
    t = time.perf_counter()
    rep.__enter__()
    client.compute(workload(size, chunk)).result()
    t_exit = time.perf_counter()
    rep.__exit__(None, None, None)
    done = time.perf_counter()
    return {"compute": t_exit - t, "exit": done - t_exit, "size": path.stat().st_size}


def render(path: Path, timeout_s: float = 120.0) -> str:
    """Seconds until every Bokeh document is idle, offline, and the console's errors."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("console", lambda m: _console(errors, m))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:")) else r.abort())  # noqa: E501  # fmt: skip
            t = time.perf_counter()
            page.goto(path.as_uri(), timeout=timeout_s * 1000)
            try:
                page.wait_for_function(IDLE, timeout=timeout_s * 1000)
            except PlaywrightError:
                has = page.evaluate("() => typeof window.Bokeh")
                return "blank (BokehJS not loaded offline)" if has == "undefined" else "timeout"
            seconds = time.perf_counter() - t
            tabs = page.evaluate(
                "() => [...document.querySelectorAll('*')].flatMap(e => e.shadowRoot ?"
                " [...e.shadowRoot.querySelectorAll('.bk-tab')].map(t => t.textContent) : [])"
            )
            status = (
                "no console error" if not errors else f"{len(errors)} console errors: {errors[:2]}"
            )
            return f"{seconds:.2f} s, {status}, tabs {tabs}"
        finally:
            browser.close()


def _console(errors: list[str], message: Any) -> None:
    if message.type == "error":
        errors.append(message.text)


def warm_up() -> None:
    """Import bokeh once so neither side's write time includes it (~0.7 s)."""
    import bokeh.embed
    import bokeh.models
    import bokeh.plotting  # noqa: F401


def write_only(path: str, repeat: int) -> None:
    """Time ``to_html`` alone on a saved run (no cluster)."""
    run = daskprofile.load(path)
    counts = {"tasks": len(run.tasks), "actions": len(run.actions)}
    counts.update(transfers=len(run.transfers), memory=len(run.memory))
    print("the run holds: " + ", ".join(f"{v:,} {k}" for k, v in counts.items()))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "daskprofile.html")
        for _ in range(repeat):
            gc.collect()
            t = time.perf_counter()
            run.to_html(out)
            seconds = time.perf_counter() - t
            print(f"to_html {seconds:.2f} s, {out.stat().st_size / 1e6:.2f} MB")


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=4160, help="side of the square array")
    parser.add_argument("--chunk", type=int, default=20, help="side of its blocks")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the three computes")
    parser.add_argument("--no-render", action="store_true", help="skip Chromium")
    parser.add_argument("--keep", help="copy our last snapshot there")
    parser.add_argument("--save", help="save our last run there (daskprofile.load, --load)")
    parser.add_argument("--load", help="only time to_html on a run saved by --save")
    args = parser.parse_args()
    # distributed warns of every ~100k-task graph it is sent: expected here
    warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
    warm_up()
    if args.load:
        write_only(args.load, args.repeat)
        return
    mine: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    plain: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp, dist.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0"
    ) as cluster, dist.Client(cluster) as client:  # fmt: skip
        ours_path, theirs_path = Path(tmp, "daskprofile.html"), Path(tmp, "dask-report.html")
        client.compute(workload(args.size // 4, args.chunk)).result()  # warm the workers
        for r in range(args.repeat):
            turns = ("ours", "report", "bare") if r % 2 == 0 else ("report", "ours", "bare")
            for turn in turns:
                if turn == "ours":
                    mine.append(ours(client, args.size, args.chunk, ours_path, args.save))
                elif turn == "report":
                    theirs.append(report(client, args.size, args.chunk, theirs_path))
                else:
                    plain.append(bare(client, args.size, args.chunk))
            a, b, c = (x[-1]["compute"] for x in (mine, theirs, plain))
            print(f"round {r + 1}: compute ours {a:.1f} s, report {b:.1f} s, bare {c:.1f} s")
        renders = ("-", "-")
        if not args.no_render:
            renders = (render(ours_path), render(theirs_path))
        if args.keep:
            Path(args.keep).write_bytes(ours_path.read_bytes())
    last = mine[-1]
    n = last["counts"]["tasks"]
    print(f"\nLocalCluster 2 workers x 2 threads, (x + x.T).sum() of {args.size}^2 in "
          f"{args.chunk}^2 blocks; medians of {args.repeat} round(s)")  # fmt: skip
    print("the run holds: " + ", ".join(f"{v:,} {k}" for k, v in last["counts"].items())
          + f" (actions: {last['kinds']}), {last['workers']} workers")  # fmt: skip
    base = median(plain, "compute")
    our_mb, their_mb = median(mine, "size") / 1e6, median(theirs, "size") / 1e6
    our_write = median(mine, "write")
    their_exit = median(theirs, "exit")
    print(f"\n{'':36} {'size':>9} {'B/task':>7} {'write':>8} {'compute':>9}  render offline")
    print(f"{'daskprofile run.to_html (inline)':36} {our_mb:7.2f}MB {our_mb * 1e6 / n:7.1f} "
          f"{our_write:7.2f}s {median(mine, 'compute'):8.1f}s  {renders[0]}")  # fmt: skip
    print(f"{'  (profile exit: last rows in)':36} {'':9} {'':7} {median(mine, 'exit'):7.2f}s")
    print(f"{'distributed performance_report':36} {their_mb:7.2f}MB {their_mb * 1e6 / n:7.1f} "
          f"{their_exit:7.2f}s {median(theirs, 'compute'):8.1f}s  {renders[1]}")  # fmt: skip
    print(f"{'bare compute':36} {'':9} {'':7} {'':8} {base:8.1f}s")
    print(f"\nratio ours/performance_report: size {our_mb / their_mb:.2f}x, "
          f"write {our_write / their_exit:.2f}x (to_html vs report's exit)")  # fmt: skip
    print(
        f"recording cost: ours {median(mine, 'compute') - base:+.1f} s, performance_report "
        f"{median(theirs, 'compute') - base:+.1f} s over the bare compute (noisy: a compute "
        f"of {base:.0f} s varies by several seconds from one run to the next here)"
    )
    size_ok = "met" if our_mb <= TARGET_MB else "MISSED"
    write_ok = "met" if our_write <= TARGET_WRITE_S else "MISSED"
    print(f"targets: size <= {TARGET_MB:g} MB {size_ok}, write <= {TARGET_WRITE_S:g} s {write_ok}")


if __name__ == "__main__":
    main()
