"""Bad input, fuzzed (issue 18): panel messages, run files, task keys, magic and CLI options.

Property-based (hypothesis), example counts kept modest so the file runs in about a minute.
Everything runs for real: panel messages go through the ``comm`` package's ``CommManager``
(the entry point ipykernel hands ``comm_open``/``comm_msg`` to), run files are real files,
keys are computed on dask's sync and threads schedulers, the magic is the real
``ProfileMagics`` and the CLI the real ``daskprofile.cli.main`` (and its console script).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
import logging
import pickle
import re
import sys
import tempfile
import threading
import time
import uuid
import warnings
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from operator import add
from pathlib import Path
from typing import Any

import comm
import dask
import numpy as np
import pytest
from comm.base_comm import BaseComm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

import daskprofile
from daskprofile import cli
from daskprofile._args import profile_kwargs
from daskprofile.jupyter import comm as dpcomm
from daskprofile.jupyter import encode, feed, publisher
from daskprofile.jupyter.magic import ProfileMagics, parse_magic_line
from daskprofile.keys import key_label
from daskprofile.options import duration
from daskprofile.record.profile import profile
from test_cli import _cli

# the 100 kB keys and strings drawn below make hypothesis warn about the size of their repr
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
ROOT = Path(__file__).resolve().parents[2]
FAST = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _settings(n: int) -> settings:
    return settings(FAST, max_examples=n)


def _small_run() -> daskprofile.Run:
    with daskprofile.profile() as run:
        dask.threaded.get(
            {("inc-0a1b2c3d", i): (add, i, 1) for i in range(8)},
            [("inc-0a1b2c3d", i) for i in range(8)],
        )
    return run


# =========================================================== 1. messages from the panel


class _Problems(logging.Handler):
    """Keeps every log record that carries a traceback (an exception nobody expected)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


class _KernelEnd(BaseComm):
    """The kernel's end of a panel's comm as ``comm.create_comm`` makes it in ipykernel,
    its ``publish_msg`` keeping what would go out on IOPub (decoded as the panel does)."""

    def __init__(self, **kwargs: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(**kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **k: Any
    ) -> None:
        if msg_type == "comm_msg":
            self.sent.append(encode.decode(data, list(buffers or [])))
        elif msg_type == "comm_close":
            self.sent.append({"type": "<closed>"})


_NO_DATA = object()


class _Panel:
    """Sends what a panel sends, through the comm manager's own handlers."""

    def __init__(self) -> None:
        self.manager = comm.get_comm_manager()
        self.comm_id = ""
        self.made: list[_KernelEnd] = []

    def create_comm(self, **kwargs: Any) -> _KernelEnd:
        """``comm.create_comm``, as ipykernel replaces it."""
        self.made.append(_KernelEnd(**kwargs))
        return self.made[-1]

    def open(self, metadata: Any, data: Any = None) -> _KernelEnd:
        self.comm_id = uuid.uuid4().hex
        content = {"comm_id": self.comm_id, "target_name": dpcomm.TARGET, "data": data}
        self.manager.comm_open(None, None, {"content": content, "metadata": metadata})
        end = self.made[-1]
        assert end.comm_id == self.comm_id
        return end

    def send(self, data: Any = _NO_DATA, buffers: Sequence[bytes] = ()) -> None:
        content: dict[str, Any] = {"comm_id": self.comm_id}
        if data is not _NO_DATA:
            content["data"] = data
        msg = {"content": content, "metadata": {}, "buffers": [memoryview(b) for b in buffers]}
        self.manager.comm_msg(None, None, msg)

    def close(self) -> None:
        self.manager.comm_close(None, None, {"content": {"comm_id": self.comm_id, "data": {}}})


def _wait(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_Panel, _Problems]]:
    """The comm target registered with the comm manager, comms made as ipykernel makes them,
    and a watch on unexpected exceptions (logged with a traceback, or ending a thread)."""
    panel = _Panel()
    monkeypatch.setattr(comm, "create_comm", panel.create_comm)
    problems = _Problems()
    logging.getLogger().addHandler(problems)
    died: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    dpcomm.register_target()
    try:
        yield panel, problems
    finally:
        dpcomm.shutdown()
        for thread in threading.enumerate():
            if thread.name == "daskprofile-export":
                thread.join(30)
        logging.getLogger().removeHandler(problems)
    assert died == [], f"a thread died: {died}"


