"""The snapshot's Bandwidth tab per type of data moved: each type a row (and a bar), its
name escaped, from a run made of a real cluster log's tables (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daskprofile.distributed._cluster_log import ClusterLog
from daskprofile.export._bandwidth import _table
from daskprofile.run import Run

T0 = 100.0
A, B = "tcp://10.0.0.1:4001", "tcp://10.0.0.2:4002"
HOSTILE = "<script>alert('type')</script>"


def _transfers(types: list[str | None]) -> dict[str, Any]:
    n = len(types)
    starts = [T0 + 0.1 * (i + 1) for i in range(n)]
    return {
        "direction": ["incoming"] * n,
        "start": starts,
        "stop": [s + 0.01 for s in starts],
        "peer": [B] * n,
        "bytes": [1_000_000 * (i + 1) for i in range(n)],
        "compressed": [-1] * n,
        "keys": [1] * n,
        "type": types,
    }


def _run() -> Run:
    log = ClusterLog()
    rows = _transfers([HOSTILE, "numpy.ndarray", "numpy.ndarray", None])
    log.worker_tables({A: {"transfers": rows}}, to_perf=0.0)
    data = {name: log.table(name, T0, T0 + 2.0) for name in ("transfers", "workers")}
    return Run({"id": "bw", "t0": T0, "t1": T0 + 2.0, "finished": True}, data)


def test_bandwidth_by_type_sums_each_type_and_names_an_unknown_one() -> None:
    by_type = _run().bandwidth("type").set_index("type")
    assert by_type.loc["numpy.ndarray", "bytes"] == 5_000_000
    assert by_type.loc["numpy.ndarray", "transfers"] == 2
    assert by_type.loc[HOSTILE, "bytes"] == 1_000_000
    assert by_type.loc["", "bytes"] == 4_000_000  # no type logged: shown as (unknown)
    table = _table(by_type.reset_index(), ["type"], "Bandwidth by type")
    assert "(unknown)" in table
    assert HOSTILE not in table
    assert "&lt;script&gt;alert(&#x27;type&#x27;)&lt;/script&gt;" in table


def test_the_snapshot_lists_each_type_escaped(tmp_path: Path) -> None:
    path = tmp_path / "bandwidth.html"
    _run().to_html(path)
    html = path.read_text()
    assert "Bandwidth by type" in html
    assert "numpy.ndarray" in html
    assert HOSTILE not in html  # escaped in the table, JSON-escaped in the bar's data
    assert "&lt;script&gt;" in html
