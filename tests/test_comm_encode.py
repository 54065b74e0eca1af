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
        "actions", "memory", "transfers", "exceptions", "cluster_workers", "spans",
        "reruns",
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


COLUMNAR = (
    "tasks",
    "tasks_span",
    "resources",
    "resources_source",
    "cache",
    "actions",
    "memory",
    "transfers",
    "transfers_type",
)


@pytest.mark.parametrize("name", COLUMNAR)
def test_decoded_section_is_what_decode_reads(name: str) -> None:
    fixture = json.loads((FIXTURES / f"{name}.json").read_text())
    dec = encode.decode(*encode.from_fixture(fixture))
    assert set(fixture["decoded"]["arrays"]) == set(fixture["data"]["columns"])
    for col, values in fixture["decoded"]["times"].items():
        assert dec["times"][col].tolist() == values
    for col, values in fixture["decoded"]["arrays"].items():
        assert encode.clean(dec["arrays"][col].tolist()) == values


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


def test_a_thread_of_a_cluster_worker_is_of_kind_worker() -> None:
    labels = ["tcp://127.0.0.1:40123 thread 0", "tls://[::1]:8786 thread 12"]
    assert [encode.worker_kind(x) for x in labels] == ["worker", "worker"]
    data, _ = encode.workers("r", [0, 1, 2], [*labels, "thread 1"])
    assert data["kinds"] == ["worker", "worker", "thread"]


def _samples(n: int = 3) -> dict[str, np.ndarray]:
    return {
        "time": np.linspace(0.1, 0.3, n),
        "cpu": np.full(n, 50.0),
        "memory": np.full(n, 1e8),
        "processes": np.ones(n),
    }


def test_a_sourced_resources_batch_names_its_worker_process() -> None:
    data, buffers = encode.table("resources", "r", _samples(), source="pid 4123 @ host")
    assert data["source"] == "pid 4123 @ host"
    assert list(data)[-1] == "columns"
    dec = encode.decode(data, buffers)
    assert dec["source"] == "pid 4123 @ host"
    assert np.allclose(dec["times"]["time"], _samples()["time"], atol=1e-6)


def test_the_total_resources_batch_carries_no_source_field_as_in_protocol_1_0() -> None:
    for message in (
        encode.table("resources", "r", _samples()),
        encode.table("resources", "r", _samples(), None, source=None),
    ):
        data, buffers = message
        assert "source" not in data
        assert encode.decode(data, buffers).get("source") is None
    total = json.loads((FIXTURES / "resources.json").read_text())
    sourced = json.loads((FIXTURES / "resources_source.json").read_text())
    assert "source" not in total["data"]
    assert sourced["data"]["source"] == "tcp://127.0.0.1:40123"
    assert sourced["data"]["type"] == "resources"


@pytest.mark.parametrize(
    ("kind", "source"), [("tasks", "tcp://a"), ("cache", "tcp://a"), ("resources", 7)]
)
def test_only_a_resources_batch_takes_a_string_source(kind: str, source: object) -> None:
    cols = {c: np.zeros(2) for c, _ in encode.COLUMNS[kind]}
    with pytest.raises(ValueError, match="source"):
        encode.table(kind, "r", cols, source=source)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", [7, ["tcp://a"], {"a": 1}])
def test_decode_rejects_a_source_that_is_not_a_string(source: object) -> None:
    data, buffers = encode.table("resources", "r", _samples())
    with pytest.raises(ValueError, match="source"):
        encode.decode({**data, "source": source}, buffers)
    tasks = {c: np.zeros(1) for c, _ in encode.COLUMNS["tasks"]}
    data, buffers = encode.table("tasks", "r", tasks, first=0)
    with pytest.raises(ValueError, match="source"):
        encode.decode({**data, "source": "tcp://a"}, buffers)


def test_only_a_panel_of_protocol_1_1_or_later_speaks_sources() -> None:
    assert encode.SOURCE_VERSION == "1.1"
    for peer in ("1.1", "1.2", "1.10"):
        assert encode.speaks(peer, encode.SOURCE_VERSION), peer
    for peer in ("1.0", "0.9", "2.0", "2.1", "1", "1.x", None, 1.1):
        assert not encode.speaks(peer, encode.SOURCE_VERSION), peer


def test_this_kernel_speaks_1_3_and_still_accepts_1_0_1_1_and_1_2_panels() -> None:
    from daskprofile.jupyter import comm

    assert comm.PROTOCOL_VERSION == "1.3"
    for version in (encode.SOURCES_VERSION, encode.TABLES_VERSION, encode.SOURCE_VERSION, "1.0"):
        assert encode.speaks(comm.PROTOCOL_VERSION, version)
    for peer in ("1.0", "1.1", "1.2"):
        assert comm._major(peer) == comm._major(comm.PROTOCOL_VERSION)


def test_run_end_carries_the_reduced_parts_only_when_there_are_some() -> None:
    plain, _ = encode.run_end("r", {}, {}, [])
    assert "reduced" not in plain  # as in protocol 1.0
    assert "reduced" not in encode.run_end("r", {}, {}, [], {})[0]
    why = {"stacks": "workers lack daskprofile: no stack samples"}
    data, buffers = encode.run_end("r", {}, {}, [], why)
    assert data["reduced"] == why
    assert buffers == []
    fixture = json.loads((FIXTURES / "run_end_reduced.json").read_text())
    assert set(fixture["data"]["reduced"]) == {"stacks", "resources"}


