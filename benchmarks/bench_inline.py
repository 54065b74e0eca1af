"""Size and render time of the magic's inline view (``daskprofile.jupyter.inline``).

    .venv/bin/python benchmarks/bench_inline.py

Profiles graphs of trivial tasks with the threaded scheduler and prints, per size, the
inline view's bytes (how much a notebook grows per profiled cell), the share that is
BokehJS, and the time to build it. The first row includes bokeh's import.
"""

from __future__ import annotations

import time

import dask.threaded

from daskprofile import profile
from daskprofile.jupyter.inline import inline_html


def _noop(x: int) -> int:
    return x


def main() -> None:
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.models import Div
    from bokeh.resources import INLINE

    bokeh_js = len(bundle_for_objs_and_resources([Div()], INLINE).scripts())
    print(f"{'tasks':>8}{'inline view':>14}{'BokehJS share':>15}{'build s':>9}")
    for n in (40, 10_000, 100_000):
        graph = {("noop-5f3e0c0d", i): (_noop, i) for i in range(n)}
        with profile() as run:
            dask.threaded.get(graph, list(graph))
        start = time.perf_counter()
        view = inline_html(run)
        seconds = time.perf_counter() - start
        print(f"{n:>8,}{len(view) / 1e6:>11.2f} MB{bokeh_js / len(view):>14.0%}{seconds:>9.2f}")


if __name__ == "__main__":
    main()
