"""Hot lines true to the user's code on every scheduler: code pickled by value mapped back
to its file, notebook cells named ``Cell In[N]``, function sources kept with the run,
``run.hot_lines``/``run.print_lines``, and the protocol 1.3 ``sources`` message."""

from __future__ import annotations

import io
import json
import pickle
import sys
import time
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle
import dask
import pytest

import daskprofile
from daskprofile import codemap, stacktree
from daskprofile.jupyter import encode
from daskprofile.jupyter.publisher import Connection, Publisher
from daskprofile.run import Run
from nbkernel import execute, stream

SPIN_SECONDS = 0.2


def spin(seconds: float) -> int:
    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        total += sum(range(3000))  # MODULE-HOT
    return total


#: a module workers cannot import (not in sys.modules): cloudpickle copies its functions
#: by value, and their code comes back as ``<dynamic-code>`` where they run
DYNAMIC_SOURCE = """\
def helper(n):
    return sum(range(n))  # DYN-HELPER


def dyn_spin(seconds):
    import time

    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        total += helper(3000)  # DYN-HOT
    return total
"""


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory: pytest.TempPathFactory) -> types.FunctionType:
    """``dyn_spin`` of a module made at run time from a real file, not importable."""
    path = tmp_path_factory.mktemp("dyn") / "user_script.py"
    path.write_text(DYNAMIC_SOURCE)
    module = types.ModuleType(f"daskprofile_dynamic_{uuid.uuid4().hex[:8]}")
    module.__file__ = str(path)
    exec(compile(DYNAMIC_SOURCE, str(path), "exec"), module.__dict__)
    fn: types.FunctionType = module.dyn_spin
    return fn


def line_of(fn: Callable[..., Any], marker: str) -> int:
    code = fn.__code__
    lines = Path(code.co_filename).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def profile_both(dynamic: Callable[..., Any], scheduler: str, **kwargs: Any) -> Run:
    tasks = [dask.delayed(spin)(SPIN_SECONDS), dask.delayed(dynamic)(SPIN_SECONDS)]
    with daskprofile.profile(interval=0.005, resources=False, **kwargs) as run:
        dask.compute(*tasks, scheduler=scheduler)
    return run


def check_hot_line(run: Run, fn: Callable[..., Any], marker: str) -> None:
    """``fn``'s hottest line is the marked one, named by its own file and text."""
    df = run.hot_lines(fn)
    assert list(df.columns) == ["file", "line", "source", "samples", "seconds", "share"]
    assert len(df) >= 1
    top = df.iloc[0]
    assert top["file"] == fn.__code__.co_filename
    assert top["line"] == line_of(fn, marker)
    assert marker in top["source"]
    assert top["share"] > 0.5
    assert abs(df["share"].sum() - 1.0) < 1e-9
    assert (df["samples"] > 0).all()
    assert df["samples"].is_monotonic_decreasing
    ident = codemap.code_identifier(fn.__code__)
    entry = run.sources[ident]
    assert entry["file"] == fn.__code__.co_filename
    assert entry["start"] == fn.__code__.co_firstlineno
    assert entry["text"][0].startswith("def ")
    assert any(marker in text for text in entry["text"])


def check_no_dynamic_code(run: Run, tmp_path: Path) -> None:
    """Trees, folded, speedscope and Chrome trace carry the mapped names only."""
    names = {
        n["description"]["filename"] for tree in run.stacks.values() for n in stacktree._walk(tree)
    }
    assert not [n for n in names if n.startswith("<dynamic")], names
    for export in (run.to_folded, run.to_speedscope, run.to_chrome_trace):
        text = Path(export(tmp_path / f"out-{export.__name__}")).read_text()
        assert "<dynamic-code>" not in text, export.__name__
    for _, _, trees in run.stack_history:
        assert "<dynamic-code>" not in json.dumps(trees)


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_the_same_functions_hot_lines_on_the_local_schedulers(
    scheduler: str, dynamic: Callable[..., Any], tmp_path: Path
) -> None:
    run = profile_both(dynamic, scheduler)
    check_hot_line(run, spin, "MODULE-HOT")
    check_hot_line(run, dynamic, "DYN-HOT")
    helper = dynamic.__globals__["helper"]  # called by the task: pickled along with it
    assert run.hot_lines(helper).iloc[0]["line"] == line_of(helper, "DYN-HELPER")
    check_no_dynamic_code(run, tmp_path)