_HUGE = ["x" * 1_000_000, "😀" * 100_000, "\x00" * 1000, 10**400, -(2**64), 1e308, -0.0]
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**80)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(_HUGE)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_DEEP: Any = []
for _ in range(150):
    _DEEP = [_DEEP]
REQUESTS = ("hello", "pause", "resume", "replay", "keys", "export")
_NAMING_CODE = [
    "os.system", "__import__", "eval", "exec", "builtins.exec", "pickle.loads", "shutdown",
    "daskprofile.jupyter.comm.shutdown", "_req_keys", "request", "__class__", "__init__",
]  # fmt: skip


def _requests(run_ids: list[str]) -> st.SearchStrategy[Any]:
    """Request-shaped dicts: documented and other types, fields of any value."""
    return st.fixed_dictionaries(
        {"type": st.sampled_from([*REQUESTS, *_NAMING_CODE]) | st.text(max_size=12) | _JSON},
        optional={
            "run": st.sampled_from(run_ids) | _JSON,
            "indices": st.lists(st.integers(-3, 2**70), max_size=5)
            | st.just(list(range(10_001)))
            | _JSON,
            "format": st.sampled_from(["trace", "speedscope", "run", "exe", "../x", "html\x00"])
            | _JSON,
            "client": _JSON,
            "protocol": _JSON,
        },
    )


def _check_usable(panel: _Panel, end: _KernelEnd, run: daskprofile.Run) -> None:
    """``pause``, ``keys`` and ``resume`` are still answered, in order, with the right data."""
    rid = str(run.meta.id)
    before = len(end.sent)
    panel.send({"type": "pause"})
    panel.send({"type": "keys", "run": rid, "indices": [0, 10**6]})
    panel.send({"type": "resume"})
    label = run.tasks["key"].iloc[0]
    wanted = [("state", True), ("keys", (rid, (label, ""))), ("state", False)]

    def answered() -> bool:
        got = iter(
            (m["type"], m["paused"] if m["type"] == "state" else (m["run"], tuple(m["keys"])))
            for m in end.sent[before:]
            if m["type"] in ("state", "keys")
        )
        return all(w in got for w in wanted)  # in this order

    assert _wait(answered), [m["type"] for m in end.sent[before:]][:20]


def test_no_panel_message_breaks_the_kernel(kernel: tuple[_Panel, _Problems]) -> None:
    """Any JSON value (or none) as a request's data, with buffers, is answered or ignored:
    nothing raises, nothing hangs, and valid requests are still answered afterwards."""
    panel, problems = kernel
    run = _small_run()
    end = panel.open({dpcomm.PROTOCOL_METADATA_KEY: dpcomm.PROTOCOL_VERSION}, {"type": "hello"})
    assert _wait(lambda: any(m["type"] == "hello" for m in end.sent))
    data = _requests([str(run.meta.id), "nope"]) | _JSON | st.just(_DEEP) | st.just(_NO_DATA)

    @_settings(150)
    @given(data=data, buffers=st.lists(st.binary(max_size=64), max_size=2))
    def deliver(data: Any, buffers: list[bytes]) -> None:
        start = time.monotonic()
        panel.send(data, buffers)
        assert time.monotonic() - start < 5, "a request held the kernel's shell thread"

    deliver()
    _check_usable(panel, end, run)
    assert problems.records == [], [r.getMessage() for r in problems.records]
    panel.close()
    assert panel.comm_id not in panel.manager.comms
    dpcomm.shutdown()
    assert dpcomm.hub() is None


def test_a_malformed_request_is_answered_with_an_error(kernel: tuple[_Panel, _Problems]) -> None:
    panel, _ = kernel
    end = panel.open({dpcomm.PROTOCOL_METADATA_KEY: dpcomm.PROTOCOL_VERSION}, {"type": "hello"})
    for data in ([1], "keys", None, {"type": 5}, {"type": "keys", "indices": "0"}):
        panel.send(data)
    assert _wait(lambda: sum(m["type"] == "error" for m in end.sent) == 5)
    assert {m["code"] for m in end.sent if m["type"] == "error"} == {"bad-request"}
    panel.close()


