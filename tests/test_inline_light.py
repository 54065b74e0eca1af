"""The light inline view stays light: a profiled cell's output <= 300 KB, three profiled
cells < 1 MB of notebook (real kernel: threads and a LocalCluster), and its data is the
panel's protocol, reduced, escaped, and readable as the panel reads it."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path
from typing import Any

import dask.threaded
import nbformat
import numpy as np
import pytest

from daskprofile import profile
from daskprofile.jupyter import encode, inline
from daskprofile.jupyter.inline import inline_html, light_payload
from daskprofile.jupyter.light import Budget, light_messages, payload_bytes, source_bytes
from nbkernel import (
    HOSTILE,
    IMG,
    execute,
    html_outputs,
    offline_page_fixture,  # noqa: F401 - the offline_page fixture
    outputs,
)

CELL_LIMIT = 300_000
NOTEBOOK_LIMIT = 1_000_000


def _noop(x: int) -> int:
    return x


def _threads_run(n: int, name: str = "noop-5f3e0c0d") -> Any:
    graph = {(name, i): (_noop, i) for i in range(n)}
    with profile() as run:
        dask.threaded.get(graph, list(graph))
    return run


@pytest.fixture(scope="module")
def big_run() -> Any:
    """10,000 trivial tasks on the threaded scheduler."""
    return _threads_run(10_000)


def _payload(view: str) -> dict[str, Any]:
    found = re.search(
        r'<script type="application/json" class="daskprofile-inline-data">(.*?)</script>', view
    )
    assert found is not None
    return dict(json.loads(found.group(1)))


def _messages(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The payload's messages decoded as the panel decodes them."""
    return [
        encode.decode(data, [base64.b64decode(b) for b in buffers])
        for data, buffers in payload["messages"]
    ]


# -------------------------------------------------------------- in process


def test_a_10k_task_view_is_under_300_kb_and_says_what_it_merged(big_run: Any) -> None:
    view = inline_html(big_run)
    assert len(view.encode()) <= CELL_LIMIT
    payload = _payload(view)
    (tasks,) = [m for m in _messages(payload) if m["type"] == "tasks"]
    merged = np.frombuffer(base64.b64decode(payload["merged"]), "<u4")
    assert len(merged) == tasks["n"] < 10_000
    assert int(merged.sum()) == 10_000  # every task is in exactly one bar
    assert any("10,000 tasks drawn as" in note for note in payload["notes"])
    end = next(m for m in _messages(payload) if m["type"] == "run_end")
    assert end["summary"]["tasks"] == 10_000  # the header counts tasks, not bars


def test_merged_bars_cover_the_tasks_they_hold(big_run: Any) -> None:
    light = light_messages(big_run, budget=Budget(tasks=500))
    (tasks,) = [encode.decode(d, b) for d, b in light.messages if d["type"] == "tasks"]
    assert tasks["n"] <= 500
    start, stop = tasks["times"]["start"], tasks["times"]["stop"]
    real = big_run.tasks  # seconds since the run's start, as the messages
    assert start.min() <= real["start"].min() + 1e-6
    assert stop.max() >= real["stop"].max() - 1e-6
    busy = float((real["stop"] - real["start"]).sum())
    assert float((stop - start).sum()) >= busy * 0.99  # bars cover the tasks' time


def test_reruns_point_at_the_bars_holding_their_tasks() -> None:
    from daskprofile.jupyter import light

    n = 100  # back to back on one lane: they merge into few bars
    cols = {
        "group": np.zeros(n),
        "worker": np.zeros(n),
        "status": np.zeros(n),
        "submit": np.arange(n) * 0.01,
        "start": np.arange(n) * 0.01,
        "stop": np.arange(n) * 0.01 + 0.0099,
    }
    replay = [
        encode.run_start("r", 0.0, 0.0, {}, None),
        encode.table("tasks", "r", cols, 0),
        encode.reruns("r", [5, 6, 99], ["lost", "lost", "killed"], ["tcp://a"] * 3),
    ]
    reduced = light._reduce(replay, Budget(tasks=10), None)
    (tasks,) = [encode.decode(d, b) for d, b in reduced.messages if d["type"] == "tasks"]
    (reruns,) = [d for d, _ in reduced.messages if d["type"] == "reruns"]
    assert tasks["n"] <= 10
    assert reduced.merged is not None
    assert int(reduced.merged.sum()) == n
    starts, stops = tasks["times"]["start"], tasks["times"]["stop"]
    holding = {  # the bar that holds each re-run row (bars of one lane never overlap)
        int(np.flatnonzero((starts - 1e-6 <= cols["start"][r]) & (cols["start"][r] <= stops))[0])
        for r in (5, 6, 99)
    }
    assert set(reruns["rows"]) == holding
    assert len(reruns["rows"]) == len(set(reruns["rows"]))  # one entry per bar


