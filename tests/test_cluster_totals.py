"""A cluster's summed resources read live: rows on a grid from the run's start, read once.

Worker processes send their samples in batches (every half second, later under load), so
the rows every process has reported grow unevenly: a process that reports late may have
begun earlier than the others, and while it is late the complete rows wait for it. The
live reader must send each grid row once, in time order, and end with the rows the run
keeps (what a reload replays).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from daskprofile.distributed._tables import LATE_REPORT, ProcessResources, cluster_totals
from daskprofile.distributed.source import Target, _settle, _since
from daskprofile.record.cursors import live_grid
from daskprofile.run import Run

DT = 0.1
T0 = 1000.0


def _process(pid: int) -> ProcessResources:
    return ProcessResources(pid, "host", None)


def _samples(proc: ProcessResources, times: np.ndarray, cpu: float) -> None:
    n = len(times)
    proc.extend(
        {"time": list(times), "cpu": [cpu] * n, "memory": [10**8] * n, "processes": [1] * n}, 0.0
    )


def _drain(read: Any, cursor: int, sent: list[float]) -> int:
    r = read(cursor)
    assert r.n == len(r.cols["time"])
    sent += [float(t) for t in r.cols["time"]]
    return int(r.cursor)


def test_a_late_process_that_began_earlier_sends_no_row_twice() -> None:
    a, b = _process(1), _process(2)
    procs: list[ProcessResources] = [a]
    finished = {"yes": False}

    def totals() -> dict[str, np.ndarray]:
        series = [p.snapshot() for p in procs]
        complete = not finished["yes"]
        rows = cluster_totals(series, DT, origin=T0, complete=complete)
        keep = rows["time"] >= T0 - 1e-3
        return {k: v[keep] for k, v in rows.items()}

    read = live_grid(totals, T0, DT)
    sent: list[float] = []
    # A reports first, from 0.35 s on; B began at 0.12 s and reports later
    _samples(a, T0 + np.arange(0.35, 1.0, DT), 50.0)
    cursor = _drain(read, 0, sent)
    assert sent
    assert min(sent) >= T0 + 0.35
    procs.append(b)
    _samples(b, T0 + np.arange(0.12, 0.6, DT), 20.0)  # behind A: complete rows end earlier
    cursor = _drain(read, cursor, sent)
    _samples(b, T0 + np.arange(0.62, 1.5, DT), 20.0)
    _samples(a, T0 + np.arange(1.05, 1.5, DT), 50.0)
    cursor = _drain(read, cursor, sent)
    finished["yes"] = True
    _drain(read, cursor, sent)

    assert len(sent) == len(set(np.round(sent, 6))), sent  # no row twice
    assert np.all(np.diff(sent) > 0), sent  # in time order
    steps = np.round((np.asarray(sent) - T0) / DT, 6)
    assert np.allclose(steps, np.round(steps)), steps  # on the run's grid
    final = totals()["time"]
    assert set(np.round(sent, 6)) <= set(np.round(final, 6))
    assert max(sent) == final[-1]  # nothing held back once the run is finished


def test_live_totals_wait_for_a_process_whose_batch_is_late() -> None:
    a, b = _process(1), _process(2)
    _samples(a, T0 + np.arange(0.0, 4.0, DT), 50.0)
    _samples(b, T0 + np.arange(0.0, 1.0, DT), 20.0)  # its batches are ~3 s late
    rows = cluster_totals([a.snapshot(), b.snapshot()], DT, origin=T0, complete=True)
    # the rows every process has reported: up to B's last sample, each with both processes
    assert rows["time"][-1] <= T0 + 1.0 + 1e-9
    assert (rows["processes"] == 2).all(), rows["processes"]
    assert np.allclose(rows["cpu"], 70.0)
    # a process silent for longer than LATE_REPORT has stopped: the others go on without it
    _samples(a, T0 + np.arange(4.0, 1.5 + LATE_REPORT, DT), 50.0)
    rows = cluster_totals([a.snapshot(), b.snapshot()], DT, origin=T0, complete=True)
    assert rows["time"][-1] >= T0 + LATE_REPORT
    # the kept table (not complete) has every row to the newest sample
    kept = cluster_totals([a.snapshot(), b.snapshot()], DT, origin=T0)
    assert kept["time"][-1] >= rows["time"][-1]


def test_a_runs_process_series_starts_with_the_last_sample_before_it() -> None:
    """A worker's batch on its way when a run opens holds samples from before the run:
    they count by their time, not by when they came. The run's series of that process
    starts with the last sample before it, live and kept alike (CI once read two samples
    over 0.5 s before a run's start in its kept series)."""
    proc = _process(1)
    _samples(proc, np.array([T0 - 1.0, T0 - 0.8]), 10.0)  # arrived before the run opened
    target = Target(run=Run())
    target.resource_start["p"] = proc.columns.n - 1  # the first guess when it opens
    target.opened = T0
    read = _since(proc.columns, target, "p")
    rows, cursor = read(0)
    assert len(rows["time"]) == 0  # nothing from after the start yet: not settled
    _samples(proc, np.array([T0 - 0.6, T0 - 0.4, T0 - 0.2]), 20.0)  # on its way: before T0
    rows, cursor = read(cursor)
    assert len(rows["time"]) == 0
    _samples(proc, np.array([T0 + 0.0, T0 + 0.2]), 30.0)
    rows, cursor = read(cursor)
    assert list(rows["time"]) == [T0 - 0.2, T0, T0 + 0.2]
    with proc.columns.lock:  # the kept run reads from the same sample
        assert _settle(target, "p", proc.columns, final=True) == 4
    _samples(proc, np.array([T0 + 0.4]), 30.0)
    assert list(read(cursor)[0]["time"]) == [T0 + 0.4]


def test_a_short_run_without_a_later_sample_keeps_the_newest_one() -> None:
    """A run kept before any sample from after its start came in: the newest one."""
    proc = _process(1)
    _samples(proc, np.array([T0 - 0.5, T0 - 0.3]), 10.0)
    target = Target(run=Run())
    target.resource_start["p"] = 0
    target.opened = T0
    with proc.columns.lock:
        assert _settle(target, "p", proc.columns) is None
        assert _settle(target, "p", proc.columns, final=True) == 1