def _accepted(peer: Any) -> bool:
    """Whether a panel announcing protocol ``peer`` is greeted: ``MAJOR.MINOR`` in ASCII
    digits, of this kernel's major."""
    major = dpcomm.PROTOCOL_VERSION.split(".")[0]
    return isinstance(peer, str) and re.fullmatch(rf"0*{major}\.[0-9]+", peer) is not None


PEERS = ["1.3", "1.0", "01.9", "1.10", "2.0", "1", "1.x", "1.3-beta", "1.²", "².3", "", " 1.3"]


def _connect(panel: _Panel, metadata: Any, data: Any) -> None:
    """Open a comm: greeted if its protocol is this major's, else refused and closed."""
    end = panel.open(metadata, data)
    try:
        peer = metadata.get(dpcomm.PROTOCOL_METADATA_KEY) if isinstance(metadata, dict) else None
        if _accepted(peer):
            assert _wait(lambda: any(m["type"] == "hello" for m in end.sent), 5), end.sent
        else:
            assert [m["type"] for m in end.sent] == ["error", "<closed>"], (peer, end.sent)
            assert end.sent[0]["code"] == "protocol"
            assert panel.comm_id not in panel.manager.comms
    finally:
        panel.close()
        dpcomm.shutdown()
    assert panel.comm_id not in panel.manager.comms


def test_any_comm_open_is_greeted_or_refused(kernel: tuple[_Panel, _Problems]) -> None:
    """Whatever the open message's metadata and data: a hello for this major version, else
    a ``protocol`` error and the comm closed; never an exception, no comm left open."""
    panel, problems = kernel
    protocol = st.sampled_from(PEERS) | st.text(alphabet="0123456789.²\u0661x", max_size=5)
    metadata = st.fixed_dictionaries(
        {dpcomm.PROTOCOL_METADATA_KEY: protocol | _JSON}, optional={"x": _JSON}
    )

    @_settings(40)
    @given(metadata=metadata | _JSON, data=_JSON)
    def connect(metadata: Any, data: Any) -> None:
        _connect(panel, metadata, data)
        assert problems.records == [], [r.getMessage() for r in problems.records]

    connect()


def test_a_panel_announcing_no_readable_version_is_refused_not_left_waiting(
    kernel: tuple[_Panel, _Problems],
) -> None:
    """``"1"`` and ``"1.x"`` were accepted as major 1, then sent nothing (the publisher
    could not tell what they read); ``"1.²"`` killed the publisher's thread."""
    panel, problems = kernel
    for peer in ("1", "1.x", "1.3-beta", "1.²", "².3"):
        _connect(panel, {dpcomm.PROTOCOL_METADATA_KEY: peer}, {"type": "hello"})
    assert problems.records == []


def test_the_documented_panel_requests_are_the_only_handlers() -> None:
    """Each request type maps to one ``Publisher._req_*`` method (a fixed table); and
    nothing that handles panel messages evaluates, imports or unpickles anything."""
    text = (ROOT / "docs" / "protocol.md").read_text()
    table = text.split("## Panel -> kernel", 1)[1].split("\n## ", 1)[0]
    documented = {
        t for row in re.findall(r"^\| (`.+?`) \|", table, re.M) for t in re.findall(r"`(\w+)`", row)
    }
    handlers = {
        name.removeprefix("_req_") for name in vars(publisher.Publisher) if name.startswith("_req_")
    }
    assert documented == handlers == set(REQUESTS)
    forbidden = {
        "eval",
        "exec",
        "compile",
        "__import__",
        "import_module",
        "find_spec",
        "loads",
        "load",
    }
    for module in (dpcomm, publisher, feed, encode):
        tree = ast.parse(inspect.getsource(module))
        called = {
            getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
        }
        assert not called & forbidden, (module.__name__, called & forbidden)
        imported = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert not imported & {"pickle", "marshal", "cloudpickle", "dill", "importlib"}, module


