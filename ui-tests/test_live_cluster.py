"""End to end: a dask.distributed ``LocalCluster`` of worker processes, profiled by the
panel with no daskprofile code in the notebook, in a real JupyterLab and a real Chromium.

The notebook starts a cluster of 2 worker processes x 2 threads and computes on it; the
panel shows the cell's run while it computes and after: the kernel's task count, a lane per
worker thread grouped under each worker's address, each worker process's CPU and memory
(named in a legend), progress complete from the scheduler's totals; a reload replays the
same run with the same figures. The cluster is closed at the end (no process left)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from helpers import (
    PANEL,
    enable_test_hook,
    open_notebook_in_workspace,
    open_panel,
    output_value,
    panel_data,
    panel_log,
    record_panel,
    run_code,
    submit_code,
    wait_cell_done,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

STREAM = ".jp-DaskProfile-taskStream canvas"
LINES = ".jp-DaskProfile-resources canvas"
PROGRESS = ".jp-DaskProfile-progress"
SOURCE_LEGEND = ".jp-DaskProfile-sourceLegend"
SLOW = 240_000  # ms: the machine is shared, computes may crawl
WORKSPACE = "cluster"
NOTEBOOK = "cluster.ipynb"

# Short lines: the cells show whole in the screenshot. The text is inserted as is (no
# auto-indent). dashboard_address=None serves no dashboard, but the scheduler's HTTP
# server (health, metrics) still asks for port 8787 and warns in the cell when another
# scheduler holds it: scheduler_kwargs gives it a free port instead.
CLUSTER = "\n".join(
    [
        "from distributed import Client, LocalCluster",
        "cluster = LocalCluster(",
        "    n_workers=2, threads_per_worker=2,",
        "    processes=True, dashboard_address=None,",
        "    scheduler_kwargs={'dashboard_address': ':0'},",
        "    silence_logs=40)",
        "client = Client(cluster)",
        "workers = sorted(client.scheduler_info()['workers'])",
        "print('WORKERS', *workers)",
    ]
)
# a few seconds on 4 worker threads, ~900 tasks: the input blocks nap (64 x 0.25 s), the
# matmul blocks keep the CPU busy
COMPUTE = "\n".join(
    [
        "import time, dask.array as da",
        "def slow(block):",
        "    time.sleep(0.25)",
        "    return block",
        "x = da.random.random((1000, 1000), chunks=125)",
        "x = x.map_blocks(slow, name='slow-input')",
        "t_start = time.time()",
        "total = (x @ x.T).sum().compute()",
        "t_done = time.time()",
        "print('T_START', t_start)",
        "print('T_DONE', t_done)",
    ]
)
# what the kernel recorded for the cell's run
KERNEL_RUN = "\n".join(
    [
        "from daskprofile.record.history import history",
        "run = history()[-1]",
        "print('TASKS', len(run.tasks))",
        "print('RUN', run.meta['id'])",
        "print('GROUPS', run.tasks['group'].nunique())",
        "print('LANES', run.tasks['worker'].nunique())",
        "print('RESOURCES', len(run.resources))",
        "print('RTIMES', ','.join(f'{t:.3f}' for t in run.resources['time']))",
        "print('SPAN', f'{run.meta.t1 - run.t0:.3f}')",
    ]
)
CLOSE = "client.close(); cluster.close()"
# the kernel's children once the cluster is closed (multiprocessing's resource tracker
# may stay: it is not the cluster's)
CHILDREN = (
    "import psutil; kids = [' '.join(p.cmdline()) for p in psutil.Process().children(True)]; "
    "print('CLUSTER_PROCS', sum('resource_tracker' not in k for k in kids))"
)

# the figures the panel shows for its current run (samples per worker process come from
# the model, through the test hook: no view shows a count of them)
FIGURES_JS = f"""() => {{
    const d = document.querySelector('{PANEL}').dataset;
    const s = document.querySelector('{STREAM}').dataset;
    const r = document.querySelector('{LINES}').dataset;
    const p = document.querySelector('{PROGRESS}').dataset;
    const legend = document.querySelector('{SOURCE_LEGEND}');
    const named = legend ? [...legend.querySelectorAll('.jp-DaskProfile-legendItem[title]')] : [];
    const run = window.daskprofileTestHook?.model.current;
    const perSource = run ? Object.fromEntries(
        [...run.resourceSources].map(([source, series]) => [source, series.length])) : {{}};
    return {{
        run: d.run, runState: d.runState, runs: d.runs, tasks: d.tasks, groups: d.groups,
        workers: d.workers, resources: d.resources, perSource,
        lanes: s.lanes, laneGroups: s.groups, rects: s.rects,
        sources: r.sources, points: r.points,
        done: p.done, total: p.total,
        legendShown: !!legend && legend.style.display !== 'none' && legend.offsetHeight > 0,
        legend: named.map(e => e.textContent),
    }};
}}"""
# what a reload must show again, as before it
SAME = (
    "run",
    "runs",
    "tasks",
    "groups",
    "workers",
    "perSource",
    "lanes",
    "laneGroups",
    "sources",
    "done",
    "total",
    "legend",
)


def _figures(page: Any) -> dict[str, Any]:
    return page.evaluate(FIGURES_JS)  # type: ignore[no-any-return]


def _wait_or_explain(page: Any, predicate: str, timeout: float = SLOW) -> None:
    """Wait for JS ``predicate`` over ``f`` (the figures); on timeout show the last ones."""
    try:
        page.wait_for_function(
            f"() => {{ const f = ({FIGURES_JS})(); return {predicate}; }}", timeout=timeout
        )
    except Exception as exc:
        keep = ("t", "status", "runState", "tasks", "resources", "workers", "groups")
        states = [{k: v for k, v in st.items() if k in keep} for st in panel_log(page)[-8:]]
        raise AssertionError(
            f"{exc}\nwaited for: {predicate}\nfigures: {_figures(page)}\npanel states: {states}"
        ) from exc


def _check_finished(page: Any, run_id: str, n: int, workers: list[str]) -> dict[str, Any]:
    """The finished run as the panel shows it: ``n`` tasks on 4 lanes in 2 groups, 2 worker
    processes sampled and named, progress complete."""
    _wait_or_explain(
        page,
        f"""f.runState === 'finished' && f.run === '{run_id}' && f.tasks === '{n}'
            && f.lanes === '4' && f.laneGroups === '2' && Number(f.rects) > 0
            && f.sources === '2' && Number(f.points) > 0 && Number(f.resources) > 0
            && f.done === '{n}' && f.total === '{n}' && f.legendShown""",
    )
    f = _figures(page)
    assert f["runs"] == "1", f  # starting the cluster made no run
    assert f["workers"] == "4", f
    assert sorted(f["legend"]) == workers, f  # one line per worker process, by address
    assert sorted(f["perSource"]) == workers, f
    assert all(count > 0 for count in f["perSource"].values()), f
    legend = page.locator(f"{PANEL} .jp-DaskProfile-legend").inner_text()
    assert "slow-input" in legend, legend
    assert f"{n:,}" in page.locator(".jp-DaskProfile-runBar").inner_text()
    progress = page.locator(PROGRESS).inner_text()
    assert "slow-input" in progress, progress
    assert "64 / 64" in progress, progress
    return f


@pytest.mark.timeout(900)
def test_a_cluster_run_streams_with_lanes_per_worker_and_survives_reload(
    page: Any, lab: Any, screenshots: Any, capsys: Any
) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    enable_test_hook(page)
    write_notebook(lab.root, NOTEBOOK, [""])
    open_notebook_in_workspace(page, lab, NOTEBOOK, WORKSPACE)
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 900)
    page.wait_for_function(f"() => document.querySelector('{STREAM}').width > 0")

    t_cluster = time.time()
    workers = output_value(run_code(page, CLUSTER, timeout=SLOW), "WORKERS").split()
    try:
        cluster_s = time.time() - t_cluster
        assert len(workers) == 2, workers
        assert all(w.startswith("tcp://127.0.0.1:") for w in workers), workers
        assert panel_data(page, "runs") == "0"  # starting a cluster computes nothing

        record_panel(page)
        cell = submit_code(page, COMPUTE)
        # while it computes: the run is live, rows stream on the 4 worker threads' lanes in
        # 2 groups, progress counts against the scheduler's totals, both worker processes
        # are sampled
        _wait_or_explain(
            page,
            """f.runState === 'live' && Number(f.tasks) > 0 && Number(f.rects) > 0
               && f.lanes === '4' && f.laneGroups === '2'
               && Number(f.done) > 0 && Number(f.total) >= Number(f.done)
               && f.sources === '2' && Number(f.points) > 0""",
        )
        live = _figures(page)

        out = wait_cell_done(cell, SLOW)
        t_start, t_done = float(output_value(out, "T_START")), float(output_value(out, "T_DONE"))
        wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
        run_id = panel_data(page, "run")
        _wait_or_explain(page, "f.runState === 'finished' && f.done === f.total")
        page.keyboard.press("Escape")  # command mode: no cursor in the picture
        page.mouse.move(5, 990)  # no hover, no tooltip in the picture
        page.screenshot(path=str(screenshots / "panel-cluster.png"))

        kernel = run_code(page, KERNEL_RUN)
        n = int(output_value(kernel, "TASKS"))
        assert output_value(kernel, "RUN") == run_id, kernel
        assert n > 500, kernel
        assert output_value(kernel, "LANES") == "4", kernel  # 2 workers x 2 threads ran tasks
        final = _check_finished(page, run_id, n, workers)
        # every task group the kernel recorded is listed
        assert final["groups"] == output_value(kernel, "GROUPS"), (final, kernel)

        log = panel_log(page)
        first_rows = next((float(s["t"]) / 1000 for s in log if int(s.get("tasks") or 0)), None)
        finished = next(
            (float(s["t"]) / 1000 for s in log if s.get("runState") == "finished"), None
        )
        assert first_rows is not None
        assert finished is not None
        assert first_rows < t_done, (first_rows, t_done)  # streamed, not sent at the end
        with capsys.disabled():
            print(
                "\nlive_cluster:",
                json.dumps(
                    {
                        "tasks": n,
                        "cluster_start_s": round(cluster_s, 2),
                        "compute_s": round(t_done - t_start, 2),
                        "first_rows_after_start_s": round(first_rows - t_start, 3),
                        "run_end_after_compute_end_s": round(finished - t_done, 3),
                        "while_live": live,
                        "final": final,
                    }
                ),
            )

        live_times = page.evaluate(
            "() => Array.from(window.daskprofileTestHook.model.current.resources.time.view())"
            ".map(t => t.toFixed(3)).join(',')"
        )
        # reload (same workspace, same kernel): the kernel replays the run it kept
        page.goto(f"{lab.url}lab/workspaces/{WORKSPACE}/tree/{NOTEBOOK}?token={lab.token}")
        page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
        open_panel(page)
        wait_status(page, "connected")
        replayed = _check_finished(page, run_id, n, workers)
        assert {k: replayed[k] for k in SAME} == {k: final[k] for k in SAME}, (final, replayed)
        assert not [e for e in page.console_errors if "daskprofile" in e]
        # the run's total CPU/memory series: as many samples live, replayed and kept
        kept = output_value(kernel, "RESOURCES")
        assert (final["resources"], replayed["resources"]) == (kept, kept), (
            f"total resource samples: {final['resources']} streamed live, "
            f"{replayed['resources']} replayed, {kept} kept by the kernel; times live "
            f"{live_times}, kept {output_value(kernel, 'RTIMES')}, "
            f"run span {output_value(kernel, 'SPAN')}"
        )
    finally:
        run_code(page, CLOSE, timeout=SLOW)
    # no worker process left behind
    assert output_value(run_code(page, CHILDREN), "CLUSTER_PROCS") == "0"
