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
from daskprofile.record.cursors import live_grid

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