def test_requests_naming_code_run_nothing(kernel: tuple[_Panel, _Problems], tmp_path: Path) -> None:
    """A request naming a function, a module or a command runs nothing and imports nothing."""
    panel, problems = kernel
    run = _small_run()
    marker = tmp_path / "ran"
    command = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    end = panel.open({dpcomm.PROTOCOL_METADATA_KEY: dpcomm.PROTOCOL_VERSION}, {"type": "hello"})
    _check_usable(panel, end, run)  # warm: what a valid request imports is imported now
    modules = set(sys.modules)
    payload = pickle.dumps(marker.touch).hex()
    for kind in [*_NAMING_CODE, "keys", "export", "replay"]:
        for value in (command, ["os", "system", command], {"__reduce__": command}, payload):
            panel.send(
                {"type": kind, "run": value, "args": value, "format": value, "module": value}
            )
    _check_usable(panel, end, run)
    panel.close()
    assert not marker.exists()
    assert set(sys.modules) - modules == set()
    assert problems.records == []


# =========================================================== 2. run files


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real saved run (a threaded compute with every collector on)."""
    return Path(_small_run().save(tmp_path_factory.mktemp("runs") / "good.npz"))


def _refused(path: Path) -> str:
    """``daskprofile.load(path)``'s ValueError message (anything else fails the test)."""
    with pytest.raises(ValueError) as err:
        daskprofile.load(path)
    message = str(err.value)
    assert str(path) in message
    return message


def _npz(path: Path, **arrays: Any) -> Path:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _header(head: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(head).encode(), dtype=np.uint8)


def test_a_run_file_truncated_anywhere_is_a_value_error_naming_it(
    saved: Path, tmp_path: Path
) -> None:
    data = saved.read_bytes()
    bad = tmp_path / "cut.npz"
    for end in range(len(data)):  # every offset
        bad.write_bytes(data[:end])
        _refused(bad)


def test_a_damaged_run_file_loads_whole_or_is_a_value_error_naming_it(
    saved: Path, tmp_path: Path
) -> None:
    data = saved.read_bytes()
    bad = tmp_path / "damaged.npz"

    @_settings(120)
    @given(
        flips=st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(1, 255)), max_size=4),
        cut=st.tuples(st.integers(0, len(data)), st.integers(0, 64)),
    )
    def damage(flips: list[tuple[int, int]], cut: tuple[int, int]) -> None:
        buf = bytearray(data)
        for at, bits in flips:
            buf[at] ^= bits
        del buf[cut[0] : cut[0] + cut[1]]
        bad.write_bytes(bytes(buf))
        try:
            run = daskprofile.load(bad)
        except ValueError as exc:
            message = str(exc)
        else:
            assert run.summary()["tasks"] == 8  # what survived is the run itself
            return
        assert str(bad) in message

    damage()


def _foreign_files(tmp_path: Path) -> list[Path]:
    out = [tmp_path / "empty.npz", tmp_path / "run.json", tmp_path / "run.pickle"]
    out[0].write_bytes(b"")
    out[1].write_text(json.dumps({"format": "daskprofile-run", "version": 1}))
    out[2].write_bytes(pickle.dumps({"format": "daskprofile-run"}))
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("readme.txt", "not a run")
    out.append(tmp_path / "other.zip")
    out.append(_npz(tmp_path / "arrays.npz", x=np.arange(3)))
    out.append(_npz(tmp_path / "list.npz", __json__=_header([1, 2])))
    out.append(_npz(tmp_path / "utf.npz", __json__=np.frombuffer(b"\xff\xfe{", dtype=np.uint8)))
    out.append(
        _npz(tmp_path / "head.npz", __json__=_header({"format": "daskprofile-run", "version": 1}))
    )
    np.save(tmp_path / "array.npy", np.arange(4))
    out.append(tmp_path / "array.npy")
    return out


def test_foreign_files_are_value_errors_naming_them(tmp_path: Path) -> None:
    for path in _foreign_files(tmp_path):
        _refused(path)

    @_settings(60)
    @given(st.binary(max_size=2048) | st.binary(max_size=64).map(lambda b: b"PK\x03\x04" + b))
    def random_bytes(data: bytes) -> None:
        path = tmp_path / "random.npz"
        path.write_bytes(data)
        _refused(path)

    random_bytes()


