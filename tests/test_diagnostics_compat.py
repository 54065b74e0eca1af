"""Conformance: dask's own diagnostics tests, run against daskprofile's drop-ins.

The test files shipped inside the installed dask package are read at test time, their
imports of ``Callback``, ``Profiler``, ``ResourceProfiler``, ``CacheProfiler``,
``ProgressBar`` and ``visualize`` are pointed at daskprofile, and their test functions are
collected here (nothing is copied into this repository). Tests of dask-private helpers
(``unquote``, ``get_colors``, ``format_time``'s import path) are left out; the bokeh plot
tests run against daskprofile's figures.
"""

from __future__ import annotations

import importlib.util
import re
import types
from operator import add
from pathlib import Path
from typing import Any

import dask
import pytest
from dask.callbacks import Callback as DaskCallback

import daskprofile

DASK_TESTS = Path(importlib.util.find_spec("dask").origin).parent / "diagnostics" / "tests"  # type: ignore[arg-type, union-attr]

REWRITES = [
    (r"^from dask\.diagnostics import (.+)$", r"from daskprofile import \1"),
    (r"^from dask\.callbacks import Callback$", "from daskprofile import Callback"),
    (
        r"^(\s*)from dask\.diagnostics\.profile_visualize import visualize$",
        r"\1from daskprofile import visualize",
    ),
]

#: tests of dask-private helpers, not of the public behaviour
PRIVATE = {"test_unquote", "test_get_colors", "test_format_time"}


def rewrite(source: str) -> str:
    """dask's test source with the public diagnostics imports pointed at daskprofile."""
    for pattern, replacement in REWRITES:
        source = re.sub(pattern, replacement, source, flags=re.MULTILINE)
    return source


def load(filename: str) -> types.ModuleType:
    """Execute a rewritten dask test file as a module."""
    path = DASK_TESTS / filename
    module = types.ModuleType(f"dask_compat_{path.stem}")
    module.__file__ = str(path)
    code = compile(rewrite(path.read_text()), str(path), "exec")
    exec(code, module.__dict__)
    return module


def collect(filename: str, prefix: str) -> dict[str, Any]:
    """The test functions of a dask test file, renamed with ``prefix``."""
    module = load(filename)
    out = {}
    for name, fn in vars(module).items():
        if not name.startswith("test_") or not callable(fn) or name in PRIVATE:
            continue
        out[f"test_{prefix}_{name[5:]}"] = fn
    return out


def test_imports_point_at_daskprofile() -> None:
    for filename in ("test_profiler.py", "test_progress.py"):
        module = load(filename)
        for name in ("Profiler", "CacheProfiler", "ResourceProfiler", "ProgressBar"):
            if name in vars(module):
                assert vars(module)[name] is getattr(daskprofile, name)


globals().update(collect("test_profiler.py", "dask_profiler"))
globals().update(collect("test_progress.py", "dask_progress"))


def test_dasks_own_visualize_plots_daskprofile_profilers(tmp_path: Path) -> None:
    """A user who swaps only the profilers' import keeps calling dask's ``visualize``."""
    from dask.diagnostics.profile_visualize import visualize as dask_visualize

    with (
        daskprofile.Profiler() as prof,
        daskprofile.ResourceProfiler(dt=0.01) as rprof,
        daskprofile.CacheProfiler() as cprof,
    ):
        dask.get({"a": 1, "b": (add, "a", 2), "c": (add, "b", "a")}, "c")
    out = tmp_path / "profile.html"
    layout = dask_visualize([prof, rprof, cprof], filename=str(out), show=False, save=True)
    figures = [child[0] for child in layout.children]
    assert len(figures) == 3
    assert len({id(f.x_range) for f in figures}) == 1  # dask shares the time axis
    page = out.read_text(encoding="utf-8")
    assert "Bokeh" in page
    assert "add" in page
    alone = dask_visualize(prof, show=False, save=False)
    assert alone.x_range.end > alone.x_range.start


def test_dasks_own_tests_with_only_the_profilers_swapped() -> None:
    """dask's multi-profiler plot test, its ``visualize`` import left as dask's."""
    source = (DASK_TESTS / "test_profiler.py").read_text()
    source = re.sub(
        r"^from dask\.diagnostics import (.+)$",
        r"from daskprofile import \1",
        source,
        flags=re.MULTILINE,
    )
    module = types.ModuleType("dask_compat_only_profilers")
    module.__file__ = str(DASK_TESTS / "test_profiler.py")
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    assert module.Profiler is daskprofile.Profiler
    module.test_plot_multiple()


# -- custom callbacks, side by side with dask's own ----------------------------------------
CHAIN = {"a": 1, "b": (add, "a", 1), "c": (add, "b", "a")}


def _logging_callback(base: type) -> Any:
    """A user's callback written against ``base``: every hook logs what it was given."""

    class Logging(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.log: list[tuple[Any, ...]] = []

        def _start(self, dsk: Any) -> None:
            self.log.append(("start", sorted(dsk)))

        def _start_state(self, dsk: Any, state: Any) -> None:
            self.log.append(("start_state", sorted(state), sorted(state["ready"])))

        def _pretask(self, key: Any, dsk: Any, state: Any) -> None:
            self.log.append(("pretask", key, sorted(state["running"])))

        def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
            self.log.append(("posttask", key, result, type(worker_id).__name__))

        def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
            self.log.append(("finish", sorted(state["finished"]), errored))

    return Logging


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_subclassed_callback_sees_what_dasks_sees(scheduler: str) -> None:
    logs = []
    for base in (DaskCallback, daskprofile.Callback):
        callback = _logging_callback(base)()
        with callback:
            assert dask.get(CHAIN, "c", scheduler=scheduler) == 3
        logs.append(callback.log)
    assert logs[1] == logs[0]
    assert [e[0] for e in logs[1]] == ["start", "start_state"] + ["pretask", "posttask"] * 2 + [
        "finish"
    ]


def test_keyword_callbacks_and_registration_like_dasks() -> None:
    seen: list[Any] = []
    callback = daskprofile.Callback(
        start=lambda dsk: seen.append("start"),
        start_state=lambda dsk, state: seen.append("start_state"),
        pretask=lambda key, dsk, state: seen.append(("pre", key)),
        posttask=lambda key, result, dsk, state, worker: seen.append(("post", key, result)),
        finish=lambda dsk, state, errored: seen.append(("finish", errored)),
    )
    callback.register()
    try:
        assert dask.get(CHAIN, "c") == 3
    finally:
        callback.unregister()
    assert seen == [
        "start",
        "start_state",
        ("pre", "b"),
        ("post", "b", 2),
        ("pre", "c"),
        ("post", "c", 3),
        ("finish", False),
    ]
    dask.get(CHAIN, "c")
    assert len(seen) == 7  # unregistered: called no more
