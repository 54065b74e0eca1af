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
from pathlib import Path
from typing import Any

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