@_settings(60)
@given(
    fmt=st.just("daskprofile-run") | _JSON,
    version=_JSON | st.integers(-5, 10**6),
)
def test_any_format_and_version_field_loads_or_is_a_value_error_naming_the_file(
    fmt: Any, version: Any
) -> None:
    """Only this format, at this version or older, loads."""
    from daskprofile.meta import VERSION

    with open_saved_copy() as (path, head, arrays):
        head.update(format=fmt, version=version)
        _npz(path, **{**arrays, "__json__": _header(head)})
        readable = fmt == "daskprofile-run" and isinstance(version, int) and version <= VERSION
        if readable:
            assert len(daskprofile.load(path).tasks) == 8
        else:
            message = _refused(path)
            assert ("version" in message) if fmt == "daskprofile-run" else ("format" in message)


_SAVED_COPY: dict[str, Any] = {}


@contextlib.contextmanager
def open_saved_copy() -> Iterator[tuple[Path, dict[str, Any], dict[str, np.ndarray]]]:
    """A saved run's header and arrays, to write back changed (one run per process)."""
    if not _SAVED_COPY:
        with tempfile.TemporaryDirectory() as tmp:
            path = _small_run().save(Path(tmp) / "run.npz")
            with np.load(path) as z:
                _SAVED_COPY.update({k: z[k] for k in z.files})
    arrays = dict(_SAVED_COPY)
    head = json.loads(arrays.pop("__json__").tobytes())
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "edited.npz", head, arrays


