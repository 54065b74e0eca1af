"""The resource sampler's ring buffer: growing, wrapping, forgetting, shrinking; cursors of
``since`` stay valid throughout; the panel's per-cell recorder makes its shared sampler
forget what no open run reads (issue 18: an hour of computes must not grow memory)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import dask
import numpy as np
import pytest

from daskprofile.collectors import resources
from daskprofile.collectors.resources import ResourceCollector, _Ring
from daskprofile.record import history, per_cell


@pytest.fixture
def small_rings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rings start (and shrink back) at 4 rows: growth and wrap-around in a few rows."""
    monkeypatch.setattr(_Ring, "MIN_SIZE", 4)


def add(ring: _Ring, first: int, last: int) -> None:
    """Rows ``first .. last-1``: time ``k``, cpu ``k / 2``, memory ``10 k``, processes ``k``."""
    for k in range(first, last):
        ring.append((float(k), k / 2, 10 * k, k))


def rows(ring: _Ring, cursor: int = 0) -> list[int]:
    cols = ring.since(cursor)
    # every column of a row is that row's (a column laid out apart from the others shows)
    assert np.array_equal(cols["cpu"], cols["time"] / 2)
    assert np.array_equal(cols["memory"], 10 * cols["time"].astype(np.int64))
    assert np.array_equal(cols["processes"], cols["time"].astype(np.int32))
    return [int(t) for t in cols["time"]]


def test_rows_are_kept_in_order_as_the_ring_grows(small_rings: None) -> None:
    ring = _Ring(1000)
    add(ring, 0, 37)
    assert ring.size == 64
    assert rows(ring) == list(range(37))
    assert rows(ring, 30) == list(range(30, 37))


def test_at_its_capacity_the_ring_wraps_and_counts_the_rows_it_drops(small_rings: None) -> None:
    ring = _Ring(6)
    add(ring, 0, 17)
    assert ring.size == 6
    assert rows(ring) == list(range(11, 17))
    assert rows(ring, 14) == [14, 15, 16]
    assert (ring.total, ring.dropped) == (17, 11)


def test_forget_then_since_goes_on_from_the_oldest_row_left(small_rings: None) -> None:
    ring = _Ring(1000)
    add(ring, 0, 50)
    assert ring.forget(20.0) == 20  # rows with time < 20
    assert ring.total == 50  # cursors stay valid: total never goes back
    assert rows(ring) == list(range(20, 50))
    assert rows(ring, 10) == list(range(20, 50))  # a cursor in the forgotten rows
    assert rows(ring, 45) == list(range(45, 50))
    assert rows(ring, 50) == []
    assert ring.dropped == 0  # forgotten is not dropped
    assert ring.forget(20.0) == 0
    add(ring, 50, 53)
    assert rows(ring, 50) == [50, 51, 52]


def test_forgetting_most_rows_shrinks_the_ring_and_it_grows_again(small_rings: None) -> None:
    ring = _Ring(1000)
    add(ring, 0, 1000)
    assert ring.size == 1000
    ring.forget(997.0)
    assert len(ring) == 3
    assert ring.size == 7  # the capacity halved down to MIN_SIZE (4) or more
    assert rows(ring) == [997, 998, 999]
    add(ring, 1000, 1010)
    assert rows(ring, 995) == list(range(997, 1010))


def test_wrap_around_then_grow_keeps_every_row(small_rings: None) -> None:
    """Rows laid out wrapped (row k at k % size, the oldest not at index 0) when the ring
    grows: copying the columns to the front of the new ones, right only before the first
    wrap, would mix rows up."""
    ring = _Ring(1 << 20)
    add(ring, 0, 64)
    ring.forget(62.0)  # 2 left: shrinks to 4 rows, rows 62, 63 at 2, 3
    assert ring.size == 4
    add(ring, 64, 66)  # rows 64, 65 at 0, 1: wrapped, full
    assert rows(ring) == [62, 63, 64, 65]
    add(ring, 66, 71)  # grows from a wrapped layout, twice
    assert ring.size == 16
    assert rows(ring) == list(range(62, 71))
    assert rows(ring, 66) == [66, 67, 68, 69, 70]