def test_small_runs_are_sent_whole_with_their_keys() -> None:
    run = _threads_run(40, name=HOSTILE)
    payload = _payload(inline_html(run))
    assert payload["notes"] == []
    assert "merged" not in payload
    messages = _messages(payload)
    (tasks,) = [m for m in messages if m["type"] == "tasks"]
    assert tasks["n"] == 40
    (keys,) = [m for m in messages if m["type"] == "keys"]
    assert len(keys["keys"]) == 40
    assert all(HOSTILE in k for k in keys["keys"])


def test_no_text_of_the_run_can_end_the_data_script() -> None:
    run = _threads_run(40, name=HOSTILE)
    view = inline_html(run, title=f"title {IMG}", code=f"x = '{HOSTILE}'")
    assert IMG not in view
    assert view.count("</script>") == 2  # the data's and the bundle's own ends
    data = light_payload(run, title=HOSTILE, code=HOSTILE)
    assert "<" not in data
    assert json.loads(data)["code"] == HOSTILE


def test_a_100k_task_run_and_its_stacks_stay_under_the_limit() -> None:
    graph = {("noop-1", i): (_noop, i) for i in range(100_000)}
    with profile(interval=0.001) as run:
        dask.threaded.get(graph, list(graph))
    view = inline_html(run)
    assert len(view.encode()) <= CELL_LIMIT
    light = light_messages(run, limit=inline.DATA_LIMIT)
    assert payload_bytes(light.messages, light.merged) <= inline.DATA_LIMIT


def _spin(seconds: float) -> int:
    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        n += 1
    return n


def _rare() -> int:  # ~1.5 % of the samples
    return _spin(0.003)


def _task(i: int) -> int:
    return _spin(0.2) + _rare()


def _samples(messages: list[dict[str, Any]]) -> int:
    return sum(t["count"] for d in messages for t in d["trees"].values())


def _stacks(light: Any) -> list[dict[str, Any]]:
    return [d for d, _ in light.messages if d["type"] == "stacks"]


def _names(messages: list[dict[str, Any]]) -> set[str]:
    out, todo = set(), [t for d in messages for t in d["trees"].values()]
    while todo:
        node = todo.pop()
        out.add(node["identifier"].split(";")[0])
        todo += list(node["children"].values())
    return out


def test_stacks_and_sources_are_binned_and_pruned_to_their_budget() -> None:
    graph = {("spin", i): (_task, i) for i in range(20)}
    with profile(interval=0.005) as run:  # ~4 s: several 1 s sampler cycles
        dask.threaded.get(graph, list(graph), num_workers=2)
    cycles = _stacks(light_messages(run, budget=Budget(stack_bytes=10**9, stack_bins=10**6)))
    assert "_rare" in _names(cycles)
    binned = light_messages(run, budget=Budget(stack_bins=2))
    assert len(cycles) > len(_stacks(binned)) == 2
    assert any("grouped into 2 time bins" in n for n in binned.notes)
    tiny = light_messages(run, budget=Budget(stack_bytes=1))
    assert len(_stacks(tiny)) == 1
    assert "_rare" not in _names(_stacks(tiny))  # folded into its caller
    assert any("folded into their caller" in n for n in tiny.notes)
    for light in (binned, tiny):  # no sample lost, only detail
        assert _samples(_stacks(light)) == _samples(cycles)
    # the text of the sampled functions comes along (protocol 1.3), before the stacks,
    # for the functions still shown, the most sampled first within its budget
    types = [d["type"] for d, _ in binned.messages]
    assert types.index("sources") < types.index("stacks")
    assert {"_spin", "_task", "_rare"} <= _source_names(binned)
    assert "_rare" not in _source_names(tiny)
    # a budget that fits the most sampled function's text and no other (its size depends
    # on where the checkout lives: the identifier holds the file's path)
    entries = _source_entries(binned)
    widest = max(entries, key=lambda ident: _weight(_stacks(binned), ident))
    fits = source_bytes(widest, entries[widest])
    tight = light_messages(run, budget=Budget(sources_bytes=fits))
    assert len(_source_names(tight)) == 1
    assert _source_names(tight) <= {"_spin", "_task"}  # the widest frames
    assert "Source text kept for the 1 most sampled function." in tight.notes


def _source_entries(light: Any) -> dict[str, Any]:
    return {
        ident: source
        for d, _ in light.messages
        if d["type"] == "sources"
        for ident, source in d["sources"].items()
    }


def _weight(messages: list[dict[str, Any]], ident: str) -> int:
    total, todo = 0, [t for d in messages for t in d["trees"].values()]
    while todo:
        node = todo.pop()
        total += int(node["count"]) if node["identifier"] == ident else 0
        todo += list(node["children"].values())
    return total


