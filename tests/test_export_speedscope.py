"""speedscope export: real runs with sampled stacks, validated against speedscope's schema."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.export import to_speedscope

SCHEMA = (
    Path(__file__).resolve().parents[1]
    / "node_modules/speedscope/dist/release/file-format-schema.json"
)
TOKEN = "5f3e0c0d9a1b2c3d4e5f60718293a4b5"


def spin(seconds: float) -> int:
    """Busy pure Python for ``seconds``: what the stack sampler sees."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n


def churn(seconds: float) -> int:
    return spin(seconds) + 1


@pytest.fixture(scope="module")
def run() -> Any:
    dsk: dict[Any, Any] = {(f"spin-{TOKEN}", i): (spin, 0.15) for i in range(4)}
    dsk.update({(f"churn-{TOKEN}", i): (churn, 0.15) for i in range(2)})
    with daskprofile.profile(stacks=True, interval=0.005) as recorded:
        named_schedulers["threads"](dsk, list(dsk), num_workers=2)
    return recorded


@pytest.fixture(scope="module")
def validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    if not SCHEMA.exists():
        pytest.skip("speedscope's schema not installed: run `jlpm install`")
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft7Validator(schema)


def write(run: Any, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "profile.speedscope.json"
    to_speedscope(run, path)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_speedscope_file_is_valid_against_the_published_schema(
    run: Any, validator: Any, tmp_path: Path
) -> None:
    doc = write(run, tmp_path)
    errors = sorted(validator.iter_errors(doc), key=str)
    assert not errors, errors[:3]


def test_speedscope_has_one_sampled_profile_per_group(run: Any, tmp_path: Path) -> None:
    doc = write(run, tmp_path)
    sampled = {p["name"]: p for p in doc["profiles"] if p["type"] == "sampled"}
    assert set(sampled) == {f"{g} (stack samples)" for g in run.stacks}
    assert {"spin (stack samples)", "churn (stack samples)"} <= set(sampled)
    frames = doc["shared"]["frames"]
    for group, tree in run.stacks.items():
        profile = sampled[f"{group} (stack samples)"]
        assert len(profile["samples"]) == len(profile["weights"])
        assert sum(profile["weights"]) == profile["endValue"] == tree["count"] > 0
        assert all(0 <= i < len(frames) for sample in profile["samples"] for i in sample)
    # the innermost frame is kept: spin's samples end in spin, churn's pass through churn
    spin_leaves = {frames[s[-1]]["name"].split(" (")[0] for s in sampled["spin (stack samples)"]["samples"]}  # noqa: E501  # fmt: skip
    assert "spin" in spin_leaves
    churn_names = {frames[i]["name"].split(" (")[0]
                   for s in sampled["churn (stack samples)"]["samples"] for i in s}  # fmt: skip
    assert {"churn", "spin"} <= churn_names


def test_speedscope_has_an_evented_profile_per_worker(run: Any, tmp_path: Path) -> None:
    doc = write(run, tmp_path)
    evented = [p for p in doc["profiles"] if p["type"] == "evented"]
    assert sorted(p["name"] for p in evented) == sorted(
        f"tasks on {w}" for w in set(run.tasks["worker"])
    )
    opened = sum(1 for p in evented for e in p["events"] if e["type"] == "O")
    assert opened == len(run.tasks)
    for profile in evented:
        ats = [e["at"] for e in profile["events"]]
        assert ats == sorted(ats)
        assert [e["type"] for e in profile["events"]] == ["O", "C"] * (len(ats) // 2)


def test_speedscope_without_stacks_is_still_valid(validator: Any, tmp_path: Path) -> None:
    with daskprofile.profile(stacks=False) as run:
        named_schedulers["sync"]({"a-1": (sum, [1, 2])}, ["a-1"])
    doc = write(run, tmp_path)
    assert not list(validator.iter_errors(doc))
    assert [p["type"] for p in doc["profiles"]] == ["evented"]
