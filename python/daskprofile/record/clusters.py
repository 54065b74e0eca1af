"""Where recordings meet ``dask.distributed``, which is imported only when a client is used.

A recording asks :func:`when_distributed` to run its cluster wiring once ``distributed`` is
imported: at once if it already is, else right after the user's own ``import distributed``
(a post-import hook on ``sys.meta_path``, removed once it fired or was cancelled). Until
then nothing of ``daskprofile.distributed`` is imported, and a local-only session never
pays for it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["source_module", "watch_module", "when_distributed"]

_lock = threading.Lock()
_waiting: list[Callable[[], None]] = []
_finder: _AfterImport | None = None


def source_module() -> ModuleType:
    """``daskprofile.distributed.source`` (imports distributed)."""
    return importlib.import_module("daskprofile.distributed.source")


def watch_module() -> ModuleType:
    """``daskprofile.distributed.watch`` (imports distributed)."""
    return importlib.import_module("daskprofile.distributed.watch")


def when_distributed(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback()`` once ``distributed`` is imported (now, if it is); returns a
    function that cancels a call still waiting."""
    global _finder
    if "distributed" in sys.modules:
        callback()
        return lambda: None
    with _lock:
        _waiting.append(callback)
        if _finder is None:
            _finder = _AfterImport()
            sys.meta_path.insert(0, _finder)

    def cancel() -> None:
        with _lock:
            if callback in _waiting:
                _waiting.remove(callback)
            if not _waiting:
                _remove_finder()

    return cancel


def _remove_finder() -> None:
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None


def _imported() -> None:
    with _lock:
        callbacks = list(_waiting)
        _waiting.clear()
        _remove_finder()
    for callback in callbacks:
        callback()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of ``distributed`` to call back after it ran."""

    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "distributed" or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _NotifyingLoader(spec.loader)
        return spec


class _NotifyingLoader(importlib.abc.Loader):
    """A loader that runs the wrapped one, then the waiting callbacks."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _imported()

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ...: the wrapped one's
        return getattr(self._loader, name)