def test_the_feed_sends_the_runs_reduced_parts_at_its_end() -> None:
    from daskprofile.jupyter.feed import Feed
    from daskprofile.record.cursors import frozen_cursors
    from daskprofile.run import Run

    why = {"resources": "workers lack daskprofile: CPU/memory from the scheduler's heartbeats"}
    run = Run({"id": "r7", "reduced": why})
    ((data, _),) = Feed(run, frozen_cursors(run)).end()
    assert data["type"] == "run_end"
    assert data["reduced"] == why
    plain = Run({"id": "r8"})
    ((data, _),) = Feed(plain, frozen_cursors(plain)).end()
    assert "reduced" not in data


# ---------------------------------------------------------------- protocol 1.2


def test_the_cluster_tables_decode_to_what_was_encoded() -> None:
    for name, expected in (
        ("actions", GEN._ACTIONS),
        ("memory", GEN._MEMORY),
        ("transfers", GEN._TRANSFERS),
    ):
        dec = encode.decode(*MESSAGES[name])
        for col, values in expected.items():
            got = dec["times"][col] if col in dec["times"] else dec["arrays"][col]
            assert np.allclose(got, values, atol=1e-6, equal_nan=True), (name, col)
    actions = encode.decode(*MESSAGES["actions"])
    assert actions["first"] == 40
    assert np.isnan(actions["arrays"]["bytes"][-1])  # not known
    memory = encode.decode(*MESSAGES["memory"])
    assert (memory["source"], memory["limit"]) == ("tcp://127.0.0.1:40123", 4_000_000_000)
    transfers = encode.decode(*MESSAGES["transfers"])
    assert transfers["addresses"] == ["tcp://127.0.0.1:40123", "tcp://127.0.0.1:40125"]


def test_action_and_transfer_rows_cost_21_bytes_and_a_memory_sample_28() -> None:
    for kind, size in (("actions", 21), ("transfers", 21), ("memory", 28)):
        cols = {c: np.zeros(100) for c, _ in encode.COLUMNS[kind]}
        source = "tcp://a" if kind == "memory" else None
        _, buffers = encode.table(kind, "r", cols, first=0, source=source)
        assert sum(len(b) for b in buffers) == size * 100, kind


def test_the_json_messages_of_1_2_keep_their_fields_only_and_are_plain_json() -> None:
    row = {"key": "k", "group": "g", "worker": "w", "time": np.float64(0.5), "type": "E"}
    data, buffers = encode.exceptions(
        "r", [{**row, "message": "m", "traceback": "t", "x": 1}], 2, 0
    )
    assert buffers == []
    assert data["rows"] == [{**row, "time": 0.5, "message": "m", "traceback": "t"}]
    assert (data["first"], data["dropped"]) == (2, 0)
    member = {"address": "tcp://a", "joined": np.nan, "left": None, "reason": None, "pid": 3}
    data, _ = encode.cluster_workers("r", [member])
    assert data["workers"][0]["joined"] is None  # NaN is not JSON
    assert "pid" not in data["workers"][0]
    assert set(data["workers"][0]) == {
        "address", "name", "host", "threads", "memory_limit", "joined", "left", "reason",
    }  # fmt: skip
    json.dumps(data, allow_nan=False)


def test_a_memory_batch_names_its_worker_and_only_it_and_resources_have_a_source() -> None:
    cols = {c: np.zeros(2) for c, _ in encode.COLUMNS["memory"]}
    with pytest.raises(ValueError, match="source"):
        encode.table("memory", "r", cols)
    for kind in ("actions", "transfers"):
        other = {c: np.zeros(2) for c, _ in encode.COLUMNS[kind]}
        with pytest.raises(ValueError, match="source"):
            encode.table(kind, "r", other, source="tcp://a")


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("memory", {"source": None}),
        ("memory", {"limit": "lots"}),
        ("transfers", {"addresses": None}),
        ("transfers", {"addresses": [1]}),
        ("actions", {"source": "tcp://a"}),
        ("exceptions", {"rows": [{"key": "k"}]}),
        ("exceptions", {"rows": "boom"}),
        ("exceptions", {"first": None}),
        ("cluster_workers", {"workers": [None]}),
        ("reruns", {"rows": [1.5, 2]}),
        ("reruns", {"why": ["lost"]}),
        ("reruns", {"workers": None}),
    ],
)
def test_decode_rejects_malformed_1_2_messages(name: str, change: dict[str, object]) -> None:
    data, buffers = MESSAGES[name]
    with pytest.raises(ValueError):
        encode.decode({**data, **change}, buffers)


def test_what_each_message_needs_of_the_panel() -> None:
    needs = {name: encode.needs(data) for name, (data, _) in MESSAGES.items()}
    new = {"actions", "memory", "transfers", "exceptions", "cluster_workers", "workers_actions"}
    new |= {"spans", "tasks_span", "reruns"}
    assert {n for n, v in needs.items() if v == "1.2"} == new
    assert {n for n, v in needs.items() if v == "1.1"} == {"resources_source"}
    assert {n for n, v in needs.items() if v == "1.3"} == {"sources", "transfers_type"}
    # a lane only actions use (a worker's address alone) is new in 1.2; a thread's is not
    assert encode.needs(encode.workers("r", [0], ["tcp://a:1 thread 0"])[0]) == "1.0"
    assert encode.needs(encode.workers("r", [0], ["tcp://a:1"])[0]) == "1.2"
    for local in ("process 12", "main thread", "thread 3", "worker 0"):  # worker 0: to_run
        assert encode.needs(encode.workers("r", [0], [local])[0]) == "1.0"
    assert not encode.speaks("1.1", encode.TABLES_VERSION)
    assert encode.speaks("1.2", encode.TABLES_VERSION)
