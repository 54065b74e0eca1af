"""The Dask Profile panel in a real JupyterLab, with real kernels, in real Chromium."""

from __future__ import annotations

from typing import Any

from helpers import (
    NOTEBOOK,
    PANEL,
    activate_tab,
    open_from_path,
    open_notebook,
    open_panel,
    run_code,
    wait_status,
)

from conftest import write_notebook


def test_panel_connects_to_the_active_notebooks_kernel(
    page: Any, lab: Any, screenshots: Any
) -> None:
    name = write_notebook(lab.root, "connect.ipynb", ["1 + 1"])
    open_notebook(page, lab, name)
    panel = open_panel(page)
    wait_status(page, "connected")

    assert "Python 3" in (panel.get_attribute("data-kernel") or "")
    assert panel.get_attribute("data-path") == name
    text = panel.inner_text()
    assert "Kernel: Python 3" in text
    assert "Connected: daskprofile" in text
    page.screenshot(path=str(screenshots / "panel-connected.png"))
    assert not [e for e in page.console_errors if "daskprofile" in e]


def test_panel_follows_notebook_switches_and_says_when_daskprofile_is_missing(
    page: Any, lab: Any
) -> None:
    with_dp = write_notebook(lab.root, "with.ipynb", ["1"])
    without = write_notebook(lab.root, "without.ipynb", ["1"], kernel="bare")
    open_notebook(page, lab, with_dp)
    open_panel(page)
    wait_status(page, "connected")

    open_from_path(page, without)  # a second tab in the same page: the panel follows it
    page.wait_for_selector(
        f"{NOTEBOOK} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
    )
    open_panel(page)  # "Open from Path" shows the file browser in the left area
    wait_status(page, "missing")
    panel = page.locator(PANEL)
    assert "Bare Python" in (panel.get_attribute("data-kernel") or "")
    assert "%pip install daskprofile" in panel.inner_text()

    activate_tab(page, with_dp)  # and back
    wait_status(page, "connected")
    assert panel.get_attribute("data-path") == with_dp


def test_panel_without_a_notebook_says_so(page: Any, lab: Any) -> None:
    page.goto(f"{lab.url}lab/workspaces/empty?reset&token={lab.token}")
    page.wait_for_selector(".jp-LabShell", timeout=60_000)
    open_panel(page)
    wait_status(page, "no-kernel")
    assert "No notebook open" in page.locator(PANEL).inner_text()


def test_a_kernel_of_another_protocol_major_gets_a_clear_message(page: Any, lab: Any) -> None:
    """A kernel speaking protocol 2.x (simulated by setting its version before the panel
    connects) refuses the panel's hello; the panel says why and what to install."""
    name = write_notebook(lab.root, "newer.ipynb", [""])
    open_notebook(page, lab, name)
    run_code(page, "import daskprofile.jupyter.comm as c; c.PROTOCOL_VERSION = '2.0'")
    open_panel(page)
    wait_status(page, "incompatible")
    text = page.locator(PANEL).inner_text()
    assert "2.0" in text, text
    assert "1.3" in text, text  # the panel's protocol
    assert "pip install" in text, text
    assert page.locator(PANEL).get_attribute("data-runs") == "0"