@pytest.mark.slow
@pytest.mark.usefixtures("distributed_threads")
@pytest.mark.parametrize("explicit", [False, True], ids=["default-client", "explicit-client"])
def test_the_same_functions_hot_lines_on_a_local_cluster_of_processes(
    dynamic: Callable[..., Any], tmp_path: Path, explicit: bool
) -> None:
    """Also with ``profile(client=...)``, which installs no submission listener of its own:
    the graph still teaches the kernel where the pickled copy's code comes from."""
    distributed = pytest.importorskip("distributed")
    codemap._reset_for_tests()  # nothing learnt from an earlier test's graphs
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        tasks = [dask.delayed(spin)(SPIN_SECONDS), dask.delayed(dynamic)(SPIN_SECONDS)]
        options = {"client": client} if explicit else {}
        with daskprofile.profile(interval=0.005, resources=False, **options) as run:
            dask.compute(*tasks)
    check_hot_line(run, spin, "MODULE-HOT")
    check_hot_line(run, dynamic, "DYN-HOT")
    check_no_dynamic_code(run, tmp_path)


SCRIPT = """\
import json, sys, time
import dask
import daskprofile


def work(seconds):
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += sum(range(3000))  # SCRIPT-HOT
    return n


if __name__ == "__main__":
    out = {}
    for scheduler in ("threads", "processes"):
        with daskprofile.profile(interval=0.005, resources=False) as run:
            dask.compute(dask.delayed(work)(0.2), scheduler=scheduler)
        df = run.hot_lines(work)
        out[scheduler] = [df.iloc[0]["file"], int(df.iloc[0]["line"]), df.iloc[0]["source"]]
        out[scheduler + " folded"] = open(run.to_folded(sys.argv[1] + scheduler)).read()
    print(json.dumps(out))
"""