def _source_names(light: Any) -> set[str]:
    return {
        ident.split(";")[0]
        for d, _ in light.messages
        if d["type"] == "sources"
        for ident in d["sources"]
    }


def test_the_bokeh_view_is_still_there_and_kinds_are_checked(big_run: Any) -> None:
    run = _threads_run(40)
    view = inline_html(run, kind="bokeh")
    assert view.startswith('<iframe id="daskprofile-view-')
    with pytest.raises(ValueError, match="kind='svg'"):
        inline_html(run, kind="svg")


def test_a_missing_bundle_names_the_file_and_the_build_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "static" / "inline.js"
    monkeypatch.setattr(inline, "BUNDLE", missing)
    with pytest.raises(FileNotFoundError) as info:
        inline_html(_threads_run(3))
    assert str(missing) in str(info.value)
    assert "jlpm build:inline" in str(info.value)


# -------------------------------------------------------------- a real kernel

SETUP = f"""
import dask, dask.array as da, time
from distributed import Client, LocalCluster
HOSTILE = {HOSTILE!r}
def noop(x):
    return x
def work(i):
    return sum(j * i for j in range(20_000))
"""
CELLS = {
    "load": "%load_ext daskprofile",
    "setup": SETUP,
    "threads": "%%daskprofile\n"
    "graph = {('noop-5f3e0c0d', i): (noop, i) for i in range(10_000)}\n"
    "_ = dask.threaded.get(graph, list(graph))",
    "stacks": "%%daskprofile\n"
    "parts = [dask.delayed(work)(i, dask_key_name=(HOSTILE, i)) for i in range(200)]\n"
    "total = sum(dask.compute(*parts))",
    "cluster_up": "cluster = LocalCluster(n_workers=2, threads_per_worker=1, "
    "dashboard_address=None)\nclient = Client(cluster)",
    "cluster": "%%daskprofile\n"
    "x = da.random.random((2000, 2000), chunks=250)\n"
    "(x @ x.T).sum().compute()",
    "cluster_down": "client.close(); cluster.close()",
}
INDEX = {name: i for i, name in enumerate(CELLS)}


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``CELLS`` executed in a real kernel (threads, then a LocalCluster)."""
    return execute(list(CELLS.values()), tmp_path_factory.mktemp("light"), timeout=300)


def _cell_bytes(notebook: Any, name: str) -> int:
    return len(json.dumps(outputs(notebook, INDEX[name])).encode())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["threads", "stacks", "cluster"])
def test_a_profiled_cell_output_is_at_most_300_kb(nb: Any, name: str) -> None:
    assert [o for o in outputs(nb, INDEX[name]) if o.output_type == "error"] == []
    (view,) = html_outputs(nb, INDEX[name])
    assert view.startswith('<div class="daskprofile-inline">')
    assert _cell_bytes(nb, name) <= CELL_LIMIT


@pytest.mark.slow
def test_a_notebook_with_three_profiled_cells_is_under_1_mb(nb: Any) -> None:
    assert len(nbformat.writes(nb).encode()) < NOTEBOOK_LIMIT


@pytest.mark.slow
def test_the_three_cell_notebook_exported_to_html_draws_offline(
    nb: Any, offline_page: tuple[Any, dict[str, list[str]]], tmp_path: Path
) -> None:
    """The notebook as nbconvert exports it, opened from a file with the network refused:
    its three views draw their task streams (nbconvert's own template may ask CDNs for
    require.js and MathJax; the views ask for nothing)."""
    nbconvert = pytest.importorskip("nbconvert")
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    path = tmp_path / "three.html"
    path.write_text(body)
    page, seen = offline_page
    page.goto(path.as_uri())
    drawn = """() => [...document.querySelectorAll('.jp-DaskProfile-inline')].map(v =>
      +(v.querySelector('.jp-DaskProfile-taskStream canvas').dataset.rects || 0))"""
    page.wait_for_function(
        f"() => {{ const n = ({drawn})(); return n.length === 3 && n.every(x => x > 0); }}"
    )
    tasks = page.evaluate(
        "() => [...document.querySelectorAll('.jp-DaskProfile-inline')].map(v => +v.dataset.tasks)"
    )
    assert 0 < tasks[0] <= 10_000  # merged into fewer bars to fit the output's budget
    assert tasks[1] == 200
    assert tasks[2] > 0
    assert seen["dialogs"] == []
    assert seen["errors"] == []
    assert not [url for url in seen["refused"] if "daskprofile" in url or "bokeh" in url]


@pytest.mark.slow
def test_the_cluster_cell_carries_the_cluster_tables(nb: Any) -> None:
    (view,) = html_outputs(nb, INDEX["cluster"])
    kinds = {m["type"] for m in _messages(_payload(view))}
    assert {"cluster_workers", "memory", "tasks", "resources"} <= kinds
