"""Findings on a real distributed LocalCluster: the graph the kernel submits gives the
dependency edges (critical path), compute() calls are timed, the process-level GIL check
is not fooled by single-threaded workers, and transfers between workers are found."""

from __future__ import annotations

import time

import dask
import numpy as np
import pytest
from dask import delayed

distributed = pytest.importorskip("distributed")

from daskprofile import profile  # noqa: E402

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
    from daskprofile.findings import _facts, memory

    f = _facts.facts(run)
    memory.MIN_SHARE, saved = 0.0, memory.MIN_SHARE
    try:
        rows = memory.spill_and_transfer(f)
    finally:
        memory.MIN_SHARE = saved
    transfer = [r for r in rows if r["kind"] == "transfer-bound"]
    assert transfer
    assert transfer[0]["evidence"]["bytes"] > 0
