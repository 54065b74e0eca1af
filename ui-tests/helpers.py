"""Page helpers shared by the browser tests (wait on page state, never on sleeps)."""

from __future__ import annotations

from typing import Any

PANEL = "#daskprofile-panel"
PANEL_TAB = '.lm-TabBar-tab[data-id="daskprofile-panel"]'


def open_notebook(page: Any, lab: Any, name: str) -> None:
    """Open notebook ``name`` and wait until its kernel is idle."""
    page.goto(lab.page_url(name))
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    page.wait_for_selector(
        ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
    )


def open_panel(page: Any) -> Any:
    """Open the Dask Profile sidebar panel (unless the restored layout has it open)."""
    panel = page.locator(PANEL)
    tab = page.locator(PANEL_TAB)
    tab.wait_for(state="visible")
    if "lm-mod-current" not in (tab.get_attribute("class") or ""):
        tab.click()
    panel.wait_for(state="visible")
    return panel


def wait_status(page: Any, status: str, timeout: float = 60_000) -> None:
    page.wait_for_selector(f"{PANEL}[data-status='{status}']", timeout=timeout)
