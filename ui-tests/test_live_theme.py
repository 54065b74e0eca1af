"""The panel follows JupyterLab's dark theme: canvases redrawn in dark colours."""

from __future__ import annotations

from typing import Any

from helpers import (
    PANEL,
    canvas_stats,
    enable_test_hook,
    open_notebook_in_workspace,
    open_panel,
    synthetic_run,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook


def set_theme(page: Any, theme: str) -> None:
    """Pick ``theme`` in the Settings > Theme menu."""
    page.keyboard.press("Escape")
    page.locator(".lm-MenuBar-item", has_text="Settings").click()
    page.locator(".lm-Menu-item", has_text="Theme").first.hover()
    page.locator(".lm-Menu-item", has_text=theme).first.click()


def test_dark_theme_redraws_the_views_dark(page: Any, lab: Any, screenshots: Any) -> None:
    enable_test_hook(page)
    name = write_notebook(lab.root, "dark.ipynb", ["1 + 1"])
    open_notebook_in_workspace(page, lab, name, "dark")
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 900)
    synthetic_run(page, n=5000, workers=4, groups=5)
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "theme", "v === 'light'")
    light = canvas_stats(page, ".jp-DaskProfile-resources canvas")
    try:
        set_theme(page, "JupyterLab Dark")
        wait_data(page, "theme", "v === 'dark'")
        page.wait_for_function(
            """() => {
                const c = document.querySelector('.jp-DaskProfile-resources canvas');
                const d = c.getContext('2d').getImageData(2, c.height - 3, 1, 1).data;
                return d[0] + d[1] + d[2] < 200;
            }"""
        )
        for selector in (
            ".jp-DaskProfile-taskStream canvas",
            ".jp-DaskProfile-resources canvas",
            ".jp-DaskProfile-cache canvas",
        ):
            dark = canvas_stats(page, selector)
            assert dark["luminance"] < 0.35, (selector, dark)
        assert (
            canvas_stats(page, ".jp-DaskProfile-resources canvas")["luminance"] < light["luminance"]
        )
        # the theme switch shows JupyterLab's splash for a moment: not in the picture
        page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=30_000)
        page.screenshot(path=str(screenshots / "panel-dark.png"))
        assert not [e for e in page.console_errors if "daskprofile" in e]
    finally:
        set_theme(page, "JupyterLab Light")
        wait_data(page, "theme", "v === 'light'")
    assert page.locator(PANEL).is_visible()