def test_a_script_functions_run_as_pickled_copies_keep_their_file(tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "myscript.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "f")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    hot = 10  # the SCRIPT-HOT line
    for scheduler in ("threads", "processes"):
        file, line, text = out[scheduler]
        assert (file, line) == (str(script), hot), scheduler
        assert "SCRIPT-HOT" in text
        folded = out[scheduler + " folded"]
        assert f"work ({script}:6)" in folded
        assert "<dynamic-code>" not in folded


# ---------------------------------------------------------------- a real notebook


NOTEBOOK = [
    "import time\n"
    "def cell_spin(seconds):\n"
    "    end = time.perf_counter() + seconds\n"
    "    n = 0\n"
    "    while time.perf_counter() < end:\n"
    "        n += sum(range(3000))  # CELL-HOT\n"
    "    return n",
    "import json, dask, daskprofile\n"
    "out = {}\n"
    "for scheduler in ('threads', 'processes'):\n"
    "    with daskprofile.profile(interval=0.005, resources=False) as run:\n"
    "        dask.compute(dask.delayed(cell_spin)(0.2), scheduler=scheduler)\n"
    "    df = run.hot_lines(cell_spin)\n"
    "    source = run.sources.get('cell_spin;Cell In[1];2')\n"
    "    out[scheduler] = [df.iloc[0]['file'], int(df.iloc[0]['line']), df.iloc[0]['source'],\n"
    "                      source, run.print_lines(cell_spin, file=io.StringIO())]\n"
    "print(json.dumps(out))",
]


def test_a_function_of_a_notebook_cell_shows_as_its_cell(tmp_path: Path) -> None:
    nb = execute([NOTEBOOK[0], "import io\n" + NOTEBOOK[1]], tmp_path)
    text = stream(nb, 1)
    assert text, nb.cells[1].outputs
    out = json.loads(text.strip().splitlines()[-1])
    for scheduler in ("threads", "processes"):
        file, line, source_line, source, printed = out[scheduler]
        assert (file, line) == ("Cell In[1]", 6), scheduler
        assert "CELL-HOT" in source_line
        assert source["file"] == "Cell In[1]"
        assert source["start"] == 2
        assert source["text"][0] == "def cell_spin(seconds):"
        assert "CELL-HOT" in source["text"][4]
        assert "Function: cell_spin at Cell In[1]:2" in printed
        assert "CELL-HOT" in printed


# ---------------------------------------------------------------- the run's sources


@pytest.fixture(scope="module")
def threads_run(dynamic: Callable[..., Any]) -> Run:
    return profile_both(dynamic, "threads")


def test_sources_are_saved_and_loaded_with_the_run(threads_run: Run, tmp_path: Path) -> None:
    run = threads_run
    assert run.sources
    loaded = daskprofile.load(run.save(tmp_path / "r.npz"))
    assert loaded.sources == run.sources
    assert loaded.hot_lines(spin).equals(run.hot_lines(spin))
    again = Run.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again.sources == run.sources
    for entry in run.sources.values():
        assert set(entry) == {"file", "name", "start", "text"}
        assert len(entry["text"]) <= codemap.MAX_SOURCE_LINES


def test_a_run_file_without_sources_loads_with_none(tmp_path: Path) -> None:
    data = Run({"id": "old", "finished": True}).to_dict()
    del data["sources"]
    assert Run.from_dict(data).sources == {}
    with pytest.raises(ValueError, match="sources"):
        Run.from_dict({**data, "sources": {"f;x.py;1": {"file": "x.py"}}})


def test_seconds_are_the_groups_task_time_shared_by_samples(threads_run: Run) -> None:
    tasks = threads_run.tasks
    for group in ("spin", "dyn_spin"):
        mine = tasks[tasks["group"] == group]
        recorded = float((mine["stop"] - mine["start"]).sum())
        lines = threads_run.hot_lines(group, group=group)
        # the task function holds every sample of its group: its lines share the group's time
        assert lines["samples"].sum() == threads_run.stacks[group]["count"]
        assert abs(lines["seconds"].sum() - recorded) < 1e-9 * max(recorded, 1.0)


def test_without_task_rows_seconds_are_samples_times_the_interval() -> None:
    with daskprofile.profile(interval=0.005, resources=False, tasks=False) as run:
        dask.compute(dask.delayed(spin)(SPIN_SECONDS), scheduler="threads")
    df = run.hot_lines(spin)
    assert len(df)
    assert (abs(df["seconds"] - df["samples"] * 0.005) < 1e-12).all()


def test_group_restricts_to_one_task_group(threads_run: Run) -> None:
    assert run_lines(threads_run, "spin", group="dyn_spin").empty
    assert not run_lines(threads_run, "spin", group="spin").empty
    by_name = threads_run.hot_lines("dyn_spin")
    assert by_name.equals(threads_run.hot_lines("dyn_spin", group="dyn_spin"))


def run_lines(run: Run, name: str, group: str) -> Any:
    return run.hot_lines(name, group=group)


def test_bad_arguments_raise_naming_them(threads_run: Run) -> None:
    with pytest.raises(TypeError, match="func_or_name"):
        threads_run.hot_lines(42)
    with pytest.raises(TypeError, match="func_or_name"):
        threads_run.print_lines(None, file=io.StringIO())
    with pytest.raises(ValueError, match="group"):
        threads_run.hot_lines(spin, group="no-such-group")
    with pytest.raises(TypeError, match="group"):
        threads_run.hot_lines(spin, group=3)  # type: ignore[arg-type]


def test_print_lines_lists_every_line_of_the_function(threads_run: Run) -> None:
    out = io.StringIO()
    text = threads_run.print_lines(spin, file=out)
    assert out.getvalue() == text
    assert f"Function: spin at {__file__}:{spin.__code__.co_firstlineno}" in text
    hot = line_of(spin, "MODULE-HOT")
    row = next(line for line in text.splitlines() if "MODULE-HOT" in line)
    assert row.split()[0] == str(hot)
    assert "def spin(seconds: float) -> int:" in text
    assert "return total" in text  # a line without samples is listed too
    missing = threads_run.print_lines("no_such_function", file=io.StringIO())
    assert "No samples of no_such_function" in missing


def test_code_objects_and_methods_match_like_their_function(threads_run: Run) -> None:
    by_code = threads_run.hot_lines(spin.__code__)
    assert by_code.equals(threads_run.hot_lines(spin))
    assert threads_run.hot_lines("tests.test_hot_lines.spin").equals(by_code)


def test_the_stack_profiler_and_collector_keep_their_tuples() -> None:
    from daskprofile.diagnostics import StackProfiler

    with StackProfiler(interval=0.005) as prof:
        dask.compute(dask.delayed(spin)(SPIN_SECONDS), scheduler="threads")
    rows = prof.hot_lines(spin)
    assert rows[0][:2] == (__file__, line_of(spin, "MODULE-HOT"))
    assert all(isinstance(n, int) for _, _, n in rows)


# ---------------------------------------------------------------- the code map


def test_a_pickled_copy_is_mapped_back_by_its_fingerprint(dynamic: Any) -> None:
    copy = pickle.loads(cloudpickle.dumps(dynamic))
    assert copy.__code__.co_filename == codemap.DYNAMIC  # what cloudpickle does
    seen = codemap.frame_filename(copy.__code__)
    assert seen.startswith(codemap.DYNAMIC + "#")
    assert codemap.frame_filename(spin.__code__) == spin.__code__.co_filename
    codemap.learn(dask.delayed(dynamic)(1).dask)
    code = copy.__code__
    info = stacktree.FrameInfo(seen, code.co_name, code.co_firstlineno, 5)
    assert stacktree.relabel(info).filename == dynamic.__code__.co_filename
    assert codemap.code_identifier(copy.__code__) == codemap.code_identifier(dynamic.__code__)


def test_unknown_dynamic_code_stays_dynamic_without_its_fingerprint() -> None:
    namespace: dict[str, Any] = {}
    exec(compile("def nowhere():\n    return 1\n", codemap.DYNAMIC, "exec"), namespace)
    code = namespace["nowhere"].__code__
    info = stacktree.FrameInfo(codemap.frame_filename(code), "nowhere", 1, 2)
    assert stacktree.relabel(info).filename == codemap.DYNAMIC


def test_sources_of_a_def_a_lambda_and_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(400))
    path = tmp_path / "long.py"
    path.write_text(f"f = lambda x: x + 1  # L\n\n@staticmethod\ndef g():\n{body}\n")
    lam = codemap.source(f"<lambda>;{path};1")
    assert lam is not None
    assert lam["text"] == ["f = lambda x: x + 1  # L"]
    long = codemap.source(f"g;{path};3")
    assert long is not None
    assert long["text"][:2] == ["@staticmethod", "def g():"]
    assert len(long["text"]) == codemap.MAX_SOURCE_LINES
    assert codemap.source(f"g;{tmp_path / 'missing.py'};3") is None


