"""Reading other threads' stacks: one C-level pass, no collection inside it on Python 3.11."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from types import CodeType, SimpleNamespace
from typing import Any

import dask
import pytest

import daskprofile
from daskprofile.collectors import _frames


def _recurse(n: int) -> int:
    return 0 if n == 0 else 1 + _recurse(n - 1)


@pytest.fixture
def busy_threads() -> Iterator[list[int]]:
    """Two threads that keep making new frames (each needs a new frame object when read)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            _recurse(20)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        yield [t.ident for t in threads if t.ident is not None]
    finally:
        stop.set()
        for t in threads:
            t.join()


@pytest.fixture
def collections_inside() -> Iterator[Callable[..., int]]:
    """Collect at almost every allocation; count collections started with all the given
    functions' frames on the stack."""
    seen: list[set[CodeType]] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            frame, codes = sys._getframe(1), set()
            while frame is not None:
                codes.add(frame.f_code)
                frame = frame.f_back
            seen.append(codes)

    threshold = gc.get_threshold()
    gc.callbacks.append(on_gc)
    gc.set_threshold(1)
    try:
        # a copy: counting allocates, and collections keep being recorded meanwhile
        yield lambda *inside: sum(set(inside) <= codes for codes in seen[:])
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(on_gc)


def _read_unguarded(idents: list[int]) -> None:
    _frames._read(idents)


def test_no_collection_starts_while_stacks_are_read(
    busy_threads: list[int], collections_inside: Callable[..., int]
) -> None:
    # A collection inside sys._current_frames() or f_back can deadlock Python 3.11, or
    # leave a frame object on reused memory (see _frames); read() holds collection off.
    deadline = time.monotonic() + 1.0
    reads = 0
    while time.monotonic() < deadline:
        stacks = _frames.read(busy_threads)
        assert set(stacks) == set(busy_threads)
        assert all(walk for walk in stacks.values())
        _read_unguarded(busy_threads)
        reads += 1
    assert gc.isenabled()
    assert reads > 50
    reading = _frames._read.__code__
    assert collections_inside(_frames.read.__code__, reading) == 0
    if sys.version_info[:2] == (3, 11):  # the same reads, unguarded, do start collections
        assert collections_inside(_read_unguarded.__code__, reading) > 0


_TWO_SAMPLERS = textwrap.dedent(
    """
    import gc, sys, threading, time
    from daskprofile.collectors import _frames

    stop = threading.Event()

    def rec(n):
        return 0 if n == 0 else rec(n - 1) + 1

    def work():
        while not stop.is_set():
            rec(15)

    def on_gc(phase, info):
        time.sleep(0)  # gives the GIL up, as distributed's GC diagnosis does (psutil)

    def sample(idents):
        while not stop.is_set():
            _frames.read(idents)

    workers = [threading.Thread(target=work) for _ in range(2)]
    for t in workers:
        t.start()
    gc.callbacks.append(on_gc)
    gc.set_threshold(1)  # a collection at almost every allocation
    idents = [t.ident for t in workers]
    samplers = [threading.Thread(target=sample, args=(idents,)) for _ in range(2)]
    for t in samplers:
        t.start()
    time.sleep(float(sys.argv[1]))
    stop.set()
    for t in samplers + workers:
        t.join()
    print("finished")
    """
)


def test_two_samplers_do_not_deadlock_when_collections_give_the_gil_up() -> None:
    # CPython #106883 (3.11): a collection inside sys._current_frames() that gives the GIL
    # up while the runtime's thread list is locked, and a second reader waiting for that
    # lock holding the GIL. With collection not held off, this deadlocked in 3 runs of 3.
    done = subprocess.run(
        [sys.executable, "-c", _TWO_SAMPLERS, "3"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "finished"


def test_collection_stays_off_if_the_user_had_switched_it_off(busy_threads: list[int]) -> None:
    gc.disable()
    try:
        assert _frames.read(busy_threads)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert _frames.read(busy_threads)
    assert gc.isenabled()


def test_collection_comes_back_on_when_the_last_of_two_readers_ends() -> None:
    # the kernel's sampler and an in-process LocalCluster's read in one process: the first
    # to end must not switch collection back on under the other
    hold = _frames._CollectionHold()
    hold.__enter__()
    hold.__enter__()
    assert not gc.isenabled()
    hold.__exit__()
    assert not gc.isenabled()
    hold.__exit__()
    assert gc.isenabled()


@pytest.mark.skipif(
    not isinstance(_frames._hold, _frames._CollectionHold), reason="held on Python 3.11 only"
)
def test_a_child_forked_during_a_read_has_collection_back_on() -> None:
    hold = _frames._hold
    assert isinstance(hold, _frames._CollectionHold)
    with hold:
        pid = os.fork()
        if pid == 0:  # the child: no reader is left in it to switch collection back on
            os._exit(0 if gc.isenabled() and hold._readers == 0 else 1)
        assert not gc.isenabled()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert gc.isenabled()


def test_a_walk_is_the_frame_chain_innermost_first() -> None:
    def inner() -> _frames.Walk:
        return _frames.walk(sys._getframe())

    walk, line = inner(), sys._getframe().f_lineno
    expected = []
    frame = sys._getframe()
    while frame is not None:
        expected.append(frame.f_code)
        frame = frame.f_back  # type: ignore[assignment]
    assert [code for code, _ in walk] == [inner.__code__, *expected]
    assert walk[1][1] == line


def test_a_chain_that_reaches_a_non_frame_raises() -> None:
    def closure() -> Any:
        return cell_value

    cell_value = 1
    cell = closure.__closure__[0]  # type: ignore[index]
    top = SimpleNamespace(f_code=closure.__code__, f_lineno=3, f_back=cell)
    with pytest.raises(AttributeError):
        _frames.walk(top)  # type: ignore[arg-type]


def test_an_unreadable_stack_costs_its_sample_not_the_sampler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What CPython 3.11 did before reads held collection off: f_back handed back a cell.
    walk, calls = _frames.walk, [0]

    def every_other_breaks(frame: Any) -> _frames.Walk:
        calls[0] += 1
        if calls[0] % 2:
            raise AttributeError("'cell' object has no attribute 'f_code'")
        return walk(frame)

    monkeypatch.setattr(_frames, "walk", every_other_breaks)

    def spin(seconds: float) -> float:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return seconds

    tasks = [dask.delayed(spin)(0.05) for _ in range(8)]
    with daskprofile.profile(stacks=True, interval=0.005, resources=False) as run:
        assert dask.compute(*tasks, scheduler="threads") == (0.05,) * 8
    assert not run.meta["errors"]
    assert run.meta["dropped"]["stacks"] > 0
    assert run.stacks["spin"]["count"] > 0