class _Boom:
    """Unpickling it creates ``marker`` (what a malicious run file would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_loading_never_unpickles(tmp_path: Path) -> None:
    """Pickles where a run file has JSON or columns (or as the whole file) run nothing."""
    marker = tmp_path / "unpickled"
    boom = np.array([_Boom(marker)], dtype=object)
    files = [tmp_path / "whole.pickle"]
    files[0].write_bytes(pickle.dumps(_Boom(marker)))
    files.append(_npz(tmp_path / "head.npz", __json__=boom))
    with open_saved_copy() as (_, head, arrays):
        for column in ("tasks.group", "tasks.key_text", "cache.metric"):
            files.append(
                _npz(
                    tmp_path / f"{column}.npz",
                    **{**arrays, column: boom, "__json__": _header(head)},
                )
            )
    for path in files:
        _refused(path)
    assert not marker.exists()
    pickle.loads(files[0].read_bytes())  # the payload is live: loading would have shown it
    assert marker.exists()


def test_compare_and_the_cli_name_a_bad_run_file(saved: Path, tmp_path: Path) -> None:
    """``compare``, ``daskprofile diff`` and ``daskprofile view``: a ValueError naming the
    file, and exit code 2 with the file named and no traceback."""
    for bad in [*_foreign_files(tmp_path), tmp_path / "missing.npz"]:
        with pytest.raises(ValueError, match=re.escape(str(bad))):
            daskprofile.compare(saved, bad)
        for argv in (
            ["diff", str(saved), str(bad)],
            ["view", str(bad), "--folded", str(tmp_path / "f")],
        ):
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(argv)
            assert code == 2, (argv, stderr.getvalue())
            assert str(bad) in stderr.getvalue()
            assert "Traceback" not in stderr.getvalue()
    junk = tmp_path / "junk.npz"
    junk.write_bytes(saved.read_bytes()[:100])
    for args in (("view", "junk.npz"), ("diff", str(saved), "junk.npz")):
        out = _cli(*args, cwd=tmp_path)  # the console script, in its own process
        assert out.returncode == 2, out.stderr
        assert "junk.npz: not a daskprofile run file" in out.stderr
        assert "Traceback" not in out.stderr


# =========================================================== 3. keys

_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    [
        "x" * 100_000,
        "\x00",
        "a\x00b",
        "\u202eRTL\u202c",
        "שלום-עולם",
        "👩‍👩‍👧-😀",
        "<b>&amp;</b>",
        "a\nb\r\tc",
        "",
        "-",
        "('a', 1)",
    ]
)
_ATOM = _TEXT | st.integers() | st.floats(allow_nan=False) | st.binary(max_size=8)
_PART = st.recursive(
    _TEXT | st.integers() | st.floats(allow_nan=False) | st.none(),
    lambda inner: st.lists(inner, max_size=3).map(tuple),
    max_leaves=6,
)
_KEY = (
    _ATOM
    | st.tuples(_TEXT, _PART)
    | st.tuples(_TEXT, _PART, _PART)
    | st.lists(_PART, max_size=3).map(tuple)
)
SCHEDULERS: dict[str, Callable[..., Any]] = {"sync": dask.get, "threads": dask.threaded.get}


def _graph(keys: list[Any]) -> tuple[dict[Any, Any], list[Any]]:
    """A task per key (each its own output), and one summing those a task can refer to."""
    dsk: dict[Any, Any] = {k: (partial(abs, i),) for i, k in enumerate(keys)}  # no literal
    refs = [k for k in keys if not isinstance(k, bytes)]  # dask does not resolve bytes keys
    dsk["total-5eed5eed"] = (sum, refs)
    return dsk, [*keys, "total-5eed5eed"]


def _profiled(scheduler: str, keys: list[Any]) -> tuple[Any, daskprofile.Run]:
    dsk, outputs = _graph(keys)
    expected = SCHEDULERS[scheduler](dsk, outputs)
    with daskprofile.profile(stacks=False, resources=False) as run:
        result = SCHEDULERS[scheduler](dsk, outputs)
    assert result == expected  # the compute's result is unchanged
    assert not run.meta.errors, run.meta.errors  # no collector switched itself off
    return dsk, run


def _check_run(dsk: dict[Any, Any], run: daskprofile.Run, tmp: Path, html: bool = False) -> None:
    assert Counter(run.tasks["key"]) == Counter(key_label(k) for k in dsk)
    summary = run.summary()
    assert summary["tasks"] == len(dsk)
    json.dumps(summary)
    trace = json.loads(Path(run.to_chrome_trace(tmp / "t.json")).read_text())
    named = Counter(e["args"]["key"] for e in trace["traceEvents"] if e.get("ph") == "X")
    assert named == Counter(run.tasks["key"])
    json.loads(Path(run.to_speedscope(tmp / "s.json")).read_text())
    run.to_folded(tmp / "f.txt")
    loaded = daskprofile.load(run.save(tmp / "r.npz"))
    assert list(loaded.tasks["key"]) == list(run.tasks["key"])
    assert list(loaded.tasks["group"]) == list(run.tasks["group"])
    if html:
        page = Path(run.to_html(tmp / "r.html")).read_text()
        assert "</html>" in page


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_any_dask_key_is_recorded_and_survives_every_export(scheduler: str, tmp_path: Path) -> None:
    @_settings(20)
    @given(keys=st.lists(_KEY, min_size=1, max_size=6, unique=True))
    def check(keys: list[Any]) -> None:
        dsk, run = _profiled(scheduler, keys)
        _check_run(dsk, run, tmp_path)

    check()


NASTY_KEYS: list[Any] = [
    (), ("",), ("a", 1, 2.5, None), (("n", 1), (2, (None,))), b"bytes\x00\xff", b"",
    "emoji😀\u202eRTL\x00nul", "x" * 100_000, 7, -1, 3.5, float("inf"),
    "</script><script>alert(1)//",
]  # fmt: skip


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_nasty_keys_render_in_the_html_snapshot(scheduler: str, tmp_path: Path) -> None:
    dsk, run = _profiled(scheduler, NASTY_KEYS)
    _check_run(dsk, run, tmp_path, html=True)


def test_an_empty_tuple_key_keeps_the_cache_collector_on() -> None:
    """dask allows the key ``()``; the cache collector read its name as ``key[0]`` and
    switched itself off (IndexError) for the run."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with daskprofile.profile(stacks=False, resources=False) as run:
            assert dask.get({(): (add, 1, 2), "out-1": (add, (), 1)}, "out-1") == 4
    assert [str(w.message) for w in caught] == []
    assert not run.meta.errors
    assert "out" in set(run.cache["group"])


# =========================================================== 4. magic and CLI options

