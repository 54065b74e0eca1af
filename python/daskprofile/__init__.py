"""daskprofile: see where a Dask computation spends its time, CPU and memory.

The public API is imported lazily, so ``import daskprofile`` stays cheap and never pulls in
bokeh, ipywidgets or the Jupyter layer until they are used.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .callbacks import Callback
    from .comparison import compare
    from .diagnostics import (
        CacheProfiler,
        Profiler,
        ProgressBar,
        ResourceProfiler,
        StackProfiler,
        visualize,
    )
    from .memory import MemorySampler
    from .record.profile import profile
    from .report import performance_report
    from .run import Run, load
    from .spans import span

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Callback": "callbacks",
    "Profiler": "diagnostics",
    "ResourceProfiler": "diagnostics",
    "CacheProfiler": "diagnostics",
    "ProgressBar": "diagnostics",
    "StackProfiler": "diagnostics",
    "visualize": "diagnostics",
    "profile": "record.profile",
    "Run": "run",
    "load": "run",
    "MemorySampler": "memory",
    "performance_report": "report",
    "span": "spans",
    "compare": "comparison",
}

__all__ = [
    "CacheProfiler",
    "Callback",
    "MemorySampler",
    "Profiler",
    "ProgressBar",
    "ResourceProfiler",
    "Run",
    "StackProfiler",
    "__version__",
    "compare",
    "load",
    "performance_report",
    "profile",
    "span",
    "visualize",
]


def _module_of(name: str) -> str | None:
    """The module defining ``name``; in an IPython kernel ``ProgressBar`` is the widget bar
    (which falls back to the text bar when no kernel is found at construction)."""
    module = _EXPORTS.get(name)
    if name == "ProgressBar" and "ipykernel" in sys.modules:
        from .jupyter.widgets import in_kernel

        if in_kernel():
            return "jupyter.widgets"
    return module


def __getattr__(name: str) -> Any:
    module = _module_of(name)
    if module is None:
        raise AttributeError(f"module 'daskprofile' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """The built extension, for ``jupyter labextension develop`` in a source checkout.

    Wheels ship it as shared data under ``share/jupyter/labextensions/daskprofile``; in a
    checkout it is built into the top-level ``labextension/`` folder.
    """
    return [{"src": "../../labextension", "dest": "daskprofile"}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext daskprofile``: register the magics and the comm target."""
    from .jupyter import load_ipython_extension as _load

    _load(ipython)
