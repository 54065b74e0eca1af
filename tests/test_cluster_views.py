"""The vectorised cluster views against simple loops on random data: the rolling minimum
of unmanaged memory, the counters from each worker's first sample, bandwidth over time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from daskprofile import cluster_views as cv


def _rolling_min_loop(time: np.ndarray, group: np.ndarray, values: np.ndarray, w: float) -> list:
    out = []
    for i in range(len(time)):
        mine = (group == group[i]) & (time <= time[i]) & (time >= time[i] - w)
        out.append(values[mine].min())
    return out


def _spread_loop(edges: np.ndarray, start: np.ndarray, stop: np.ndarray, rate: np.ndarray):
    moved = np.zeros(len(edges) - 1)
    for a, b, r in zip(start, stop, rate, strict=True):
        moved += np.clip(np.minimum(edges[1:], b) - np.maximum(edges[:-1], a), 0, None) * r
    return moved


@pytest.mark.parametrize("seed", range(40))
def test_rolling_min_matches_a_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    time = np.round(rng.uniform(0, 60, n), int(rng.integers(0, 3)))  # ties too
    group = rng.integers(0, 4, n)
    values = rng.integers(0, 10**9, n)
    window = float(rng.choice([0.0, 0.5, 5.0, 30.0, 1e4]))
    got = cv._rolling_min(time, group, values, window)
    # of samples at one time, the view (as it always did) takes those up to the row itself
    # in the frame's order and the loop all of them: compare where times are unique
    want = _rolling_min_loop(time, group, values, window)
    uniq = ~pd.DataFrame({"t": time, "g": group}).duplicated(keep=False).to_numpy()
    assert np.array_equal(got[uniq], np.asarray(want, dtype=np.int64)[uniq])


@pytest.mark.parametrize("seed", range(20))
def test_from_first_matches_a_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 5, 300)
    values = rng.integers(-1, 1000, 300)
    want = values.copy()
    for g in np.unique(group):
        rows = np.flatnonzero((group == g) & (values >= 0))
        want[rows] -= values[rows[0]] if len(rows) else 0
    assert np.array_equal(cv._from_first(group, values), want)


@pytest.mark.parametrize("seed", range(40))
def test_bandwidth_over_time_matches_a_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 200))
    start = np.round(rng.uniform(0, 30, m), int(rng.integers(0, 3)))
    stop = start + np.round(rng.exponential(float(rng.choice([0.01, 1.0, 8.0])), m), 2)
    frame = pd.DataFrame(
        {"start": start, "stop": stop, "bytes": rng.integers(0, 10**9, m), "direction": "incoming"}
    )
    dt = float(rng.choice([0.1, 0.25, 1.0, 3.0]))
    got = cv.bandwidth(frame, by="time", dt=dt)
    stop = np.maximum(stop, start + 1e-6)
    edges = np.arange(np.floor(start.min() / dt) * dt, stop.max() + dt, dt)
    want = _spread_loop(edges, start, stop, frame["bytes"].to_numpy() / (stop - start)) / dt
    assert np.array_equal(got["time"].to_numpy(), edges[:-1])
    np.testing.assert_allclose(got["bandwidth"], want, rtol=1e-9, atol=1e-6 * want.max())
    assert (got["bandwidth"].to_numpy()[want == 0] == 0).all()  # idle bins stay exactly 0
    total = got["bandwidth"].sum() * dt
    assert total == pytest.approx(frame["bytes"].sum(), rel=1e-9)


def test_spread_of_nothing_and_of_intervals_outside_the_bins() -> None:
    edges = np.arange(0.0, 4.0)
    assert cv.spread(edges, np.empty(0), np.empty(0), np.empty(0)).tolist() == [0, 0, 0]
    moved = cv.spread(edges, np.array([-2.0, 2.5]), np.array([0.5, 9.0]), np.array([2.0, 4.0]))
    assert moved.tolist() == [1.0, 0.0, 2.0]
