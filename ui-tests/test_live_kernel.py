"""End to end: the panel on a real ipykernel computing with Dask, in a real JupyterLab and
a real Chromium. Code is typed into notebook cells and run with Shift+Enter; the tests wait
on the panel's data attributes (mirrors of its model) and read canvas pixels."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from helpers import (
    PANEL,
    activate_tab,
    canvas_stats,
    first_time,
    open_from_path,
    open_notebook_in_workspace,
    open_panel,
    output_value,
    panel_data,
    panel_log,
    record_panel,
    restart_kernel,
    run_code,
    run_command,
    submit_code,
    wait_cell_done,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

STREAM = ".jp-DaskProfile-taskStream canvas"
LINES = ".jp-DaskProfile-resources canvas"
FLAME = ".jp-DaskProfile-flame canvas"
PROGRESS = ".jp-DaskProfile-progress"

# a few seconds of dask.array work on 2 threads, ~900 tasks: matmul blocks keep the CPU
# busy; the input blocks also nap (64 x 0.12 s), so the run lasts several stack-sampler
# cycles (1 s each, sent when complete) however fast the machine is
MATMUL = (
    "import time, dask.array as da; "
    "x = da.random.random((1000, 1000), chunks=(125, 125))"
    ".map_blocks(lambda b: time.sleep(0.12) or b, name='slow-input'); "
    "t_start = time.time(); total = (x @ x.T).sum().compute(); t_done = time.time(); "
    "print('T_START', t_start); print('T_DONE', t_done)"
)
# what the kernel recorded for the last cell's run
KERNEL_TASKS = (
    "import daskprofile.record.history as R; run = R.history()[-1]; "
    "print('TASKS', len(run.tasks)); print('RUN', run.meta['id'])"
)
SLOW = 240_000  # ms: the machine is shared, computes may crawl


def _connected(page: Any, lab: Any, name: str, workspace: str) -> None:
    write_notebook(lab.root, name, [""])
    open_notebook_in_workspace(page, lab, name, workspace)
    open_panel(page)
    wait_status(page, "connected")


def _wait_or_explain(page: Any, predicate: str, timeout: float = SLOW) -> None:
    """Wait for JS ``predicate``; on timeout fail with the panel's recorded states."""
    try:
        page.wait_for_function(predicate, timeout=timeout)
    except Exception as exc:
        keep = ("t", "status", "runState", "tasks", "resources", "flameNodes")
        states = [{k: v for k, v in st.items() if k in keep} for st in panel_log(page)[-8:]]
        rects = page.evaluate(f"() => document.querySelector('{STREAM}')?.dataset.rects")
        raise AssertionError(f"{exc}\npanel states: {states}\nstream rects: {rects}") from exc


def _blank(page: Any) -> dict[str, float]:
    """How much of each canvas an empty panel fills (axes, grid, labels)."""
    return {sel: float(canvas_stats(page, sel)["filled"]) for sel in (STREAM, LINES, FLAME)}


def _pixels_drawn(
    page: Any, blank: dict[str, float], selectors: tuple[str, ...] = (STREAM, LINES, FLAME)
) -> dict[str, dict[str, Any]]:
    """Each canvas has clearly more drawn on it than when the panel was empty (whose
    lines canvas holds a "no samples yet" text: a few samples in, the lines are shorter)."""
    stats = {sel: canvas_stats(page, sel) for sel in selectors}
    for sel, s in stats.items():
        assert s["filled"] > blank[sel] + 0.02, (sel, s, blank[sel])
    return stats


