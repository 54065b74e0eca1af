"""Versions of Python and of the libraries that run a computation: where a run ran.

Read once per process (``importlib.metadata`` scans the installed distributions, which
takes milliseconds) and kept: a run's metadata, the panel's greeting and each cluster
worker's first message carry them, so a report can say what ran it, like the Summary of
distributed's performance report.
"""

from __future__ import annotations

import functools
import platform
from importlib import metadata

from ._version import __version__

__all__ = ["LIBRARIES", "versions"]

#: the distributions whose versions are told (those installed)
LIBRARIES = ("dask", "distributed", "numpy", "pandas", "cloudpickle", "bokeh")


@functools.cache
def _installed() -> tuple[tuple[str, str], ...]:
    found = []
    for name in LIBRARIES:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(found)


def versions() -> dict[str, str]:
    """``{"python": ..., "daskprofile": ..., <library>: ...}`` of this process."""
    return {"python": platform.python_version(), "daskprofile": __version__, **dict(_installed())}
