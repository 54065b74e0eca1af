"""Fixtures for the browser tests: a real JupyterLab server and a real Chromium.

The server runs in a subprocess on a free port with its own root, runtime, settings and
workspace folders; Chromium is Debian's (/usr/bin/chromium), driven by Playwright. Tests
wait on page state, never on fixed sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("DASKPROFILE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[1]
#: where screenshots go: test-output/, or the README's images with
#: DASKPROFILE_UPDATE_SCREENSHOTS=1 (``bash dev.sh screenshots``)
SCREENSHOTS = (
    REPO / "docs" / "images"
    if os.environ.get("DASKPROFILE_UPDATE_SCREENSHOTS") == "1"
    else REPO / "test-output" / "screenshots"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    """A running JupyterLab server."""

    url: str
    token: str
    root: Path
    process: subprocess.Popen[bytes]

    def page_url(self, path: str = "") -> str:
        return f"{self.url}lab/tree/{path}?token={self.token}"

    def api(self, path: str) -> object:
        request = urllib.request.Request(
            f"{self.url}api/{path}", headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


def notebook(cells: list[str], kernel: str = "python3") -> dict[str, object]:
    """A notebook document with code cells ``cells`` for kernel ``kernel``."""
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": uuid.uuid4().hex[:8],
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for source in cells
        ],
        "metadata": {"kernelspec": {"name": kernel, "display_name": kernel, "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_notebook(root: Path, name: str, cells: list[str], kernel: str = "python3") -> str:
    (root / name).write_text(json.dumps(notebook(cells, kernel)))
    return name


def _wait_ready(url: str, token: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}")
        try:
            request = urllib.request.Request(
                f"{url}api/status", headers={"Authorization": f"token {token}"}
            )
            with urllib.request.urlopen(request, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError("jupyter lab did not start")


@pytest.fixture(scope="session")
def kernel_without_daskprofile(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A kernelspec whose Python has ipykernel but not daskprofile (a fresh venv)."""
    cache = REPO / ".cache" / "bare-kernel-venv"
    python = cache / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(cache)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "ipykernel"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return str(python)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, kernel_without_daskprofile: str) -> Iterator[Lab]:
    """A JupyterLab server with the installed daskprofile extension."""
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    kernels = base / "data" / "kernels" / "bare"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    kernel_without_daskprofile,
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "Bare Python (no daskprofile)",
                "language": "python",
            }
        )
    )
    settings = base / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    token = uuid.uuid4().hex
    port = _free_port()
    env = dict(os.environ)
    env.update(
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_PATH=str(base / "data"),
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.disable_check_xsrf=True",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log = (base / "server.log").open("wb")
    process = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_ready(url, token, process, timeout=60)
        yield Lab(url=url, token=token, root=root, process=process)
    finally:
        _stop(process)
        log.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server and every kernel it started (they share its process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: object, lab: Lab) -> Iterator[object]:
    """A fresh browser page; console errors are collected in ``page.console_errors``."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.console_errors = errors
    yield page
    context.close()
    # shut down kernels this test started, so tests do not leak kernels into each other
    for kernel in lab.api("kernels"):  # type: ignore[union-attr]
        request = urllib.request.Request(
            f"{lab.url}api/kernels/{kernel['id']}",
            method="DELETE",
            headers={"Authorization": f"token {lab.token}"},
        )
        urllib.request.urlopen(request, timeout=10).close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


def _clean_cache() -> None:  # pragma: no cover - manual helper
    shutil.rmtree(REPO / ".cache", ignore_errors=True)
