"""Spans on the wire (protocol 1.2): a run with spans sends ``spans`` and a ``span`` column
of ``tasks`` to a panel that reads 1.2, and exactly what it sent before to older panels."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from time import perf_counter
from typing import Any

import dask
import numpy as np
import pytest

import daskprofile
from daskprofile.jupyter import encode
from daskprofile.jupyter.feed import Feed
from daskprofile.jupyter.publisher import Connection, Publisher
from daskprofile.record import history
from daskprofile.record.cursors import frozen_cursors
from daskprofile.run import Run

FIXTURES = Path(__file__).parent / "fixtures" / "protocol"


def _fixture(name: str) -> encode.Message:
    return encode.from_fixture(json.loads((FIXTURES / f"{name}.json").read_text()))


def _inc(x: int) -> int:
    return x + 1


def _spanned_run() -> Run:
    """Tasks in ``load``, in ``load/clean`` and outside any span (threads scheduler)."""
    with daskprofile.profile(resources=False, cache=False, stacks=False) as run:
        with daskprofile.span("load"):
            a = [dask.delayed(_inc)(i) for i in range(4)]
            with daskprofile.span("clean"):
                b = [dask.delayed(_inc)(i) for i in range(3)]
        c = [dask.delayed(_inc)(i) for i in range(2)]
        dask.compute(a, b, c, scheduler="threads")
    return run


def _plain_run() -> Run:
    with daskprofile.profile(resources=False, cache=False, stacks=False) as run:
        dask.compute([dask.delayed(_inc)(i) for i in range(5)], scheduler="threads")
    return run


def _of(messages: list[encode.Message], kind: str) -> list[dict[str, Any]]:
    return [encode.decode(d, b) for d, b in messages if d["type"] == kind]


def test_the_spans_fixtures_decode_and_need_protocol_1_2() -> None:
    spans, _ = _fixture("spans")
    assert encode.decode(spans)["names"] == ["load", "load/clean", "<b>reduce</b>"]
    assert encode.needs(spans) == encode.TABLES_VERSION
    data, buffers = _fixture("tasks_span")
    assert data["columns"][-1] == "span"
    assert encode.decode(data, buffers)["arrays"]["span"].tolist() == [1, 1, 2, 0, 3, 3, 2, 0, 1]
    assert encode.needs(data) == encode.TABLES_VERSION
    assert encode.needs(_fixture("tasks")[0]) == "1.0"


def test_an_older_panel_gets_the_tasks_without_their_span_column() -> None:
    message = _fixture("tasks_span")
    assert encode.adapt(message, "1.2") is message
    for peer in ("1.1", "1.0"):
        fitted = encode.adapt(message, peer)
        assert fitted is not None
        plain_data, plain_buffers = _fixture("tasks")
        assert fitted[0]["columns"] == plain_data["columns"]
        assert fitted[1][:5] == plain_buffers[:5]  # same rows, only the span column less
        assert encode.adapt(_fixture("spans"), peer) is None


@pytest.mark.parametrize("bad", [{"ids": [0], "names": ["a"]}, {"ids": [1], "names": []}])
def test_a_malformed_spans_message_is_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="spans"):
        encode.decode({"type": "spans", "run": "r", **bad})


def test_a_run_with_spans_sends_its_paths_before_the_rows_that_use_them() -> None:
    run = _spanned_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    kinds = [d["type"] for d, _ in messages]
    assert kinds.index("spans") < kinds.index("tasks")
    ((spans,),) = [_of(messages, "spans")]
    names = dict(zip(spans["ids"], spans["names"], strict=True))
    assert sorted(names.values()) == ["load", "load/clean"]
    column = np.concatenate([t["arrays"]["span"] for t in _of(messages, "tasks")])
    ids, n = np.unique(column, return_counts=True)
    counts = {names.get(i): int(k) for i, k in zip(ids.tolist(), n.tolist(), strict=True)}
    assert counts == {"load": 4, "load/clean": 3, None: 2}


def test_a_run_without_spans_sends_exactly_what_it_sent_before() -> None:
    run = _plain_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    assert "spans" not in {d["type"] for d, _ in messages}
    for task in _of(messages, "tasks"):
        assert task["columns"] == [c for c, _ in encode.COLUMNS["tasks"]]
    assert all(encode.needs(d) != encode.TABLES_VERSION for d, _ in messages)


def test_a_connection_fits_spans_to_its_protocol() -> None:
    run = _spanned_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    new, old = Connection(None, 10_000, 20, "1.2"), Connection(None, 10_000, 20, "1.1")
    new.push(messages)
    old.push(messages)
    assert [d["type"] for d, _ in new.outbox] == [d["type"] for d, _ in messages]
    assert "spans" not in {d["type"] for d, _ in old.outbox}
    for data, buffers in old.outbox:
        if data["type"] == "tasks":
            assert "span" not in data["columns"]
            assert len(buffers) == len(data["columns"])


class _Comm:
    def __init__(self) -> None:
        self.comm_id = uuid.uuid4().hex
        self.sent: list[dict[str, Any]] = []

    def send(self, data: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        self.sent.append(encode.decode(data, list(buffers or [])))


def test_the_publisher_streams_spans_to_a_1_2_panel_only() -> None:
    publisher = Publisher(tick=0.05)
    new, old = _Comm(), _Comm()
    publisher.start()
    try:
        publisher.attach(new, "1.2")
        publisher.attach(old, "1.1")
        rid = str(_spanned_run().meta.id)
        deadline = perf_counter() + 10
        while perf_counter() < deadline and not all(
            any(m["type"] == "run_end" and m["run"] == rid for m in c.sent) for c in (new, old)
        ):
            time.sleep(0.05)
        mine = [m for m in new.sent if m.get("run") == rid]
        assert any(m["type"] == "spans" for m in mine)
        rows = [m for m in mine if m["type"] == "tasks"]
        assert rows
        assert all("span" in m["arrays"] for m in rows)
        theirs = [m for m in old.sent if m.get("run") == rid]
        assert not any(m["type"] == "spans" for m in theirs)
        old_rows = [m for m in theirs if m["type"] == "tasks"]
        assert sum(m["n"] for m in old_rows) == sum(m["n"] for m in rows) == 9
        assert not any("span" in m["arrays"] for m in old_rows)
    finally:
        publisher.stop()
        history.clear_history()


def test_a_panel_joining_mid_run_gets_the_spans_before_the_rows() -> None:
    run = _spanned_run()
    feed = Feed(run, frozen_cursors(run))
    sent = feed.poll()
    assert any(d["type"] == "spans" for d, _ in sent)
    caught = feed.catch_up()
    kinds = [d["type"] for d, _ in caught]
    assert kinds.count("spans") == 1
    assert kinds.index("spans") < kinds.index("tasks")
    assert all("span" in d["columns"] for d, _ in caught if d["type"] == "tasks")
