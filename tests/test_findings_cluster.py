"""Findings on a real distributed LocalCluster: the graph the kernel submits gives the
dependency edges (critical path), compute() calls are timed, the process-level GIL check
is not fooled by single-threaded workers, transfers between workers are found, and a
cluster that really spills is spill-bound while its twin with memory to spare is not."""

from __future__ import annotations

import time
from itertools import pairwise

import dask
import numpy as np
import pytest
from dask import delayed

distributed = pytest.importorskip("distributed")

from daskprofile import profile  # noqa: E402
from daskprofile.findings import _facts, memory  # noqa: E402
from test_cluster_tables import _cluster, spilling  # noqa: E402, F401 - its fixture, reused

pytestmark = pytest.mark.usefixtures("distributed_threads")


def nap(x: int, t: float = 0.05) -> int:
    time.sleep(t)
    return x + 1


def spin(i: int) -> int:
    t, s = time.perf_counter(), 0
    while time.perf_counter() - t < 0.1:
        s += 1
    return s


@pytest.fixture
def client() -> object:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def test_cluster_chain_has_a_critical_path_and_timed_computes(client: object) -> None:
    x = delayed(nap)(0)
    for _ in range(12):
        x = delayed(nap)(x)
    with profile() as run:
        x.compute()
        dask.compute(*[delayed(nap)(i, 0.01) for i in range(6)])
    edges = run.raw("edges")
    assert len(edges["indptr"]) == len(run.tasks) + 1
    assert edges["indices"].size >= 12
    found = run.findings()
    path = found[found.kind == "critical-path"].iloc[0]
    assert path.evidence["path_tasks"] == 13
    computes = run.raw("computes")
    assert len(computes["id"]) == 2
    assert np.all(computes["call"] < computes["submit"])
    assert "gil-bound" not in set(found.kind)  # single-threaded workers: each task has its GIL


def test_cluster_transfers_are_found(client: object) -> None:
    def make(i: int) -> np.ndarray:
        return np.ones(4_000_000) * i  # 32 MB

    def combine(a: np.ndarray, b: np.ndarray) -> float:
        return float(a[:10].sum() + b[:10].sum())

    parts = [delayed(make)(i) for i in range(8)]
    pairs = [delayed(combine)(parts[i], parts[(i + 3) % 8]) for i in range(8)]
    with profile() as run:
        dask.compute(*pairs)
    moved = run.actions.query("action == 'transfer'")
    assert len(moved)
    f = _facts.facts(run)
    memory.MIN_SHARE, saved = 0.0, memory.MIN_SHARE
    try:
        rows = memory.spill_and_transfer(f)
    finally:
        memory.MIN_SHARE = saved
    transfer = [r for r in rows if r["kind"] == "transfer-bound"]
    assert transfer
    assert transfer[0]["evidence"]["bytes"] > 0


def _matmul_sum(n: int = 4000) -> float:
    """``x @ x.T`` summed: 128 MB of ``x``, partial products several times that."""
    da = pytest.importorskip("dask.array")
    x = da.random.random((n, n), chunks=(500, 500))
    return float((x @ x.T).sum().compute())


def _disk(run: object) -> tuple[float, int]:
    """(seconds of the recorded disk-read/disk-write actions, bytes the workers wrote to
    disk during the run by their spill counters)."""
    actions = run.actions  # type: ignore[attr-defined]
    disk = actions[actions["action"].isin(["disk-read", "disk-write"])]
    grown = run.memory.groupby("worker")["spill_bytes"].agg(lambda s: s.max() - s.iloc[0])  # type: ignore[attr-defined]
    return float((disk["stop"] - disk["start"]).sum()), int(grown.sum())


@pytest.mark.usefixtures("spilling")
def test_a_cluster_that_spills_is_spill_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    with profile() as run:
        _matmul_sum()
    recorded, written = _disk(run)
    assert written > 100e6  # 2 workers of 600 MB spilling from 120 MB: hundreds of MB
    found = run.findings()
    rows = found[found.kind == "spill-bound"]
    assert len(rows) == 1
    row = rows.iloc[0]
    ev = row.evidence
    # named by what was on disk: the inputs of the tasks that waited on reading it back
    assert "random_sample" in ev["spilled_groups"]
    assert row.group == ", ".join(ev["spilled_groups"][:3])
    assert "random_sample" in row.message
    # impact: the recorded disk actions plus the writes distributed did not record,
    # priced from the spill counters; over the cluster's 2 threads
    assert ev["read_s"] + ev["write_s"] == pytest.approx(recorded, abs=1e-5)
    assert ev["bytes_written"] == written
    assert ev["unrecorded_write_s"] > 0
    assert ev["disk_s"] == pytest.approx(recorded + ev["unrecorded_write_s"], abs=1e-5)
    assert row.impact_s == pytest.approx(ev["disk_s"] / 2, abs=1e-5)
    assert row.impact_s >= memory.MIN_SHARE * run.summary()["wall_time"]
    # without the counters, only the recorded actions count (the run's own records)
    monkeypatch.setattr(memory, "_spill_counters", lambda f: None)
    alone = memory.spill_and_transfer(_facts.facts(run))
    recorded_only = [r for r in alone if r["kind"] == "spill-bound"]
    if recorded_only:  # below 5% of the wall time it is not reported at all
        assert recorded_only[0]["impact_s"] == pytest.approx(recorded / 2, abs=1e-5)
        assert recorded_only[0]["impact_s"] < row.impact_s


def test_its_twin_with_memory_to_spare_is_not_spill_bound() -> None:
    config = {"distributed.worker.memory.target": 0.2, "distributed.worker.memory.spill": 0.3}
    with (
        dask.config.set(config),
        _cluster(n_workers=2, memory_limit="6GB") as cluster,
        distributed.Client(cluster),
        profile() as run,
    ):
        _matmul_sum()
    assert _disk(run)[1] == 0  # nothing spilled
    assert "spill-bound" not in set(run.findings().kind)


def test_cluster_edges_come_from_the_scheduler_across_graphs(client: object) -> None:
    """A chain of ``submit`` calls is one graph per task, each waiting for the previous
    future: the edges cross graphs (the scheduler knows them; no graph is kept here)."""
    with profile() as run:
        futures = [client.submit(nap, 0, 0.01)]  # type: ignore[attr-defined]
        for _ in range(5):
            futures.append(client.submit(nap, futures[-1], 0.01))  # type: ignore[attr-defined]
        futures[-1].result()
    rows = {key: i for i, key in enumerate(run.tasks.key)}
    edges = run.raw("edges")
    waited = {
        i: sorted(edges["indices"][edges["indptr"][i] : edges["indptr"][i + 1]].tolist())
        for i in range(len(run.tasks))
    }
    labels = [f.key for f in futures]
    assert waited[rows[labels[0]]] == []
    for before, after in pairwise(labels):
        assert waited[rows[after]] == [rows[before]]
    recorded = run.findings()
    path = recorded[recorded.kind == "critical-path"].iloc[0]
    assert path.evidence["path_tasks"] == 6
