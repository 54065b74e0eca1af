"""HTML snapshot: write time, file size and headless-Chromium render time, vs dask.

One real compute of N trivial tasks (threads scheduler) is recorded at once by
``daskprofile.profile()`` and by dask's ``Profiler``; then each side writes its HTML:

- ours: ``to_html(run)`` (BokehJS inlined, level of detail beyond 50k tasks);
- dask: ``Profiler.visualize()`` as shipped (BokehJS from a CDN) and with ``mode="inline"``.

Each file is opened in headless Chromium with every non-file request refused (offline),
timed until every Bokeh document is idle.

    PYTHONPATH=python .venv/bin/python benchmarks/bench_html.py --tasks 100000
    PYTHONPATH=python .venv/bin/python benchmarks/bench_html.py --tasks 1000000 --no-dask-render
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask
from dask.diagnostics import Profiler

import daskprofile
from daskprofile.export import to_html

CHROMIUM = os.environ.get("DASKPROFILE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
BATCH = 1000


def inc(x: int) -> int:
    return x + 1


def graph(n: int) -> tuple[dict[Any, Any], str]:
    """``n`` inc tasks, summed by batches of 1000, then a total."""
    token = "5f3e0c0d9a1b2c3d4e5f60718293a4b5"
    dsk: dict[Any, Any] = {(f"inc-{token}", i): (inc, i) for i in range(n)}
    sums = []
    for j, lo in enumerate(range(0, n, BATCH)):
        key = (f"sum-{token}", j)
        dsk[key] = (sum, [(f"inc-{token}", i) for i in range(lo, min(lo + BATCH, n))])
        sums.append(key)
    dsk["total"] = (sum, sums)
    return dsk, "total"


def record(n: int) -> tuple[Any, Profiler, float]:
    """One compute, recorded by both sides at once."""
    dsk, out = graph(n)
    t = time.perf_counter()
    with daskprofile.profile() as run, Profiler() as prof:
        dask.threaded.get(dsk, out, num_workers=os.cpu_count())
    return run, prof, time.perf_counter() - t


def timed(write: Callable[[], object]) -> float:
    gc.collect()
    t = time.perf_counter()
    write()
    return time.perf_counter() - t


def render_seconds(path: Path, timeout_s: float = 120.0) -> str:
    """Seconds from navigation until every Bokeh document is idle, offline; or why not."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:")) else r.abort())  # noqa: E501  # fmt: skip
            t = time.perf_counter()
            page.goto(path.as_uri(), timeout=timeout_s * 1000)
            try:
                page.wait_for_function(
                    "() => window.Bokeh && Bokeh.documents.length > 0 && "
                    "Bokeh.documents.every(d => d.is_idle)",
                    timeout=timeout_s * 1000,
                )
            except PlaywrightError:
                has = page.evaluate("() => typeof window.Bokeh")
                return "blank (BokehJS not loaded offline)" if has == "undefined" else "timeout"
            return f"{time.perf_counter() - t:.2f} s"
        finally:
            browser.close()


def warm_up() -> None:
    """Import bokeh once so neither side's write time includes it (~0.7 s)."""
    import bokeh.embed
    import bokeh.models
    import bokeh.plotting  # noqa: F401


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--no-render", action="store_true", help="skip Chromium timings")
    parser.add_argument("--no-dask", action="store_true", help="skip dask's visualize")
    parser.add_argument("--no-dask-render", action="store_true", help="skip dask in Chromium")
    parser.add_argument("--save", help="also save the run there (for --load)")
    parser.add_argument("--load", help="time ours only, on a run saved by --save")
    args = parser.parse_args()

    if args.load:
        run, prof = daskprofile.load(args.load), None
        print(f"{len(run.tasks):,} tasks loaded from {args.load}")
    else:
        run, prof, compute = record(args.tasks)
        print(f"{len(run.tasks):,} tasks recorded (dask's Profiler: {len(prof.results):,}), "
              f"compute {compute:.1f} s")  # fmt: skip
        if args.save:
            run.save(args.save)
    n = len(run.tasks)
    warm_up()
    rows: list[tuple[str, float, int, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ours = Path(tmp, "daskprofile.html")
        seconds = timed(lambda: to_html(run, ours))
        render = "-" if args.no_render else render_seconds(ours)
        rows.append(("daskprofile to_html (inline)", seconds, ours.stat().st_size, render))
        if prof is not None and not args.no_dask:
            for label, mode in (("dask visualize (default: CDN)", None),
                                ("dask visualize mode='inline'", "inline")):  # fmt: skip
                path = Path(tmp, f"dask-{mode}.html")
                seconds = timed(lambda p=path, m=mode: prof.visualize(  # type: ignore[misc]
                    filename=str(p), show=False, save=True, mode=m))  # fmt: skip
                skip = args.no_render or args.no_dask_render
                rows.append(
                    (label, seconds, path.stat().st_size, "-" if skip else render_seconds(path))
                )
    print(f"\n{'':32} {'write':>8} {'size':>10} {'B/task':>7}  render offline")
    for label, seconds, size, render in rows:
        print(f"{label:32} {seconds:7.2f}s {size / 1e6:8.2f}MB {size / n:7.1f}  {render}")
    if len(rows) > 1:
        base = rows[0]
        for label, seconds, size, _ in rows[1:]:
            print(f"ratio ours/{label}: write {base[1] / seconds:.2f}x, size {base[2] / size:.2f}x")


if __name__ == "__main__":
    main()
