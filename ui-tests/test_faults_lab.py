"""Lab-side faults in the middle of a run (issue 18), in a real JupyterLab and a real
Chromium: a cell computes for ~10 s with the panel open, and meanwhile

- the page is reloaded: the panel comes back with the run (live or finished, then
  finished), the compute's result is right, no daskprofile error reached the console;
- the kernel is restarted (threads scheduler, and a ``LocalCluster`` made in the
  notebook): the panel says so, reconnects to the new kernel, keeps no run "live" from the
  old one, and records the next compute; nothing hangs.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import (
    PANEL,
    open_notebook_in_workspace,
    open_panel,
    output_value,
    panel_data,
    panel_log,
    record_panel,
    restart_kernel,
    run_code,
    submit_code,
    wait_data,
    wait_status,
)

from conftest import write_notebook

SLOW = 240_000  # ms: the machine is shared
NAPS = 80  # 80 naps of 0.25 s on 2 threads: ~10 s
THREADS = (
    "import time, dask\n"
    "def nap(i):\n"
    "    time.sleep(0.25)\n"
    "    return i\n"
    f"parts = [dask.delayed(nap)(i, dask_key_name=('nap', i)) for i in range({NAPS})]\n"
    "total = sum(dask.compute(*parts, scheduler='threads', num_workers=2))\n"
    "print('TOTAL', total)"
)
# the same on a LocalCluster of 2 worker processes made in the notebook
CLUSTER = (
    "import time, dask\n"
    "from distributed import Client, LocalCluster\n"
    "cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=':0')\n"
    "client = Client(cluster)\n"
    "def nap(i):\n"
    "    time.sleep(0.25)\n"
    "    return i\n"
    f"parts = [dask.delayed(nap)(i, dask_key_name=('nap', i)) for i in range({NAPS})]\n"
    "total = sum(dask.compute(*parts))\n"
    "print('TOTAL', total)"
)
AFTER = (
    "import dask, time\n"
    "naps = [dask.delayed(time.sleep)(0.02, dask_key_name=('after', i)) for i in range(20)]\n"
    "print('AFTER', len(dask.compute(*naps, scheduler='threads')))"
)


def _connected(page: Any, lab: Any, name: str) -> None:
    write_notebook(lab.root, name, [""])
    open_notebook_in_workspace(page, lab, name, name.removesuffix(".ipynb"))
    open_panel(page)
    wait_status(page, "connected")
    record_panel(page)


def _mid_run(page: Any, source: str) -> Any:
    """Run ``source`` and return its cell once the panel shows its run live, tasks in."""
    cell = submit_code(page, source)
    wait_data(page, "run-state", "v === 'live'", timeout=SLOW)
    wait_data(page, "tasks", "Number(v) >= 4", timeout=SLOW)
    assert int(panel_data(page, "tasks")) < NAPS, "the run ended before the fault"
    return cell


def _daskprofile_errors(page: Any) -> list[str]:
    return [e for e in page.console_errors if "daskprofile" in e.lower()]


def test_reloading_the_page_mid_run_shows_the_run_and_keeps_the_result(page: Any, lab: Any) -> None:
    name = "reload-mid-run.ipynb"
    _connected(page, lab, name)
    _mid_run(page, THREADS)
    run = panel_data(page, "run")

    page.reload()
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
    open_panel(page)
    # the kernel is busy with the cell: the panel connects once it may run its
    # registration, and shows the run, live or already finished
    wait_status(page, "connected", timeout=SLOW)
    wait_data(page, "run", f"v === '{run}'", timeout=SLOW)
    assert panel_data(page, "run-state") in ("live", "finished")
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "tasks", f"v === '{NAPS}'", timeout=SLOW)
    assert panel_data(page, "runs") == "1"
    # the page that ran the cell is gone with its output: the kernel kept the result
    out = run_code(page, "print('TOTAL', total)", timeout=SLOW)
    assert output_value(out, "TOTAL") == str(sum(range(NAPS))), out
    assert _daskprofile_errors(page) == []
    # and the next cell is recorded as usual
    assert output_value(run_code(page, AFTER, timeout=SLOW), "AFTER") == "20"
    wait_data(page, "runs", "v === '2'", timeout=SLOW)  # (the print made no run)
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    assert _daskprofile_errors(page) == []


@pytest.mark.parametrize("where", ["threads", "cluster"])
def test_restarting_the_kernel_mid_run_reconnects_and_records_the_next_run(
    page: Any, lab: Any, where: str
) -> None:
    name = f"restart-mid-run-{where}.ipynb"
    _connected(page, lab, name)
    cell = _mid_run(page, THREADS if where == "threads" else CLUSTER)
    before = panel_data(page, "run")

    restart_kernel(page)
    wait_data(page, "notice", "v === 'restarted'", timeout=SLOW)
    wait_status(page, "connected", timeout=SLOW)
    assert "kernel restarted" in page.locator(PANEL).inner_text()
    # the old kernel's run is gone, not left live
    wait_data(page, "runs", "v === '0'", timeout=SLOW)
    assert panel_data(page, "run-state") != "live"
    assert panel_data(page, "run") == ""
    # the interrupted cell ran no further and the kernel answers
    assert "TOTAL" not in cell.locator(".jp-OutputArea").inner_text()
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=SLOW)

    assert output_value(run_code(page, AFTER, timeout=SLOW), "AFTER") == "20"
    wait_data(page, "runs", "v === '1'", timeout=SLOW)
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "tasks", "v === '20'", timeout=SLOW)
    wait_data(page, "notice", "v === ''", timeout=SLOW)
    assert panel_data(page, "run") not in ("", before)
    # no state where the old run stayed live after the restart was announced
    log = panel_log(page)
    announced = next(i for i, s in enumerate(log) if s.get("notice") == "restarted")
    stale = [s for s in log[announced:] if s.get("run") == before and s.get("runState") == "live"]
    assert stale == [], stale[:3]
    assert _daskprofile_errors(page) == []
