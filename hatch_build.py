"""Build hook: fail early, with what to install, when the lab extension cannot be built."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MIN_NODE = 20
#: what the npm build makes: the lab extension and the inline view's bundle
PREBUILT = (
    ("labextension", "static", "style.js"),
    ("python", "daskprofile", "jupyter", "static", "inline.js"),
)


class NodeCheckHook(BuildHookInterface):  # type: ignore[type-arg]
    """Checks for Node.js before the jupyter-builder hook runs jlpm."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        prebuilt = all(Path(self.root, *p).exists() for p in PREBUILT)
        if prebuilt and self.target_name == "wheel" and version != "editable":
            return
        node = shutil.which("node")
        if node is None:
            raise RuntimeError(
                "Building daskprofile from source needs Node.js >= 20 to build its "
                "JupyterLab extension, and 'node' was not found. Install Node.js "
                "(e.g. 'apt-get install nodejs', or from https://nodejs.org), or install "
                "a prebuilt wheel of daskprofile instead."
            )
        out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
        major = out.stdout.strip().lstrip("v").split(".")[0]
        if not major.isdigit() or int(major) < MIN_NODE:
            raise RuntimeError(
                f"Building daskprofile needs Node.js >= {MIN_NODE}; found {out.stdout.strip()!r}."
            )
