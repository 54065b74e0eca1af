"""Where the panel lives (real JupyterLab, real Chromium): moved to the main area beside
the notebook and back by the commands, still there after a reload, keeping its kernel
connection and runs; in a sidebar it opens at a readable width and keeps one the user
chose."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers import (
    NOTEBOOK,
    PANEL,
    PANEL_TAB,
    enable_test_hook,
    open_from_path,
    open_notebook_in_workspace,
    open_panel,
    panel_area,
    panel_data,
    put_settings,
    run_command,
    settle,
    synthetic_run,
    wait_area,
    wait_data,
    wait_server,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

STREAM = ".jp-DaskProfile-taskStream canvas"
SETTINGS = "lab/api/settings/daskprofile:plugin"
FILEBROWSER_TAB = '.lm-TabBar-tab[data-id="filebrowser"]'
SIDEBAR_TAB = f".jp-SideBar {PANEL_TAB}"
MAIN_TAB = f".lm-DockPanel-tabBar {PANEL_TAB}"
WINDOW = 1400  # the page fixture's viewport width
OPENING = 490  # the sidebar width the panel opens at in it: 35% (src/widths.ts)


@pytest.fixture
def placement_settings(lab: Any) -> Iterator[None]:
    """The commands write the `placement` setting: back to the defaults afterwards."""
    yield
    put_settings(lab, {})


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return dict(box)


def _stream_width(page: Any) -> float:
    return float(page.evaluate(f"() => document.querySelector('{STREAM}').offsetWidth"))


def _assert_beside_the_notebook(page: Any) -> None:
    notebook, panel = _box(page, NOTEBOOK), _box(page, PANEL)
    assert panel["x"] >= notebook["x"] + notebook["width"] - 2, (notebook, panel)
    assert panel["x"] - (notebook["x"] + notebook["width"]) < 20, (notebook, panel)
    # side by side: the same rows of the window
    assert abs(panel["y"] - notebook["y"]) < 40, (notebook, panel)
    assert panel["width"] > 400, panel


def _open_workspace(page: Any, lab: Any, name: str, reset: bool = True) -> None:
    open_notebook_in_workspace(page, lab, name, name.replace(".ipynb", ""), reset=reset)


def test_panel_moves_to_the_main_area_beside_the_notebook_and_back(
    page: Any, lab: Any, screenshots: Any, placement_settings: None
) -> None:
    enable_test_hook(page)
    name = write_notebook(lab.root, "pp-main.ipynb", ["1 + 1"])
    _open_workspace(page, lab, name)
    open_panel(page)
    wait_status(page, "connected")
    synthetic_run(page, n=3000, workers=4, groups=5, samples=5)
    wait_data(page, "run-state", "v === 'finished'")
    assert panel_area(page) == "left"

    run_command(page, "Dask Profile: Open in Main Area")
    wait_area(page, "main")
    settle(page)
    _assert_beside_the_notebook(page)
    assert page.locator(SIDEBAR_TAB).count() == 0  # no longer in the sidebar
    # the same panel: its connection and its runs came along
    assert panel_data(page, "status") == "connected"
    assert panel_data(page, "runs") == "1"
    assert panel_data(page, "tasks") == "3000"
    page.wait_for_function(f"() => document.querySelector('{STREAM}').offsetWidth > 400")
    tab = page.locator(MAIN_TAB)
    assert tab.inner_text().strip() == "Dask Profile"
    page.screenshot(path=str(screenshots / "panel-main-area.png"))
    # remembered: in the setting, and in the workspace's layout
    wait_server(page, lab, SETTINGS, "(j) => j.settings?.placement === 'main'")
    wait_server(
        page,
        lab,
        "lab/api/workspaces/pp-main",
        "(j) => JSON.stringify(j.data?.['layout-restorer:data']?.main ?? {}).includes('\"daskprofile\"')",
    )

    # a reload finds it in the main area, beside the notebook, connected again
    _open_workspace(page, lab, name, reset=False)
    wait_area(page, "main", timeout=60_000)
    settle(page)
    _assert_beside_the_notebook(page)
    wait_status(page, "connected")
    assert _stream_width(page) > 400

    # and back to the sidebar, in front
    run_command(page, "Dask Profile: Open in Sidebar")
    wait_area(page, "left")
    assert "lm-mod-current" in (page.locator(SIDEBAR_TAB).get_attribute("class") or "")
    wait_server(page, lab, SETTINGS, "(j) => j.settings?.placement === 'sidebar'")
    assert panel_data(page, "status") == "connected"
    assert not [e for e in page.console_errors if "daskprofile" in e.lower()]


def test_the_header_button_moves_the_panel_and_closing_its_tab_sends_it_back(
    page: Any, lab: Any, placement_settings: None
) -> None:
    name = write_notebook(lab.root, "pp-button.ipynb", ["1 + 1"])
    _open_workspace(page, lab, name)
    open_panel(page)
    button = page.locator(f"{PANEL} .jp-DaskProfile-placement")
    assert button.get_attribute("data-placement") == "sidebar"
    button.click()
    wait_area(page, "main")
    assert button.get_attribute("data-placement") == "main"
    # closing the main-area tab puts the panel back in its sidebar (not away)
    tab = page.locator(MAIN_TAB)
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    page.locator(SIDEBAR_TAB).wait_for(state="attached")
    assert panel_area(page) == "left"
    wait_server(page, lab, SETTINGS, "(j) => j.settings?.placement === 'sidebar'")
    open_panel(page)
    assert button.get_attribute("data-placement") == "sidebar"


def test_the_placement_setting_puts_the_panel_beside_the_first_notebook_opened(
    page: Any, lab: Any, placement_settings: None
) -> None:
    put_settings(lab, {"placement": "main"})
    name = write_notebook(lab.root, "pp-setting.ipynb", ["1 + 1"])
    page.goto(f"{lab.url}lab/workspaces/pp-setting?reset&token={lab.token}")
    page.locator(SIDEBAR_TAB).wait_for()
    settle(page)
    assert panel_area(page) == "left"  # no notebook to sit beside yet: it waits
    open_from_path(page, name)
    wait_area(page, "main")
    settle(page)
    _assert_beside_the_notebook(page)
    wait_status(page, "connected")


def test_sidebar_opens_readable_and_keeps_a_width_the_user_chose(
    page: Any, lab: Any, screenshots: Any
) -> None:
    enable_test_hook(page)
    name = write_notebook(lab.root, "pp-width.ipynb", ["1 + 1"])
    _open_workspace(page, lab, name)
    open_panel(page)
    box = _box(page, PANEL)
    assert abs(box["width"] - OPENING) <= 4, box
    assert _stream_width(page) >= 420, _stream_width(page)
    notebook = _box(page, NOTEBOOK)
    assert notebook["width"] > 600, notebook  # the notebook keeps most of the window
    wait_status(page, "connected")
    synthetic_run(page, n=3000, workers=4, groups=5, samples=5)
    wait_data(page, "run-state", "v === 'finished'")
    page.screenshot(path=str(screenshots / "panel-sidebar-readable.png"))

    # the user drags it narrower: kept when they switch to another panel and back
    widen_panel(page, 330)
    settle(page)
    narrow = _box(page, PANEL)["width"]
    assert abs(narrow - 330) <= 6, narrow
    page.locator(FILEBROWSER_TAB).click()
    page.locator(PANEL).wait_for(state="hidden")
    open_panel(page)
    assert _box(page, PANEL)["width"] == narrow

    # and after a reload (the layout and the workspace's state remember it)
    wait_server(
        page,
        lab,
        "lab/api/workspaces/pp-width",
        "(j) => j.data?.['daskprofile:sidebar-width']?.keep === true",
    )
    _open_workspace(page, lab, name, reset=False)
    open_panel(page)
    assert abs(_box(page, PANEL)["width"] - narrow) <= 2, _box(page, PANEL)


@pytest.fixture
def shell_settings(lab: Any) -> Iterator[None]:
    """The side switcher ("Switch Sidebar Side") writes the shell's layout: removed after."""
    yield
    put_settings(lab, {}, plugin="@jupyterlab/application-extension:shell")


def test_a_panel_switched_to_the_right_sidebar_returns_there(
    page: Any, lab: Any, placement_settings: None, shell_settings: None
) -> None:
    name = write_notebook(lab.root, "pp-right.ipynb", ["1 + 1"])
    _open_workspace(page, lab, name)
    page.locator(SIDEBAR_TAB).click(button="right")
    page.locator(".lm-Menu-item", has_text="Switch Sidebar Side").click()
    wait_area(page, "right")
    # once saved: JupyterLab asks to reload if the saved layout then differs from the shell's
    wait_server(
        page,
        lab,
        "lab/api/settings/@jupyterlab/application-extension:shell",
        "(j) => j.settings?.layout?.multiple?.['daskprofile-panel']?.area === 'right'",
    )
    settle(page)
    button = page.locator(f"{PANEL} .jp-DaskProfile-placement")
    button.click()
    wait_area(page, "main")
    _assert_beside_the_notebook(page)
    button.click()
    wait_area(page, "right")
