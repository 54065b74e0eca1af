"""The run bar on a real kernel: pause/resume, switching runs, and the export buttons
(downloads checked by loading them: the trace as JSON, the run file with
``daskprofile.load``, the HTML snapshot opened offline in Chromium)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import (
    PANEL,
    open_notebook_in_workspace,
    open_panel,
    output_value,
    panel_data,
    run_code,
    wait_data,
    wait_status,
)

import daskprofile
from conftest import write_notebook

SLOW = 240_000  # ms: the machine is shared, computes may crawl
PAUSE = ".jp-DaskProfile-pause"
NAPS = (
    "import dask, time; "
    "parts = [dask.delayed(time.sleep)(0.02, dask_key_name=({name!r}, i)) for i in range({n})]; "
    "_ = dask.compute(*parts)"
)
LAST_RUN = "import daskprofile.record.history as R; print('RUN', R.history()[-1].meta['id'])"
STALE = (  # runs the kernel holds back for the (only) paused panel
    "from daskprofile.jupyter import comm as _c; "
    "print('STALE', *sorted(c.stale for c in _c.hub().publisher.connections.values())[0])"
)
BOKEH_IDLE = (
    "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents.every(d => d.is_idle)"
)


def _run(page: Any, name: str, n: int) -> str:
    run_code(page, NAPS.format(name=name, n=n), timeout=SLOW)
    return output_value(run_code(page, LAST_RUN), "RUN")


def _download(page: Any, fmt: str, to: Path) -> Path:
    with page.expect_download(timeout=120_000) as info:
        page.locator(f".jp-DaskProfile-exports button[data-format='{fmt}']").click()
    download = info.value
    path = to / download.suggested_filename
    download.save_as(path)
    return path


def test_pause_resume_switch_runs_and_export(page: Any, lab: Any, tmp_path: Path) -> None:
    write_notebook(lab.root, "controls.ipynb", [""])
    open_notebook_in_workspace(page, lab, "controls.ipynb", "controls")
    open_panel(page)
    wait_status(page, "connected")
    first = _run(page, "nap", 20)
    wait_data(page, "run", f"v === '{first}'", timeout=SLOW)
    wait_data(page, "tasks", "v === '20'")

    # paused: the kernel records the next run and holds it back
    page.locator(PAUSE).click()
    page.wait_for_selector(f"{PAUSE}[data-paused='true']")
    assert page.locator(PAUSE).inner_text() == "Resume"
    second = _run(page, "snooze", 30)
    assert output_value(run_code(page, STALE), "STALE") == second
    assert panel_data(page, "run") == first
    assert panel_data(page, "runs") == "1"

    # resumed: the held run arrives whole, and is followed
    page.locator(PAUSE).click()
    page.wait_for_selector(f"{PAUSE}[data-paused='false']")
    wait_data(page, "run", f"v === '{second}'")
    wait_data(page, "tasks", "v === '30'")
    wait_data(page, "run-state", "v === 'finished'")
    assert panel_data(page, "runs") == "2"

    # the run list switches between them
    select = page.locator(".jp-DaskProfile-runSelect")
    select.select_option(index=0)
    wait_data(page, "run", f"v === '{first}'")
    wait_data(page, "tasks", "v === '20'")
    assert "nap" in page.locator(".jp-DaskProfile-legend").inner_text()
    select.select_option(index=1)
    wait_data(page, "run", f"v === '{second}'")
    wait_data(page, "tasks", "v === '30'")
    assert "snooze" in page.locator(".jp-DaskProfile-legend").inner_text()

    # exports of the selected run
    trace = json.loads(_download(page, "trace", tmp_path).read_text())
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert len(spans) == 30
    assert {e["name"] for e in spans} == {"snooze"}
    assert any(e.get("ph") == "C" for e in trace["traceEvents"])  # CPU/memory counters

    saved = daskprofile.load(_download(page, "run", tmp_path))
    assert saved.meta["id"] == second
    assert len(saved.tasks) == 30
    assert set(saved.tasks["group"]) == {"snooze"}

    html = _download(page, "html", tmp_path)
    assert "Saved" in page.locator(".jp-DaskProfile-runBar").inner_text()
    snapshot = page.context.new_page()
    refused: list[str] = []
    errors: list[str] = []
    snapshot.route(
        "**/*",
        lambda r: (
            r.continue_()
            if r.request.url.startswith(("file:", "data:"))
            else (refused.append(r.request.url), r.abort())
        ),
    )
    snapshot.on("pageerror", lambda e: errors.append(str(e)))
    snapshot.goto(html.as_uri())
    snapshot.wait_for_function(BOKEH_IDLE, timeout=60_000)
    assert "snooze" in snapshot.content()
    assert refused == []  # self-contained: nothing fetched from a server or CDN
    assert errors == []
    snapshot.close()
    assert not [e for e in page.console_errors if "daskprofile" in e]
    assert page.locator(PANEL).is_visible()
