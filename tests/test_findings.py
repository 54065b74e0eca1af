"""Findings on real local schedulers: each kind on a workload built to have it, and its
twin built not to (no false positive); findings of a saved run equal the original's."""

from __future__ import annotations

import time
from pathlib import Path

import dask
import dask.callbacks
import numpy as np
import pytest
from dask import delayed

import daskprofile
from daskprofile import profile
from daskprofile.findings import _facts, memory


def spin(i: int) -> int:
    """Pure Python for 0.1 s: holds the GIL."""
    t, s = time.perf_counter(), 0
    while time.perf_counter() - t < 0.1:
        for j in range(1000):
            s += j
    return s


def matmul(i: int) -> float:
    """numpy matrix products: release the GIL."""
    a = np.random.default_rng(i).random((400, 400))
    for _ in range(6):
        a = a @ a / 400
    return float(a.sum())


def nap(x: int, t: float = 0.02) -> int:
    time.sleep(t)
    return x + 1


def tiny(x: int) -> int:
    return x + 1


def kinds(run: daskprofile.Run) -> set[str]:
    return set(run.findings()["kind"])


def chain(n: int = 25, t: float = 0.02) -> object:
    x = delayed(nap)(0, t)
    for _ in range(n):
        x = delayed(nap)(x, t)
    return x


def test_gil_bound_pure_python_on_threads_but_not_numpy() -> None:
    with profile() as spun:
        dask.compute(*[delayed(spin)(i) for i in range(12)], scheduler="threads", num_workers=3)
    with profile() as numeric:
        dask.compute(*[delayed(matmul)(i) for i in range(12)], scheduler="threads", num_workers=2)
    found = spun.findings()
    gil = found[found.kind == "gil-bound"]
    assert list(gil.group) == ["spin"]
    assert gil.evidence.iloc[0]["busy_threads"] > 1.5
    assert gil.impact_s.iloc[0] > 0
    assert "gil-bound" not in kinds(numeric)


def test_gil_bound_not_on_the_processes_scheduler() -> None:
    with profile() as run:
        dask.compute(*[delayed(spin)(i) for i in range(4)], scheduler="processes", num_workers=2)
    assert "gil-bound" not in kinds(run)


def test_critical_path_of_a_chain_but_not_of_a_wide_graph() -> None:
    with profile() as chained:
        chain(25).compute(scheduler="threads", num_workers=2)
    with profile() as wide:
        dask.compute(*[delayed(nap)(i) for i in range(40)], scheduler="threads", num_workers=2)
    found = chained.findings()
    path = found[found.kind == "critical-path"].iloc[0]
    assert path.group == "nap (26)"
    assert path.evidence["path_tasks"] == 26
    assert path.evidence["path_s"] == pytest.approx(chained.tasks.eval("stop - start").sum())
    assert "More workers will not" in path.message
    assert "critical-path" not in kinds(wide)
    # idle: the chain leaves a worker with nothing ready; the wide graph keeps both busy
    idle = found[found.kind == "idle"]
    assert "parallelism" in set(idle.group)
    assert "parallelism" not in set(wide.findings().query("kind == 'idle'").group)


def test_critical_path_on_the_processes_scheduler() -> None:
    with profile() as run:
        chain(6, 0.2).compute(scheduler="processes", num_workers=2)
    assert run.raw("edges")["indices"].size == 6
    assert "critical-path" in kinds(run)


def test_overhead_bound_tiny_tasks_but_not_50ms_tasks() -> None:
    with profile() as small:
        dask.compute(*[delayed(tiny)(i) for i in range(3000)], scheduler="threads", num_workers=2)
    with profile() as big:
        dask.compute(*[delayed(nap)(i, 0.05) for i in range(8)], scheduler="threads", num_workers=2)
    found = small.findings()
    row = found[found.kind == "overhead-bound"].iloc[0]
    assert row.group == "tiny"
    assert row.evidence["chunk_factor"] >= 2
    assert "x larger" in row.suggestion
    assert "overhead-bound" not in kinds(big)


def test_outside_tasks_between_computes_but_not_in_one_compute() -> None:
    with profile() as gappy:
        delayed(nap)(1).compute(scheduler="threads")
        time.sleep(0.3)
        delayed(nap)(2).compute(scheduler="threads")
    with profile() as one:
        dask.compute(*[delayed(nap)(i, 0.05) for i in range(8)], scheduler="threads", num_workers=2)
    computes = gappy.raw("computes")
    assert len(computes["id"]) == 2
    assert np.all(np.isfinite(computes["call"]))
    assert np.all(computes["call"] <= computes["submit"])
    row = gappy.findings().query("kind == 'outside-tasks'").iloc[0]
    assert row.evidence["between_computes_s"] >= 0.25
    assert "outside-tasks" not in kinds(one)