# ---------------------------------------------------------------- protocol 1.3


def _tree(*idents: str) -> dict[str, Any]:
    root = stacktree.create()
    for ident in idents:
        name, file, first = ident.split(";")
        info = stacktree.FrameInfo(file, name, int(first), int(first) + 1)
        root["children"][ident] = {
            "identifier": ident,
            "description": {"filename": file, "name": name, "line_number": 2, "line": ""},
            "count": 1,
            "children": {},
            "lines": {info.lineno: 1},
        }
    return root


def _source(ident: str) -> dict[str, Any]:
    name, file, first = ident.split(";")
    return {"file": file, "name": name, "start": int(first), "text": [f"def {name}():"]}


def test_sources_go_once_per_function_and_run_before_their_first_stacks() -> None:
    asked: list[set[str]] = []

    def lookup(run: str, idents: set[str]) -> dict[str, dict[str, Any]]:
        asked.append(set(idents))
        return {i: _source(i) for i in idents if not i.startswith("nosrc")}

    conn = Connection(comm=None, max_queue=100, rate=20, protocol="1.3", lookup=lookup)
    start = encode.run_start("r", 0.0, 0.0, {}, None)
    first = encode.stacks("r", 0, 1, {"g": _tree("f;a.py;1", "nosrc;b.py;1")})
    second = encode.stacks("r", 1, 2, {"g": _tree("f;a.py;1", "h;a.py;5")})
    conn.push([start, first, second], "r")
    kinds = [(d["type"], sorted(d.get("sources", {}))) for d, _ in conn.outbox]
    assert kinds == [
        ("run_start", []),
        ("sources", ["f;a.py;1"]),
        ("stacks", []),
        ("sources", ["h;a.py;5"]),
        ("stacks", []),
    ]
    assert asked == [{"f;a.py;1", "nosrc;b.py;1"}, {"h;a.py;5"}]
    for data, buffers in conn.outbox:
        encode.decode(data, buffers)  # as the panel reads them
    conn.outbox.clear()
    conn.push([start, second], "r")  # the run starts afresh (a replay): sent again
    assert [d["type"] for d, _ in conn.outbox] == ["run_start", "sources", "stacks"]
    old = Connection(comm=None, max_queue=100, rate=20, protocol="1.2", lookup=lookup)
    old.push([start, first], "r")
    assert [d["type"] for d, _ in old.outbox] == ["run_start", "stacks"]


def test_a_replayed_run_sends_its_kept_sources(dynamic: Callable[..., Any]) -> None:
    run = profile_both(dynamic, "sync")
    publisher = Publisher()
    conn = Connection(comm=None, max_queue=100, rate=20, protocol="1.3")
    conn.lookup = publisher._sources
    messages = list(publisher._replay(conn, run))
    kinds = [d["type"] for d, _ in messages]
    assert "sources" in kinds
    assert kinds.index("sources") < kinds.index("stacks")
    sent = {i: e for d, _ in messages if d["type"] == "sources" for i, e in d["sources"].items()}
    assert sent == {i: run.sources[i] for i in sent}
    assert codemap.code_identifier(spin.__code__) in sent
