"""The README's main job: the demo notebook runs top to bottom in a real kernel."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.ipynb"


@pytest.mark.slow
def test_demo_notebook_runs_and_profiles_every_workload(tmp_path: Path) -> None:
    nb = nbformat.read(DEMO, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # the saved files of the last cell exist and are not empty
    for name in ("qr-report.html", "qr-trace.json", "qr.daskprof"):
        assert (tmp_path / name).stat().st_size > 0
    # the sleep(0.1) tasks were timed in the worker processes: a mean close to 0.1 s
    describe = next(o for o in nb.cells[6].outputs if o.output_type == "execute_result")["data"][
        "text/plain"
    ]
    mean = float(next(line for line in describe.splitlines() if line.startswith("mean")).split()[1])
    assert 0.09 < mean < 0.13
    # the cluster section: its run was recorded on both workers of the LocalCluster
    counts = next(o for o in nb.cells[-2].outputs if o.output_type == "execute_result")["data"][
        "text/plain"
    ]
    assert counts.count("tcp://127.0.0.1:") == 2, counts
