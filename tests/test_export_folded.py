"""Collapsed-stack export: real runs, parsed back the way flamegraph.pl/inferno read it."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.export import to_folded

TOKEN = "5f3e0c0d9a1b2c3d4e5f60718293a4b5"
LINE = re.compile(r"^(?P<stack>.+) (?P<count>\d+)$")


def spin(seconds: float) -> int:
    """Busy pure Python for ``seconds``."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n


@pytest.fixture(scope="module", params=["sync", "threads"])
def run(request: pytest.FixtureRequest) -> Any:
    dsk: dict[Any, Any] = {(f"spin-{TOKEN}", i): (spin, 0.12) for i in range(3)}
    dsk["odd;name-1"] = (spin, 0.12)  # ';' separates frames in the folded format
    with daskprofile.profile(stacks=True, interval=0.005) as recorded:
        named_schedulers[request.param](dsk, list(dsk), num_workers=2)
    return recorded


def parse(path: Path) -> list[tuple[list[str], int]]:
    out = []
    for line in path.read_text().splitlines():
        match = LINE.match(line)
        assert match, line
        out.append((match["stack"].split(";"), int(match["count"])))
    return out


def test_folded_counts_match_the_stack_trees(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "stacks.folded"
    to_folded(run, path)
    lines = parse(path)
    per_group = Counter[str]()
    for frames, count in lines:
        per_group[frames[0]] += count
        assert count > 0
        assert len(frames) >= 2
    expected = {g.replace(";", ":"): tree["count"] for g, tree in run.stacks.items()}
    assert dict(per_group) == expected
    assert "spin" in per_group
    assert "odd:name" in per_group


def test_folded_frames_name_function_file_and_line(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "stacks.folded"
    to_folded(run, path)
    leaves = {frames[-1] for frames, _ in parse(path) if frames[0] == "spin"}
    assert any(re.fullmatch(rf"spin \({re.escape(__file__)}:\d+\)", leaf) for leaf in leaves)
