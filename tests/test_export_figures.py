"""``daskprofile.visualize``: dask's API and figures, daskprofile's drawing, offline files."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

import dask
import pytest
from bokeh.models import GlyphRenderer

import daskprofile
from daskprofile import CacheProfiler, Profiler, ResourceProfiler, StackProfiler, visualize
from test_export_html import IMG, assert_rendered


def chain(n: int, key: str = "inc") -> dict[Any, Any]:
    dsk: dict[Any, Any] = {(key, 0): 0}
    dsk.update({(key, i): (operator.add, (key, i - 1), 1) for i in range(1, n)})
    return dsk


def glyphs(fig: Any) -> list[Any]:
    return [r for r in fig.renderers if isinstance(r, GlyphRenderer)]


def test_many_tasks_all_profilers_one_offline_file(tmp_path: Path, open_offline: Any) -> None:
    dsk = chain(10_000)
    dsk[IMG] = (len, [("inc", 9_999)])
    path = tmp_path / "all.html"
    with Profiler() as prof, ResourceProfiler(dt=0.01) as rprof, CacheProfiler() as cprof:
        dask.get(dsk, IMG)
    grid = visualize([prof, rprof, cprof], filename=path, show=False, save=True)
    figures = [child[0] for child in grid.children]
    assert [f.title.text if f.title else None for f in figures] == ["Task stream", None, None]
    assert figures[-1].xaxis[0].axis_label == "Time (s)"
    assert all(f.x_range is figures[0].x_range for f in figures)
    # one cache line per group plus the total, not one per task (dask: 10,001 lines)
    assert len(glyphs(figures[2])) <= 3
    assert path.stat().st_size < 3_000_000
    assert IMG not in path.read_text()  # the key travels as escaped data only
    opened = open_offline(path)
    assert_rendered(opened)


def test_stack_profiler_draws_a_flame_graph(tmp_path: Path, open_offline: Any) -> None:
    def spin() -> int:
        return sum(range(3_000_000))

    with Profiler() as prof, StackProfiler(interval=0.005) as sprof:
        dask.delayed(spin)().compute(scheduler="threads")
    layout = visualize([prof, sprof], filename=tmp_path / "s.html", show=False, save=True)
    assert len(layout.children) == 2
    assert_rendered(open_offline(tmp_path / "s.html"))


def test_save_none_outside_a_notebook_writes_profile_html(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Profiler() as prof:
        dask.get(chain(3), ("inc", 2))
    fig = prof.visualize(show=False, width=640)
    assert fig.width == 640
    text = (tmp_path / "profile.html").read_text()
    assert "cdn.bokeh.org" not in text  # BokehJS inlined: opens offline
    prof.visualize(show=False, filename=tmp_path / "cdn.html", mode="cdn")
    assert "cdn.bokeh.org" in (tmp_path / "cdn.html").read_text()


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="profilers"):
        visualize([object()], show=False, save=False)
    with Profiler() as prof:
        dask.get(chain(2), ("inc", 1))
    with pytest.raises(ValueError, match="mode"):
        visualize(prof, show=False, save=True, mode="nope")
    with pytest.raises(AttributeError, match="not_a_figure_option"):
        visualize(prof, show=False, save=False, not_a_figure_option=1)


def test_dask_options_are_accepted() -> None:
    with Profiler() as prof:
        dask.get(chain(5), ("inc", 4))
    fig = visualize(prof, show=False, save=False, palette="Viridis", label_size=40)
    assert fig.title.text == "Task stream"
    assert daskprofile.visualize is visualize
