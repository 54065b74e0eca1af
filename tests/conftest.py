"""Shared fixtures: after every test nothing of daskprofile may be left running.

The autouse fixture checks, after each test, that no thread was left behind (dask's own
thread pools excepted; a short grace lets joins finish), no child process remains, dask's
``get_async`` bindings are the originals again, no callback (ours or dask's) is registered
and Python's switch interval is as it was.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    utils = sys.modules.get("distributed.utils")  # its offload pool lives as long as we do
    if utils is not None and getattr(utils, "_offload_executor", None) is not None:
        pools.append(utils._offload_executor)
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


def _hooks_state() -> tuple[list[str], int, int]:
    """Modules whose ``get_async`` is still patched, our listeners and drain observers,
    callbacks (ours + dask's)."""
    import dask.callbacks

    from daskprofile import hooks
    from daskprofile.callbacks import Callback

    patched = [
        name
        for name in hooks._MODULES
        if (module := sys.modules.get(name)) is not None
        and getattr(module, "get_async", hooks.original_get_async) is not hooks.original_get_async
    ]
    callbacks = len(Callback.active) + len(dask.callbacks.Callback.active)
    return patched, len(hooks.listeners()) + len(hooks.drain_observers()), callbacks


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt``, as in a terminal or a kernel. A shell without
    job control starts a background command with SIGINT ignored, and Python then keeps it
    ignored: the tests that give a Ctrl-C (``_thread.interrupt_main``, ``os.kill``) would
    get nothing (CI run with ``&``: the interrupted twin computed to its end)."""
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.fixture(autouse=True)
def nothing_left_behind() -> Iterator[None]:
    """After the test: no new thread, no child process, no hook, no registered callback
    (ours or dask's), Python's switch interval as it was."""
    before = set(threading.enumerate())
    switch = sys.getswitchinterval()
    yield
    threads, children = _leftovers(before)
    patched, listeners, callbacks = _hooks_state()
    problems = []
    if threads:
        problems.append(f"threads left running: {threads}")
    if children:
        problems.append(f"child processes left: {sorted(children)}")
    if patched:
        problems.append(f"get_async still patched in {patched}")
    if listeners:
        problems.append(f"{listeners} hook listener(s) or drain observer(s) still registered")
    if callbacks:
        problems.append(f"{callbacks} callback(s) still registered")
    if sys.getswitchinterval() != switch:
        problems.append(f"switch interval left at {sys.getswitchinterval()} (was {switch})")
    if problems:
        _cleanup(switch)
        pytest.fail("; ".join(problems))


def _cleanup(switch: float) -> None:
    import dask.callbacks

    from daskprofile import hooks
    from daskprofile.callbacks import Callback

    Callback.active.clear()
    dask.callbacks.Callback.active.clear()
    for listener in hooks.listeners():
        hooks.remove_listener(listener)
    for observer in hooks.drain_observers():
        hooks.remove_drain_observer(observer)
    sys.setswitchinterval(switch)


# -- Chromium with the network refused (HTML snapshots, figures) --------------------------
CHROMIUM = os.environ.get("DASKPROFILE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
IDLE = "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents.every(d => d.is_idle)"


@dataclass
class Opened:
    """A snapshot open in Chromium, with what it asked for and what it logged."""

    page: Any
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@pytest.fixture(scope="session")
def distributed_threads() -> None:
    """Start the threads distributed keeps for the life of the process, once.

    distributed's offload executor (thread ``Dask-Offload_0``, ``distributed.utils``) is
    created on first use and never shut down; started here (a session fixture, set up
    before the per-test check of leftover threads takes its snapshot), it is not mistaken
    for a leak. Modules with clusters use it: ``pytest.mark.usefixtures(...)``.
    """
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        c.submit(abs, -1).result()


@pytest.fixture
def browser() -> Iterator[Any]:
    """Chromium for one test (the suite checks no child process outlives a test)."""
    from playwright import sync_api

    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: install Debian's chromium (bash dev.sh test)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def open_offline(browser: Any) -> Iterator[Any]:
    """Open a file with every non-file request refused; wait until Bokeh is idle."""
    pages: list[Any] = []

    def opener(path: Path) -> Opened:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        pages.append(page)
        opened = Opened(page)

        def route(r: Any) -> None:
            if r.request.url.startswith(("file:", "data:")):
                r.continue_()
            else:
                opened.refused.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m: m.type == "error" and opened.errors.append(m.text))
        page.on("pageerror", lambda e: opened.errors.append(str(e)))
        page.on("dialog", lambda d: (opened.dialogs.append(d.message), d.dismiss()))
        page.goto(path.as_uri())
        page.wait_for_function(IDLE, timeout=30_000)
        return opened

    yield opener
    for page in pages:
        page.close()
