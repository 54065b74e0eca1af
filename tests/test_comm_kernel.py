"""The comm publisher in a real ipykernel, driven the way JupyterLab drives it.

A ``jupyter_client`` client runs the panel's silent registration code, opens a comm on
target ``daskprofile`` with the same ``comm_open`` JupyterLab sends, runs dask code in the
kernel and reads the ``comm_msg``s on IOPub, decoded as the browser decodes them
(:func:`daskprofile.jupyter.encode.decode`, the fixtures' format).
"""

from __future__ import annotations

import contextlib
import json
import queue
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jupyter_client.manager import KernelManager
from zmq.utils.garbage import gc as _zmq_gc

from daskprofile.jupyter import encode
from daskprofile.jupyter.comm import PROTOCOL_VERSION

pytestmark = pytest.mark.slow

# pyzmq starts a client-side garbage-collector thread lazily on the first large message;
# start it now so the leak check (conftest) does not count it as ours
_zmq_gc.start()

REGISTER = "import daskprofile.jupyter.comm as _dp; _dp.register_target()"
COMPUTE = (
    "import dask, dask.array as da\n"
    "x = da.ones((400, 400), chunks=(20, 20))\n"
    "print(float((x + 1).sum().compute(scheduler='threads')))"
)
LAST_RUN_TASKS = (
    "from daskprofile.record import history as recorder\n"
    "print(len(recorder.history()[-1].tasks), recorder.history()[-1].meta['id'])"
)


