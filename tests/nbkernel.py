"""Run notebook cells in a real IPython kernel (nbclient) and read their outputs back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

#: the offline browser used by the tests (Debian's chromium)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(2)</script>"
#: a key name whose dask group keeps both payloads (``key_split`` keeps a leading "/")
HOSTILE = f"/{IMG}{SCRIPT}"


def execute(cells: list[str], cwd: Path, timeout: int = 180) -> Any:
    """Execute ``cells`` in a fresh kernel (shut down at the end); errors are kept as outputs."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", allow_errors=True, store_widget_state=True
    )
    client.execute(cwd=str(cwd))
    return nb


def outputs(nb: Any, index: int, output_type: str | None = None) -> list[Any]:
    """Outputs of cell ``index`` (of one type if given)."""
    outs = nb.cells[index].outputs
    return [o for o in outs if output_type is None or o.output_type == output_type]


def stream(nb: Any, index: int, name: str = "stdout") -> str:
    """Text a cell wrote to ``stdout`` or ``stderr``."""
    return "".join(o.text for o in outputs(nb, index, "stream") if o.name == name)


def html_outputs(nb: Any, index: int) -> list[str]:
    """The ``text/html`` of a cell's display outputs."""
    return [
        o.data["text/html"] for o in outputs(nb, index, "display_data") if "text/html" in o.data
    ]


def widget_views(nb: Any, index: int) -> list[str]:
    """Model ids of the widgets a cell displayed."""
    key = "application/vnd.jupyter.widget-view+json"
    return [o.data[key]["model_id"] for o in outputs(nb, index, "display_data") if key in o.data]


def widget_state(nb: Any) -> dict[str, Any]:
    """``{model_id: {"model_name", "state"}}`` saved with the notebook."""
    widgets = nb.metadata.get("widgets", {})
    return dict(widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {}))


def progress_models(
    nb: Any, model_id: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(header HTML, IntProgress, groups HTML) states of a progress-bar VBox."""
    states = widget_state(nb)
    children = states[model_id]["state"]["children"]
    header, bar, groups = (states[c.removeprefix("IPY_MODEL_")]["state"] for c in children)
    return header, bar, groups


@pytest.fixture(name="offline_page")
def offline_page_fixture() -> Iterator[tuple[Any, dict[str, list[str]]]]:
    """A Chromium page that refuses every network request; records dialogs and errors."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    seen: dict[str, list[str]] = {"refused": [], "dialogs": [], "errors": []}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})

            def route(r: Any) -> None:
                if r.request.url.startswith(("file:", "data:", "about:")):
                    r.continue_()
                else:
                    seen["refused"].append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: seen["errors"].append(str(e)))
            yield page, seen
        finally:
            browser.close()