_VALUES = st.sampled_from(
    ["", " ", "0", "-1", "-0", "nan", "inf", "-inf", "1e10", "1e309", "1e-3", "5ms", "0.05",
     "abc", "1 hour", "2 days", "0x10", "1_0", "\x00", "😀", "ms", "9" * 400, "--dt", "=5ms"]
) | st.text(max_size=10)  # fmt: skip
_OPTION = (
    st.sampled_from(["--no-tasks", "--no-resources", "--no-cache", "--no-stacks"]).map(
        lambda o: [o]
    )
    | st.tuples(st.sampled_from(["--dt", "--interval"]), _VALUES).map(list)
    | st.tuples(st.sampled_from(["--dt", "--interval"]), _VALUES).map(lambda t: [f"{t[0]}={t[1]}"])
    | st.sampled_from(["--bogus", "-x", "--no-tasks=1", "--dt", "--interval", "--no-stack"]).map(
        lambda o: [o]
    )
)
_OPTIONS = st.lists(_OPTION, max_size=3).map(lambda parts: [t for p in parts for t in p])


def _names_an_option(message: str, tokens: list[str]) -> bool:
    names = {t.split("=", 1)[0].lstrip("-") for t in tokens if t.startswith("-")}
    return any(name and name in message for name in names)


def _expected_options(tokens: list[str]) -> dict[str, Any]:
    """What the given switches must turn off."""
    return {
        name: False
        for name in ("tasks", "resources", "cache", "stacks")
        if f"--no-{name}" in tokens
    }


def _compute() -> int:
    return int(
        dask.threaded.get(
            {("inc-77", i): (add, i, 1) for i in range(6)}
            | {"s": (sum, [("inc-77", i) for i in range(6)])},
            "s",
        )
    )


def test_magic_options_are_usage_errors_naming_the_option_or_profile_the_cell() -> None:
    import shlex

    magics = ProfileMagics(shell=None)

    @_settings(80)
    @given(tokens=_OPTIONS)
    def check(tokens: list[str]) -> None:
        line = " ".join(shlex.quote(t) for t in tokens)
        try:
            ns, _ = parse_magic_line(line, cell=True)
            block = profile(**profile_kwargs(ns))
        except Exception:
            # a wrong line: the magic itself says so, naming the option, before running code
            with pytest.raises(UsageError) as err:
                magics.daskprofile(line, "raise AssertionError('the cell ran')")
            assert _names_an_option(str(err.value), tokens), (tokens, str(err.value))
            return
        with block as run:
            assert _compute() == 21
        options = run.meta.options
        assert {k: options[k] for k in _expected_options(tokens)} == _expected_options(tokens)
        assert 0 < options["dt"] <= 86_400
        assert 0 < options["interval"] <= 86_400

    check()


def test_cli_options_are_usage_errors_naming_the_option_or_profile_the_script(
    tmp_path: Path,
) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        "import sys, dask\nfrom operator import add\n"
        "open(sys.argv[1], 'w').write(str(dask.threaded.get({'a': (add, 1, 2)}, 'a')))\n"
    )

    @_settings(40)
    @given(tokens=_OPTIONS)
    def check(tokens: list[str]) -> None:
        result = tmp_path / "result.txt"
        result.unlink(missing_ok=True)
        argv = ["run", "-q", "--folded", str(tmp_path / "f.txt"), *tokens, str(script), str(result)]
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # argparse's usage error
                code = exc.code
        if code == 0:
            assert result.read_text() == "3"
            return
        assert code == 2, (tokens, stderr.getvalue())
        assert not result.exists()  # the script did not run
        # (an option missing its value takes the script's path: the next word is the script)
        named = _names_an_option(stderr.getvalue(), tokens) or "no such script" in stderr.getvalue()
        assert named, (tokens, stderr.getvalue())
        assert "Traceback" not in stderr.getvalue()

    check()


def test_an_empty_or_too_long_duration_is_an_error_naming_the_option(tmp_path: Path) -> None:
    """``--dt ''`` escaped as an IndexError; ``--interval 1e10`` was accepted and killed the
    stack sampler's thread (a wait that long overflows the platform's timeout)."""
    magics = ProfileMagics(shell=None)
    for line, name in (("--dt ''", "dt"), ("--interval 1e10", "interval"), ("--dt=2e5", "dt")):
        with pytest.raises(UsageError, match=rf"^{name} must be"):
            magics.daskprofile(line, "raise AssertionError('the cell ran')")
    for value in ("", 1e10, "3 days"):
        with pytest.raises(ValueError, match=r"^dt must be"):
            duration("dt", value)
    (tmp_path / "job.py").write_text("print('ran')\n")
    out = _cli("run", "--dt", "", "job.py", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("daskprofile run: dt must be"), out.stderr
