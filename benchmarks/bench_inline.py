"""Size and build time of the magic's inline view: light (the panel's views) vs bokeh.

    .venv/bin/python benchmarks/bench_inline.py

Profiles graphs of trivial tasks with the threaded scheduler and prints, per size, the
bytes a notebook grows by per profiled cell with the light view (the default: the bundle
of the panel's views + the run's reduced messages) and with the bokeh snapshot (the
anchor: ``--view bokeh``, the view before issue 17), their ratio, the bundle's share of the
light view, and the time to build each. The first bokeh row includes bokeh's import.
"""

from __future__ import annotations

import time

import dask.threaded

from daskprofile import profile
from daskprofile.jupyter.inline import bundle, inline_html


def _noop(x: int) -> int:
    return x


def _timed(run: object, kind: str) -> tuple[int, float]:
    start = time.perf_counter()
    view = inline_html(run, kind=kind)
    return len(view.encode()), time.perf_counter() - start


def main() -> None:
    script = len(bundle().encode())
    print(f"light view bundle: {script / 1e3:.1f} KB (once per output)")
    print(
        f"{'tasks':>8}{'light KB':>10}{'bokeh KB':>10}{'light/bokeh':>13}"
        f"{'bundle share':>14}{'light s':>9}{'bokeh s':>9}"
    )
    for n in (40, 10_000, 100_000):
        graph = {("noop-5f3e0c0d", i): (_noop, i) for i in range(n)}
        with profile() as run:
            dask.threaded.get(graph, list(graph))
        light, light_s = _timed(run, "light")
        bokeh, bokeh_s = _timed(run, "bokeh")
        print(
            f"{n:>8,}{light / 1e3:>10.1f}{bokeh / 1e3:>10.1f}{light / bokeh:>13.2f}"
            f"{script / light:>14.0%}{light_s:>9.2f}{bokeh_s:>9.2f}"
        )


if __name__ == "__main__":
    main()