def test_random_appends_and_forgets_match_a_list(small_rings: None) -> None:
    rng = random.Random(18)
    for capacity in (5, 8, 37, 1000):
        ring, kept, total, dropped = _Ring(capacity), [], 0, 0
        for _ in range(400):
            if rng.random() < 0.15:
                before = total - rng.randint(0, 40)
                n = ring.forget(float(before))
                assert n == sum(k < before for k in kept)
                kept = [k for k in kept if k >= before]
            else:
                for _ in range(rng.randint(1, 20)):
                    add(ring, total, total + 1)
                    kept.append(total)
                    total += 1
                    if len(kept) > capacity:
                        kept.pop(0)
                        dropped += 1
            assert ring.size <= capacity
            assert (ring.total, ring.dropped, len(ring)) == (total, dropped, len(kept))
            cursor = rng.randint(0, total)
            assert rows(ring, cursor) == [k for k in kept if k >= cursor]


def test_the_collector_forgets_under_its_lock_and_since_goes_on() -> None:
    with ResourceCollector(dt=0.005) as rc:
        time.sleep(0.1)
        cut = time.perf_counter()
        time.sleep(0.05)
        _, cursor = rc.since(0)
        assert rc.forget(cut) > 0
        kept, same = rc.since(0)
        assert same == cursor  # the cursor stays where it was
        assert kept["time"][0] >= cut
        time.sleep(0.03)
        new, later = rc.since(cursor)
    assert later == cursor + len(new["time"]) > cursor
    assert rc.dropped == 0


# ---------------------------------------------------------------- the panel's recorder


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[per_cell.CellRecorder]:
    """A per-cell recorder sampling resources every 5 ms (no stacks), which forgets what no
    open run reads at once (not 30 s later)."""
    monkeypatch.setattr(per_cell, "KEEP_SAMPLES", 0.0)
    settings = {
        "daskprofile.panel.resources.dt": "5ms",
        "daskprofile.panel.stacks.interval": None,
        "daskprofile.panel.idle-stop": None,
    }
    with dask.config.set(settings):
        rec = per_cell.CellRecorder()
    rec.start()
    try:
        yield rec
    finally:
        rec.stop()
        history.clear_history()


def test_an_open_runs_cursor_still_sees_its_samples_after_another_run_closes(
    recorder: per_cell.CellRecorder,
) -> None:
    sampler = recorder.samplers.resources
    with recorder.lock:
        first = recorder._open()
    time.sleep(0.2)
    with recorder.lock:
        second = recorder._open()
    t0 = second.run.t0
    time.sleep(0.15)
    read = second.cursors.resources
    assert read is not None
    early = read(0)
    assert early.n >= 3
    recorder._close(first)
    # the first run's samples before the second began are gone...
    assert sampler.snapshot()["time"][0] >= first.run.t0 + 0.1
    assert first.run.raw("resources")["time"][0] <= first.run.t0 + 0.05  # (it has them)
    # ...the second run's are all there, at the same cursors
    again = read(0)
    assert (again.first, again.cursor) >= (early.first, early.cursor)
    assert again.first == early.first
    assert np.array_equal(again.cols["time"][: early.n], early.cols["time"])
    assert np.all(again.cols["time"] >= t0 - 0.01)
    time.sleep(0.05)
    recorder._close(second)
    frozen = second.run.raw("resources")["time"]
    assert len(frozen) >= again.n
    assert np.array_equal(np.asarray(frozen)[: early.n], early.cols["time"])


def test_back_to_back_runs_keep_the_shared_sampler_small(
    recorder: per_cell.CellRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Computes that keep the shared sampler running: without forgetting, its ring held
    every sample of them (up to ``max-records``, 1M by default)."""
    monkeypatch.setattr(_Ring, "MIN_SIZE", 4)
    sampler = recorder.samplers.resources
    sampler._ring = resources._Ring(sampler._ring.capacity)
    end = time.perf_counter() + 1.0
    runs = 0
    while time.perf_counter() < end:
        with recorder.lock:
            run = recorder._open()
        time.sleep(0.02)
        recorder._close(run)
        runs += 1
        assert len(run.run.raw("resources")["time"]) >= 1
    ring = sampler._ring
    assert ring.total >= 60  # (5 ms apart for 1 s: ~200 when the machine is not busy)
    assert len(ring) <= 16, (runs, ring.total, len(ring), ring.size)
    assert ring.size <= 32, (runs, ring.total, len(ring), ring.size)
