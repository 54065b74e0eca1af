"""The message encoder against the shared protocol fixtures (tests/fixtures/protocol)."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from daskprofile.jupyter import encode

FIXTURES = Path(__file__).parent / "fixtures" / "protocol"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("protocol_fixtures", FIXTURES / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
MESSAGES = GEN.messages()


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_fixture_matches_what_the_encoder_produces(name: str) -> None:
    path = FIXTURES / f"{name}.json"
    assert path.exists(), "run tests/fixtures/protocol/generate.py"
    assert path.read_text() == GEN.render(MESSAGES[name])


def test_every_fixture_file_comes_from_the_generator() -> None:
    assert {p.stem for p in FIXTURES.glob("*.json")} == set(MESSAGES)


def test_every_kernel_message_type_of_the_protocol_has_a_fixture() -> None:
    kernel_types = {d["type"] for d, _ in MESSAGES.values()}
    assert kernel_types >= {
        "hello", "error", "run_start", "groups", "workers", "tasks", "resources", "cache",
        "progress", "stacks", "keys", "run_end", "dropped", "state", "export",
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_fixture_round_trips_and_is_plain_json(name: str) -> None:
    fixture = json.loads((FIXTURES / f"{name}.json").read_text())
    data, buffers = encode.from_fixture(fixture)
    assert (data, buffers) == MESSAGES[name]
    json.dumps(data, allow_nan=False)
    assert isinstance(data["type"], str)


def test_tasks_buffers_are_little_endian_typed_arrays_read_as_the_browser_does() -> None:
    data, buffers = encode.from_fixture(json.loads((FIXTURES / "tasks.json").read_text()))
    n = data["n"]
    assert data["columns"] == ["group", "worker", "status", "submit", "start", "stop"]
    assert [len(b) for b in buffers] == [2 * n, 2 * n, n, 4 * n, 4 * n, 4 * n]
    # DataView.getFloat32(i * 4, true): the browser's little-endian read
    start = [struct.unpack_from("<f", buffers[4], 4 * i)[0] for i in range(n)]
    expected = np.asarray(GEN._TASKS["start"]) - data["base"]
    assert np.allclose(start, expected, atol=1e-7)
    decoded = encode.decode(data, buffers)
    assert np.allclose(decoded["times"]["stop"], GEN._TASKS["stop"], atol=1e-6)
    assert decoded["arrays"]["status"].tolist() == GEN._TASKS["status"]


def test_decoded_section_is_what_decode_reads() -> None:
    for name in ("tasks", "resources", "cache"):
        fixture = json.loads((FIXTURES / f"{name}.json").read_text())
        dec = encode.decode(*encode.from_fixture(fixture))
        for col, values in fixture["decoded"]["times"].items():
            assert dec["times"][col].tolist() == values


def test_task_rows_cost_17_bytes_of_buffers() -> None:
    n = 10_000
    cols = {c: np.zeros(n) for c, _ in encode.COLUMNS["tasks"]}
    _, buffers = encode.table("tasks", "r", cols, first=0)
    assert sum(len(b) for b in buffers) == 17 * n


def test_float32_offsets_keep_microseconds_an_hour_into_a_run() -> None:
    t = 3600.0 + np.arange(1000) * 1e-5
    cols = {"time": t, "cpu": np.zeros(1000), "memory": np.zeros(1000), "processes": np.ones(1000)}
    dec = encode.decode(*encode.table("resources", "r", cols))
    assert np.max(np.abs(dec["times"]["time"] - t)) < 1e-6


def test_ids_beyond_the_wire_type_are_clipped_not_wrapped() -> None:
    cols = {c: np.zeros(2) for c, _ in encode.COLUMNS["cache"]}
    cols["group"] = np.array([70_000, -1])
    dec = encode.decode(*encode.table("cache", "r", cols))
    assert dec["arrays"]["group"].tolist() == [65535, 0]


def test_json_fields_are_cleaned_of_numpy_and_nan() -> None:
    data, _ = encode.run_end("r", {"x": np.float64("nan"), "n": np.int64(3)}, {}, [])
    assert data["summary"] == {"x": None, "n": 3}
    json.dumps(data, allow_nan=False)


def test_empty_batch_encodes_and_decodes() -> None:
    cols = {c: np.zeros(0) for c, _ in encode.COLUMNS["tasks"]}
    dec = encode.decode(*encode.table("tasks", "r", cols, first=5))
    assert dec["n"] == 0
    assert dec["base"] == 0.0
    assert len(dec["arrays"]["stop"]) == 0


@pytest.mark.parametrize(
    ("data", "buffers"),
    [
        ({"type": "tasks", "n": 2, "base": 0, "columns": ["group"]}, []),
        ({"type": "cache", "n": 2, "base": 0, "columns": ["bogus"]}, [b"1234"]),
        ({"type": "cache", "n": 3, "base": 0, "columns": ["time"]}, [b"\0" * 4]),
        ({"type": "export"}, []),
        ({"no": "type"}, []),
    ],
)
def test_decode_rejects_malformed_messages(data: dict[str, object], buffers: list[bytes]) -> None:
    with pytest.raises(ValueError):
        encode.decode(data, buffers)


def test_worker_kinds_from_labels() -> None:
    kinds = [encode.worker_kind(x) for x in ("main thread", "thread 3", "process 12", "tcp://a")]
    assert kinds == ["thread", "thread", "process", "worker"]