def test_live_run_streams_completes_and_survives_reload(page: Any, lab: Any, capsys: Any) -> None:
    _connected(page, lab, "live.ipynb", "live")
    widen_panel(page, 800)
    page.wait_for_function(f"() => document.querySelector('{STREAM}').width > 0")
    blank = _blank(page)
    record_panel(page)
    cell = submit_code(page, MATMUL)

    # while the cell runs: rectangles, resource samples and flame nodes arrive, live
    wait_data(page, "run-state", "v === 'live'", timeout=SLOW)
    _wait_or_explain(
        page,
        f"""() => {{
            const d = document.querySelector('{PANEL}').dataset;
            return d.runState === 'live' && Number(d.tasks) > 0 && Number(d.resources) > 0
                && Number(d.flameNodes) > 0
                && Number(document.querySelector('{STREAM}').dataset.rects) > 0
                && Number(document.querySelector('{PROGRESS}').dataset.done) > 0;
        }}""",
    )
    live = _pixels_drawn(page, blank, (STREAM, FLAME))  # the lines: a few samples yet
    progress = page.locator(PROGRESS)
    done = int(progress.get_attribute("data-done") or 0)
    assert 0 < done <= int(progress.get_attribute("data-total") or 0)
    live_state = {k: panel_data(page, k) for k in ("tasks", "resources", "flame-nodes")}

    out = wait_cell_done(cell, SLOW)
    t_start, t_done = float(output_value(out, "T_START")), float(output_value(out, "T_DONE"))
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    kernel = run_code(page, KERNEL_TASKS)
    n, run_id = int(output_value(kernel, "TASKS")), output_value(kernel, "RUN")
    assert n > 500
    wait_data(page, "tasks", f"v === '{n}'")
    assert panel_data(page, "run") == run_id
    assert panel_data(page, "runs") == "1"
    assert f"{n:,}" in page.locator(".jp-DaskProfile-runBar").inner_text()
    final = _pixels_drawn(page, blank)

    log = panel_log(page)
    first_rows = first_time(log, lambda s: int(s.get("tasks") or 0) > 0)
    all_rows = first_time(log, lambda s: s.get("tasks") == str(n))
    finished = first_time(log, lambda s: s.get("runState") == "finished")
    assert first_rows is not None
    assert all_rows is not None
    assert finished is not None
    # the first rows were on screen before the compute returned: streamed, not replayed
    assert first_rows < t_done, (first_rows, t_done)
    with capsys.disabled():
        print(
            "\nlive_kernel lag:",
            json.dumps(
                {
                    "tasks": n,
                    "compute_s": round(t_done - t_start, 2),
                    "first_rows_after_start_s": round(first_rows - t_start, 3),
                    "all_rows_after_compute_end_s": round(all_rows - t_done, 3),
                    "run_end_after_compute_end_s": round(finished - t_done, 3),
                    "while_live": live_state,
                    "live_filled": {k: round(v["filled"], 3) for k, v in live.items()},
                    "final_filled": {k: round(v["filled"], 3) for k, v in final.items()},
                }
            ),
        )

    # reload (same workspace, same kernel): the kernel replays the run it kept
    # (not waiting on the toolbar's kernel indicator: the widened panel, restored with the
    # layout, can push it into the toolbar's overflow menu)
    page.goto(f"{lab.url}lab/workspaces/live/tree/live.ipynb?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
    open_panel(page)
    wait_status(page, "connected")
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "tasks", f"v === '{n}'")
    assert panel_data(page, "run") == run_id
    assert int(panel_data(page, "resources")) > 0
    wait_data(page, "flame-nodes", "Number(v) > 0")
    page.wait_for_function(f"() => Number(document.querySelector('{STREAM}').dataset.rects) > 0")
    _pixels_drawn(page, blank)
    assert not [e for e in page.console_errors if "daskprofile" in e]
    assert time.time() > t_done
    # the page before the reload closed its comm: the kernel streams to one panel only
    out = run_code(
        page,
        "from daskprofile.jupyter import comm as _c; "
        "print('panels', len(_c.hub().publisher.connections))",
    )
    assert "panels 1" in out


NAPS = (
    "import dask, time; "
    "naps = [dask.delayed(time.sleep)(0.05, dask_key_name=('nap', i)) for i in range(20)]; "
    "_ = dask.compute(*naps)"
)


def test_kernel_restart_is_announced_and_the_next_run_shown(page: Any, lab: Any) -> None:
    _connected(page, lab, "restart.ipynb", "restart")
    run_code(page, NAPS)
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "tasks", "v === '20'")
    before = panel_data(page, "run")

    restart_kernel(page)
    wait_data(page, "notice", "v === 'restarted'", timeout=SLOW)
    wait_status(page, "connected")
    assert "kernel restarted" in page.locator(PANEL).inner_text()
    wait_data(page, "runs", "v === '0'")

    run_code(page, NAPS)
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "tasks", "v === '20'")
    wait_data(page, "notice", "v === ''")
    assert panel_data(page, "run") not in ("", before)
    assert panel_data(page, "runs") == "1"
    assert "kernel restarted" not in page.locator(PANEL).inner_text()
    assert not [e for e in page.console_errors if "daskprofile" in e]


def test_switching_notebooks_away_and_back_replays_the_run(page: Any, lab: Any) -> None:
    write_notebook(lab.root, "other.ipynb", [""])
    _connected(page, lab, "first.ipynb", "switch")
    run_code(page, NAPS)
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "tasks", "v === '20'")
    run_id = panel_data(page, "run")

    open_from_path(page, "other.ipynb")  # another kernel: the panel follows it, no runs yet
    page.wait_for_selector(f"{PANEL}[data-path='other.ipynb']", state="attached")
    open_panel(page)  # opening from a path shows the file browser in the sidebar
    wait_status(page, "connected", timeout=SLOW)
    wait_data(page, "runs", "v === '0'")

    activate_tab(page, "first.ipynb")  # back: the first kernel replays its run
    page.wait_for_selector(f"{PANEL}[data-path='first.ipynb']")
    wait_status(page, "connected")
    wait_data(page, "run", f"v === '{run_id}'")
    wait_data(page, "tasks", "v === '20'")
    wait_data(page, "run-state", "v === 'finished'")
    assert not [e for e in page.console_errors if "daskprofile" in e]


HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_RUN = (  # the name leads: the run's title (the cell's source) shows it too
    f"name = {HOSTILE!r}; import dask, time; "
    "parts = [dask.delayed(time.sleep)(0.4, dask_key_name=(name, i)) for i in range(4)]; "
    "_ = dask.compute(*parts)"
)


def test_task_keys_with_html_from_the_kernel_are_text(page: Any, lab: Any) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    _connected(page, lab, "hostile.ipynb", "hostile")
    widen_panel(page, 800)
    run_code(page, HOSTILE_RUN)
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "tasks", "v === '4'")
    # dask's key_split names the group "img"; the full key shows on hover
    assert "img" in page.locator(".jp-DaskProfile-legend").inner_text()

    # hover along the first lane until a task's tooltip shows, with its key fetched
    canvas = page.locator(STREAM)
    page.wait_for_function(f"() => Number(document.querySelector('{STREAM}').dataset.rects) > 0")
    box = canvas.bounding_box()
    lanes = int(panel_data(page, "workers"))
    y = box["y"] + 18 + (box["height"] - 18) / max(1, lanes) / 2
    tooltip = page.locator(".jp-DaskProfile-taskStream .jp-DaskProfile-tooltip")
    for frac in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.05, 0.7, 0.8):
        page.mouse.move(box["x"] + 72 + (box["width"] - 72) * frac, y)
        try:
            tooltip.wait_for(state="visible", timeout=2_000)
            break
        except Exception:
            continue
    tooltip.wait_for(state="visible", timeout=10_000)
    page.wait_for_function(
        """(key) => document.querySelector(
            '.jp-DaskProfile-taskStream .jp-DaskProfile-tooltip').textContent.includes(key)""",
        arg=f"('{HOSTILE}', ",
        timeout=60_000,
    )
    assert HOSTILE in tooltip.inner_text()
    assert tooltip.locator("img").count() == 0
    assert page.locator(f"{PANEL} img").count() == 0
    assert page.locator("img[src='x']").count() == 0
    # the run's title (the cell's source) is text too
    assert HOSTILE in page.locator(".jp-DaskProfile-runBar select").inner_text()
    assert dialogs == []


# the README's demo workload (examples/demo.ipynb): a tall-and-skinny QR, then Q @ R
DEMO = "\n".join(  # one statement a line, no indentation: nothing for the editor to indent
    [
        "import dask, dask.array as da",
        "x = da.random.random((10000, 1000), chunks=(1000, 1000))",
        "q, r = da.linalg.qr(x)",
        "q_np, r_np = dask.compute(q, r)",
        "product = q.dot(r).compute()",
    ]
)


@pytest.mark.timeout(1200)
def test_demo_run_screenshots_light_and_dark(page: Any, lab: Any, screenshots: Any) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    _connected(page, lab, "demo.ipynb", "demo")
    widen_panel(page, 960)
    page.wait_for_function(f"() => document.querySelector('{STREAM}').width > 0")
    blank = _blank(page)
    run_code(page, DEMO, timeout=900_000)
    wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
    wait_data(page, "flame-nodes", "Number(v) > 5")
    page.wait_for_function(f"() => Number(document.querySelector('{STREAM}').dataset.rects) > 0")
    wait_data(page, "theme", "v === 'light'")
    light = _pixels_drawn(page, blank)
    assert light[STREAM]["colors"] >= 4, light
    assert light[LINES]["luminance"] > 0.7, light
    page.keyboard.press("Escape")  # command mode: no cursor in the picture
    page.mouse.move(5, 990)  # no hover, no tooltip in the picture
    page.screenshot(path=str(screenshots / "panel.png"))

    try:
        run_command(page, "Use Theme: JupyterLab Dark")
        wait_data(page, "theme", "v === 'dark'")
        page.wait_for_function(  # the lines' canvas redrawn on a dark background
            f"""() => {{
                const c = document.querySelector('{LINES}');
                const d = c.getContext('2d').getImageData(2, c.height - 3, 1, 1).data;
                return d[0] + d[1] + d[2] < 200;
            }}"""
        )
        # JupyterLab fades a splash screen over the page while it switches themes
        page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=60_000)
        for selector in (STREAM, LINES, FLAME):
            dark = canvas_stats(page, selector)
            assert dark["luminance"] < light[selector]["luminance"], (selector, dark)
        for selector in (STREAM, LINES, FLAME):  # drawn on the dark theme's background
            assert sum(canvas_stats(page, selector)["background"]) < 200, selector
        assert canvas_stats(page, LINES)["luminance"] < 0.35
        page.screenshot(path=str(screenshots / "panel-dark.png"))
        assert not [e for e in page.console_errors if "daskprofile" in e]
    finally:
        run_command(page, "Use Theme: JupyterLab Light")
        wait_data(page, "theme", "v === 'light'")
