"""Shared fixtures: after every test nothing of daskprofile may be left running.

The autouse fixture checks, after each test, that no thread was left behind (dask's own
thread pools excepted; a short grace lets joins finish), no child process remains, dask's
``get_async`` bindings are the originals again and no callback is registered.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))  # spawned worker processes inherit sys.path

GRACE = 3.0  # seconds for threads/processes that are ending to be gone


def _dask_pool_threads() -> set[threading.Thread]:
    threaded = sys.modules.get("dask.threaded")
    if threaded is None:
        return set()
    pools = [threaded.default_pool] if threaded.default_pool is not None else []
    for per_thread in list(threaded.pools.values()):
        pools.extend(per_thread.values())
    return {t for pool in pools for t in getattr(pool, "_threads", ())}


def _children() -> set[int]:
    out = set()
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
            if "resource_tracker" in cmdline or "forkserver" in cmdline:
                continue  # multiprocessing's own helpers live as long as the parent
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        out.add(child.pid)
    return out


def _leftovers(before: set[threading.Thread]) -> tuple[list[threading.Thread], set[int]]:
    deadline = time.monotonic() + GRACE
    while True:
        pool = _dask_pool_threads()
        threads = [
            t for t in threading.enumerate() if t not in before and t not in pool and t.is_alive()
        ]
        children = _children()
        if (not threads and not children) or time.monotonic() > deadline:
            return threads, children
        time.sleep(0.02)


def _hooks_state() -> tuple[bool, int, int]:
    import dask.local

    from daskprofile import hooks
    from daskprofile.callbacks import Callback

    original = dask.local.get_async is hooks.original_get_async
    return original, len(hooks.listeners()), len(Callback.active)


@pytest.fixture(autouse=True)
def nothing_left_behind() -> Iterator[None]:
    """After the test: no new thread, no child process, no hook, no registered callback."""
    before = set(threading.enumerate())
    yield
    threads, children = _leftovers(before)
    original, listeners, callbacks = _hooks_state()
    problems = []
    if threads:
        problems.append(f"threads left running: {threads}")
    if children:
        problems.append(f"child processes left: {sorted(children)}")
    if not original:
        problems.append("dask.local.get_async is still patched")
    if listeners:
        problems.append(f"{listeners} hook listener(s) still registered")
    if callbacks:
        problems.append(f"{callbacks} callback(s) still registered")
    if problems:
        _cleanup()
        pytest.fail("; ".join(problems))


def _cleanup() -> None:
    from daskprofile import hooks
    from daskprofile.callbacks import Callback

    Callback.active.clear()
    for listener in hooks.listeners():
        hooks.remove_listener(listener)
