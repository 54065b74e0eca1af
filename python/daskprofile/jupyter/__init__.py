"""The Jupyter layer: comm target, magics and widgets. Nothing below imports it."""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Register the comm target (and, once present, the magics) in an IPython kernel."""
    from . import comm

    comm.register_target()
    try:
        from . import magic
    except ImportError:  # magics not built yet
        return
    magic.load_ipython_extension(ipython)