class Panel:
    """What the lab panel does over the kernel protocol, with a decoded message log."""

    def __init__(self, kc: Any) -> None:
        self.kc = kc
        self.comm_id = ""
        self.log: list[dict[str, Any]] = []
        self.closed: set[str] = set()

    # -- kernel protocol ------------------------------------------------------------------
    def execute(self, code: str, timeout: float = 60) -> str:
        """Run code; returns its stdout (IOPub is read, comm messages logged meanwhile)."""
        msg_id = self.kc.execute(code)
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self._next(deadline)
            parent = msg["parent_header"].get("msg_id")
            if parent == msg_id and msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if parent == msg_id and msg["msg_type"] == "error":
                raise AssertionError("\n".join(msg["content"]["traceback"]))
            idle = msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
            if parent == msg_id and idle:
                return "".join(out)

    def open(self, protocol: str = "1.0") -> str:
        self.comm_id = uuid.uuid4().hex
        hello = {"type": "hello", "client": "jupyterlab", "protocol": protocol}
        content = {"comm_id": self.comm_id, "target_name": "daskprofile", "data": hello}
        self._shell("comm_open", content, {"daskprofile_protocol": protocol})
        return self.comm_id

    def send(self, data: Any) -> None:
        self._shell("comm_msg", {"comm_id": self.comm_id, "data": data})

    def close(self) -> None:
        self._shell("comm_close", {"comm_id": self.comm_id, "data": {}})

    def _shell(self, msg_type: str, content: dict[str, Any], metadata: Any = None) -> None:
        msg = self.kc.session.msg(msg_type, content, metadata=metadata or {})
        self.kc.shell_channel.send(msg)

    # -- IOPub ----------------------------------------------------------------------------
    def _next(self, deadline: float) -> dict[str, Any]:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no kernel message in time")
            try:
                msg: dict[str, Any] = self.kc.get_iopub_msg(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            self._log(msg)
            return msg

    def _log(self, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "comm_close":
            self.closed.add(content["comm_id"])
        if msg["msg_type"] != "comm_msg" or content.get("comm_id") != self.comm_id:
            return
        decoded = encode.decode(content["data"], msg.get("buffers") or [])
        decoded["_wire"] = encode.wire_size(content["data"], msg.get("buffers") or [])
        self.log.append(decoded)

    def wait(self, until: Callable[[list[dict[str, Any]]], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not until(self.log):
            try:
                self._next(deadline)
            except TimeoutError:
                types = [m["type"] for m in self.log]
                raise AssertionError(f"condition not met; got {types}") from None

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self._next(deadline)
            except TimeoutError:
                return

    def of(self, kind: str, run: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.log if m["type"] == kind and (run is None or m.get("run") == run)]


def _has(kind: str, n: int = 1) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda log: sum(m["type"] == kind for m in log) >= n


@contextlib.contextmanager
def kernel_with_panel() -> Iterator[Panel]:
    """A real kernel with the comm target registered, and the panel's side of the comm."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.blocking_client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        p = Panel(kc)
        p.execute(REGISTER)
        yield p
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture
def panel() -> Iterator[Panel]:
    with kernel_with_panel() as p:
        yield p


def _last_run(panel: Panel) -> tuple[int, str]:
    tasks, rid = panel.execute(LAST_RUN_TASKS).split()
    return int(tasks), rid


def _check_run_stream(panel: Panel, rid: str, n_tasks: int) -> None:
    """run_start, then groups/workers before the rows using them, all rows, run_end."""
    msgs = [m for m in panel.log if m.get("run") == rid]
    types = [m["type"] for m in msgs]
    assert types[0] == "run_start"
    assert types[-1] == "run_end"
    groups: set[int] = set()
    workers: set[int] = set()
    rows = 0
    for m in msgs:
        if m["type"] == "groups":
            groups |= set(m["ids"])
        if m["type"] == "workers":
            workers |= set(m["ids"])
        if m["type"] == "tasks":
            assert set(m["arrays"]["group"].tolist()) <= groups
            assert set(m["arrays"]["worker"].tolist()) <= workers
            assert m["first"] == rows
            rows += m["n"]
            times = m["times"]
            assert (times["submit"] <= times["start"] + 1e-6).all()
            assert (times["start"] <= times["stop"] + 1e-6).all()
    assert rows == n_tasks
    assert msgs[-1]["summary"]["tasks"] == n_tasks


def test_every_compute_streams_to_a_connected_panel(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    hello = panel.of("hello")[0]
    assert hello["protocol"] == PROTOCOL_VERSION
    assert hello["history"] == 0
    assert hello["paused"] is False
    assert panel.execute(COMPUTE).strip() == str(2.0 * 400 * 400)
    panel.wait(_has("run_end"))
    n_tasks, rid = _last_run(panel)
    assert n_tasks > 400
    _check_run_stream(panel, rid, n_tasks)
    assert panel.of("resources", rid)
    assert panel.of("cache", rid)
    assert panel.of("progress", rid)[-1]["done"]
    start = panel.of("run_start", rid)[0]
    assert ".compute(scheduler=" in start["title"]
    assert set(panel.of("workers", rid)[0]["kinds"]) <= {"thread", "process"}


def test_explicit_profile_block_streams_once(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    panel.execute(
        "import daskprofile, dask, dask.array as da\n"
        "with daskprofile.profile() as run:\n"
        "    da.ones((100, 100), chunks=10).sum().compute()\n"
    )
    panel.wait(_has("run_end"))
    panel.drain(0.5)
    n_tasks, rid = _last_run(panel)
    assert len(panel.of("run_start")) == 1  # the panel's own session stood aside
    _check_run_stream(panel, rid, n_tasks)


def test_keys_and_export_requests(panel: Panel) -> None:
    panel.open()
    panel.execute(COMPUTE)
    panel.wait(_has("run_end"))
    _, rid = _last_run(panel)
    panel.send({"type": "keys", "run": rid, "indices": [0, 1, 2]})
    panel.send({"type": "export", "run": rid, "format": "trace"})
    panel.send({"type": "export", "run": rid, "format": "run"})
    panel.wait(lambda log: sum(m["type"] in ("keys", "export") for m in log) >= 3)
    keys = panel.of("keys")[0]
    assert keys["indices"] == [0, 1, 2]
    assert all(isinstance(k, str) and k for k in keys["keys"])
    trace = next(m for m in panel.of("export") if m["format"] == "trace")
    assert "traceEvents" in json.loads(trace["payload"])
    saved = next(m for m in panel.of("export") if m["format"] == "run")
    assert saved["payload"][:2] == b"PK"  # npz
    assert saved["filename"].endswith(".npz")


def test_replay_after_reconnect(panel: Panel) -> None:
    panel.open()
    panel.execute(COMPUTE)
    panel.wait(_has("run_end"))
    n_tasks, rid = _last_run(panel)
    panel.close()
    panel.log.clear()
    panel.open()
    panel.wait(_has("run_end"))
    assert panel.of("hello")[0]["history"] == 1
    assert panel.log[0]["type"] == "hello"
    _check_run_stream(panel, rid, n_tasks)


def test_pause_stops_live_messages_and_resume_catches_up(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    panel.send({"type": "pause"})
    panel.wait(_has("state"))
    assert panel.of("state")[0]["paused"] is True
    panel.execute(COMPUTE)
    panel.drain(1.0)
    assert not [m for m in panel.log if m["type"] in ("run_start", "tasks", "run_end")]
    panel.send({"type": "resume"})
    panel.wait(_has("run_end"))
    assert panel.of("state")[-1]["paused"] is False
    n_tasks, rid = _last_run(panel)
    _check_run_stream(panel, rid, n_tasks)


BAD = [
    "not a dict",
    {"type": 5},
    {"no": "type"},
    {"type": "keys", "run": "nope", "indices": [1]},
    {"type": "keys", "run": 3, "indices": "x"},
    {"type": "keys", "indices": list(range(20_000))},
    {"type": "export", "run": "nope", "format": "html"},
    {"type": "export", "format": "exe"},
    {"type": "replay", "run": ["x"]},
]


CAPTURE_LOG = (
    "import logging\n"
    "class _Keep(logging.Handler):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.levels = []\n"
    "    def emit(self, record):\n"
    "        self.levels.append(record.levelname)\n"
    "_kept = _Keep()\n"
    "logging.getLogger('daskprofile').addHandler(_kept)"
)


def test_malformed_messages_get_an_error_and_the_kernel_survives(panel: Panel) -> None:
    panel.execute(CAPTURE_LOG)
    panel.open()
    panel.wait(_has("hello"))
    for data in BAD:
        panel.send(data)
    panel.send({"type": "from-the-future", "x": 1})  # unknown types are ignored
    panel.wait(_has("error", len(BAD)))
    panel.drain(0.5)
    errors = panel.of("error")
    assert len(errors) == len(BAD)
    assert {e["code"] for e in errors} == {"bad-request", "unknown-run"}
    levels = panel.execute("print(' '.join(_kept.levels))").split()
    assert levels.count("ERROR") == len(BAD), levels  # every rejection is logged
    assert levels.count("WARNING") == 1, levels  # the unknown type too, as a warning
    assert panel.execute("print(6 * 7)").strip() == "42"
    panel.execute(COMPUTE)
    panel.wait(_has("run_end"))


def test_protocol_major_mismatch_is_refused_clearly(panel: Panel) -> None:
    comm_id = panel.open(protocol="2.0")
    panel.wait(_has("error"))
    error = panel.of("error")[0]
    assert error["code"] == "protocol"
    assert "2.0" in error["message"]
    assert PROTOCOL_VERSION in error["message"]
    panel.drain(0.5)
    assert comm_id in panel.closed


LEFTOVERS = (
    "import threading, dask.local\n"
    "from daskprofile import hooks\n"
    "print(sorted(t.name for t in threading.enumerate() if t.name.startswith('daskprofile')),"
    " len(hooks.listeners()), dask.local.get_async is hooks.original_get_async)"
)


def _settle(panel: Panel, expected: str) -> None:
    deadline = time.monotonic() + 10
    while (out := panel.execute(LEFTOVERS).strip()) != expected:
        assert time.monotonic() < deadline, out
        time.sleep(0.2)


def _kept(panel: Panel) -> list[str]:
    code = (
        "from daskprofile.record import history as H; print(*[r.meta['id'] for r in H.history()])"
    )
    return panel.execute(code).split()


def test_a_panel_that_comes_back_replays_what_ran_while_it_was_away(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    assert "daskprofile-publisher" in panel.execute(LEFTOVERS)
    panel.execute(COMPUTE)
    panel.wait(_has("run_end"))
    panel.close()
    # the publisher is gone, the recorder listens on (no thread while idle)
    _settle(panel, "[] 1 False")
    panel.execute(COMPUTE)  # no panel: still recorded, with its samples
    kept = _kept(panel)
    assert len(kept) == 2
    n_tasks, rid = _last_run(panel)
    assert rid == kept[-1]
    samples = "from daskprofile.record import history as H; print(len(H.history()[-1].resources))"
    assert int(panel.execute(samples)) > 0
    _settle(panel, "[] 1 False")  # the samplers stopped once idle

    panel.log.clear()
    panel.open()  # page reloaded, notebook switched back, panel reopened: all the same
    panel.wait(_has("run_end", 2))
    assert panel.of("hello")[0]["history"] == 2
    assert {m["run"] for m in panel.of("run_end")} == set(kept)
    _check_run_stream(panel, rid, n_tasks)

    panel.execute("from daskprofile.jupyter import comm as _c; _c.shutdown()")
    _settle(panel, "[] 0 True")
    panel.execute(COMPUTE)  # stopped: not recorded
    assert len(_kept(panel)) == 2


SAMPLERS = (
    "import threading\n"
    "print(sorted((t.name, t.ident) for t in threading.enumerate()"
    " if t.name in ('daskprofile-resources', 'daskprofile-stacks')))"
)


def test_runs_back_to_back_share_the_samplers_which_stop_once_idle(panel: Panel) -> None:
    """Each cell is a run; a cell right after another does not restart the samplers (a
    start and a stop cost a small compute tens of ms), and they end once the kernel idles.
    The computes are dask.delayed: their keys carry a uuid (the live reader once failed on
    them, so the panel got no rows)."""
    panel.execute("import dask; dask.config.set({'daskprofile.panel.idle-stop': '3s'})")
    panel.open()
    panel.wait(_has("hello"))
    tiny = "import dask; print(dask.delayed(sum)([1, 2]).compute(scheduler='sync'))"
    assert panel.execute(tiny).strip() == "3"
    first = panel.execute(SAMPLERS).strip()
    assert "daskprofile-resources" in first, first
    assert "daskprofile-stacks" in first, first
    assert panel.execute(tiny).strip() == "3"
    assert panel.execute(SAMPLERS).strip() == first  # the same threads: not restarted
    panel.wait(_has("run_end", 2))
    assert len({m["run"] for m in panel.of("run_end")}) == 2
    # a delayed key ('sum-<uuid>', its suffix kept as 16 bytes) streams under its group
    n_tasks, rid = _last_run(panel)
    assert n_tasks == 1
    _check_run_stream(panel, rid, n_tasks)
    assert panel.of("groups", rid)[0]["names"] == ["sum"]
    _settle(panel, "['daskprofile-publisher'] 1 False")  # idle: no sampler thread


def test_without_keep_recording_closing_the_last_comm_stops_everything(panel: Panel) -> None:
    panel.execute("import dask; dask.config.set({'daskprofile.panel.keep-recording': False})")
    panel.open()
    panel.wait(_has("hello"))
    panel.execute(COMPUTE)
    panel.wait(_has("run_end"))
    panel.close()
    _settle(panel, "[] 0 True")
    panel.execute(COMPUTE)  # a compute with no panel is not profiled
    assert len(_kept(panel)) == 1


MANY = (
    "import dask\n"
    "from operator import add\n"
    "dsk = {('inc-3f2a9c', i): (add, i, 1) for i in range(20_000)}\n"
    "dsk['total-3f2a9c'] = (sum, [('inc-3f2a9c', i) for i in range(20_000)])\n"
    "print(dask.get(dsk, 'total-3f2a9c'))"
)


def test_bytes_per_task_on_the_wire(panel: Panel) -> None:
    """The issue's budget, <= 32 B/task at steady state, counted as the frames arrive."""
    panel.open()
    panel.wait(_has("hello"))
    panel.execute(MANY)
    panel.wait(_has("run_end"))
    n_tasks, rid = _last_run(panel)
    assert n_tasks == 20_001
    run = [m for m in panel.log if m.get("run") == rid]
    rows = [m for m in run if m["type"] == "tasks"]
    assert sum(m["n"] for m in rows) == n_tasks
    per_task = sum(m["_wire"] for m in rows) / n_tasks  # ~17 B here
    everything = sum(m["_wire"] for m in run) / n_tasks  # cache, progress, resources too
    assert per_task <= 32, per_task
    assert everything <= 32, everything