def test_memory_peak_against_what_is_available() -> None:
    def hold(i: int) -> np.ndarray:
        return np.ones(6_000_000) * i  # 48 MB each, held until the compute returns

    with profile() as run:
        dask.compute(*[delayed(hold)(i) for i in range(4)], scheduler="threads", num_workers=2)
    f = _facts.facts(run)
    peak = int(run.resources.memory.max())
    found = memory.memory(f, available=peak * 1.2)
    assert found
    assert found[0]["evidence"]["peak_bytes"] == peak
    assert found[0]["group"] == "hold"  # the cache table: the group holding most at the peak
    assert memory.memory(f, available=peak * 10) == []
    assert "memory" not in kinds(run)  # far from this machine's memory


def test_what_if_replays_the_graph() -> None:
    with profile() as run:
        dask.compute(
            *[delayed(nap)(i, 0.03) for i in range(16)], scheduler="threads", num_workers=2
        )
    table = run.what_if([1, 2, 4])
    one, two, four = table.wall_time
    assert one > two > four
    assert one == pytest.approx(2 * two, rel=0.25)
    with pytest.raises(ValueError, match="workers"):
        run.what_if([0])
    with pytest.raises(TypeError, match="workers"):
        run.what_if(["2"])


def test_what_if_counts_the_time_lost_between_tasks() -> None:
    """A third of the hand-overs take 15 ms (a callback sleeping in dask's scheduling
    thread, as a busy machine's late wake-ups do): the typical gap stays small, but the
    replay of the recorded 1-worker run must still come to its measured wall time."""

    def late(key: object, result: object, dsk: object, state: object, worker: object) -> None:
        late.calls += 1  # type: ignore[attr-defined]
        if late.calls % 3 == 0:  # type: ignore[attr-defined]
            time.sleep(0.015)

    late.calls = 0  # type: ignore[attr-defined]
    with profile() as run, dask.callbacks.Callback(posttask=late):
        dask.compute(*[delayed(nap)(i, 0.01) for i in range(45)], scheduler="threads",
                     num_workers=1)  # fmt: skip
    f = _facts.facts(run)
    typical = float(np.median(f.start[1:] - f.stop[:-1]))
    assert typical < 0.005  # most hand-overs are quick: a median would miss the late ones
    (one,) = run.what_if([1]).wall_time
    assert one == pytest.approx(run.summary()["wall_time"], rel=0.1)


def test_findings_of_a_saved_run_equal_the_original(tmp_path: Path) -> None:
    with profile() as run:
        chain(10).compute(scheduler="threads", num_workers=2)
        dask.compute(*[delayed(tiny)(i) for i in range(500)], scheduler="threads")
    loaded = daskprofile.load(run.save(tmp_path / "run.daskprof"))
    assert np.array_equal(loaded.raw("edges")["indices"], run.raw("edges")["indices"])
    a, b = run.findings(), loaded.findings()
    assert len(a)
    assert a.to_dict("records") == b.to_dict("records")
    assert run.summary()["findings"] == loaded.summary()["findings"]
    again = daskprofile.Run.from_dict(run.to_dict())
    assert again.findings().to_dict("records") == a.to_dict("records")


def test_span_filter_keeps_the_edges_among_its_tasks() -> None:
    with profile() as run:
        with daskprofile.span("first"):
            chain(4).compute(scheduler="sync")
        with daskprofile.span("second"):
            dask.compute(*[delayed(tiny)(i) for i in range(5)], scheduler="sync")
    first = run.filter(span="first")
    assert first.raw("edges")["indices"].size == 4
    assert len(first.raw("edges")["indptr"]) == len(first.tasks) + 1


def test_compute_calls_are_timed_only_while_recording() -> None:
    original = dask.compute
    with profile():
        assert dask.compute is not original
        assert dask.base.compute is dask.compute
    assert dask.compute is original
    assert dask.base.compute is original


def test_snapshot_opens_with_the_findings_and_cli_lines(tmp_path: Path) -> None:
    from daskprofile.cli import _finding_lines

    x = delayed(tiny)(0)
    for _ in range(10):
        x = delayed(nap)(x)
    with profile() as run:
        x.compute(scheduler="threads", num_workers=2)
    page = Path(run.to_html(tmp_path / "r.html")).read_text()
    findings = page.index('<section class="dp-findings">')
    assert findings < page.index('class="dp-summary')  # the run's section opens with them
    assert '<tr data-kind="critical-path">' in page
    row = page[page.index('<tr data-kind="critical-path">') :]
    assert "<td>tiny -&gt; nap (10)</td>" in row[: row.index("</tr>")]  # text is escaped
    assert "dp-what-if" in page  # the what-if chart
    lines = _finding_lines([run])
    assert any("critical-path" in line for line in lines)
