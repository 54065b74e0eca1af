"""A cluster run's snapshot: actions on the task stream, Memory and Bandwidth tabs, where it
ran and its workers; from a real LocalCluster of worker processes that transfers and spills,
recorded by ``performance_report`` and opened in Chromium with the network refused."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import pytest
from dask.base import named_schedulers

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import daskprofile  # noqa: E402
from daskprofile.cluster_tables import ACTIONS  # noqa: E402
from daskprofile.export import render_html  # noqa: E402
from daskprofile.export._bandwidth import time_step  # noqa: E402
from daskprofile.export._cluster_memory import WORKER_FIGURES, summed_memory  # noqa: E402
from daskprofile.export._plots import run_tabs  # noqa: E402
from daskprofile.export._summary import summary_html  # noqa: E402
from daskprofile.jupyter.inline import inline_html  # noqa: E402
from test_export_html import IDLE, IMG, JS_COUNT, JS_TOOLTIPS, SCRIPT  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: words only a cluster run's snapshot has
CLUSTER_WORDS = (
    "Where it ran",
    "worker threads",
    "Cluster memory",
    "Bandwidth by",
    "daskprofile-actions",
)
# titles of every plot drawn
JS_TITLES = "() => [...Bokeh.index.all_views()].map(v => v.model.title?.text ?? '').join('\\n')"
# the longest transfer (action kind 0) drawn one by one: its key and where it is on screen
JS_LONGEST_TRANSFER = """() => {
  const src = [...Bokeh.documents[0].all_models].find(
    m => m.type === 'ColumnDataSource' && m.data.peer !== undefined);
  const dur = [...src.data.dur].map((d, i) => src.data.a[i] === 0 ? d : -1);
  const i = dur.indexOf(Math.max(...dur));
  const v = [...Bokeh.index.all_views()].find(
    v => v.frame && v.model.title && v.model.title.text.startsWith('Task stream'));
  v.el.scrollIntoView(); const r = v.el.getBoundingClientRect();
  const x = src.data.left[i] + dur[i] / 2, y = src.data.y[i];
  return [src.data.key[i], r.left + v.frame.x_scale.compute(x),
          r.top + v.frame.y_scale.compute(y)]; }"""
# text of every element, through shadow roots (Divs of bokeh tabs live there)
JS_TEXT = """() => { const out = []; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.shadowRoot) { out.push(el.shadowRoot.textContent); walk(el.shadowRoot); } } };
  walk(document); return document.body.innerText + '\\n' + out.join('\\n'); }"""


def _length(x: Any) -> int:
    return len(x)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """``performance_report`` of a compute on two worker processes of 600 MB that spill
    from 120 MB of managed memory and fetch each other's blocks; one task's key is
    ``SCRIPT``, run on the worker that lacks its input (a transfer for that key)."""
    path = tmp_path_factory.mktemp("report") / "dask-report.html"
    config = {"distributed.worker.memory.target": 0.2, "distributed.worker.memory.spill": 0.3}
    with (
        dask.config.set(config),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            memory_limit="600MB",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        first, second = sorted(client.scheduler_info()["workers"])
        client.run(_length, "")
        with daskprofile.performance_report(filename=path) as rep:
            x = da.random.random((6000, 6000), chunks=(500, 500)).persist()  # 288 MB
            distributed.wait(x)
            assert (x + x.T).sum().compute() > 0
            ones = client.submit(np.ones, 1_000_000, workers=[first], key="ones-1")
            hostile = client.submit(_length, ones, workers=[second], key=SCRIPT)
            assert hostile.result() == 1_000_000
    return rep.run, path


def _opened(open_offline: Any, path: Path) -> Any:
    opened = open_offline(path)
    assert opened.refused == []
    return opened


def _show(page: Any, tab: str) -> None:
    page.get_by_text(tab, exact=True).first.click()
    page.wait_for_function(IDLE)


def _sources(root: Any) -> list[str]:
    """The data of every ColumnDataSource under ``root``, as sorted JSON texts."""
    from bokeh.models import ColumnDataSource

    def plain(value: Any) -> Any:
        return np.asarray(value).tolist() if isinstance(value, np.ndarray) else list(value)

    return sorted(
        json.dumps({k: plain(v) for k, v in sorted(s.data.items())}, default=str)
        for s in root.select({"type": ColumnDataSource})
    )


def _titles(root: Any) -> list[str]:
    return [t.title for t in root.tabs]


# ---------------------------------------------------------------- the recorded run
def test_the_run_has_transfers_spills_and_the_hostile_key(report: tuple[Any, Path]) -> None:
    run, _ = report
    actions = run.actions
    assert "transfer" in set(actions["action"])  # (a disk read shows only beyond 5 ms)
    assert SCRIPT in set(actions[actions["action"] == "transfer"]["key"])
    assert run.memory["spilled"].max() > 0
    assert run.memory["spill_count"].max() > 0
    assert len(run.bandwidth()) == 2


def test_snapshot_has_cluster_tabs_actions_legend_and_where_it_ran(
    report: tuple[Any, Path],
) -> None:
    from bokeh.models import Legend

    run, path = report
    root = run_tabs(run)
    assert _titles(root) == ["Timeline", "Memory", "Bandwidth", "Cache", "Flame graph"]
    (legend,) = root.select({"type": Legend, "name": "daskprofile-actions"})
    labels = [item.label["value"] for item in legend.items]
    assert labels[0] == "transfer"
    assert labels == [k for k in ACTIONS if k in set(run.actions["action"])]
    text = path.read_text()
    assert "<title>Dask Performance Report</title>" in text
    for words in ("Where it ran", "Workers", "worker threads", "memory limit"):
        assert words in text
    versions = run.meta.versions
    assert f"dask {versions['dask']}" in text
    assert f"distributed {versions['distributed']}" in text
    assert f"python {versions['python']}" in text
    assert "The workers run the same versions as the kernel." in text
    for address in run.workers["address"]:
        assert f"<code>{address}</code>" in text
    assert str(run.meta.distributed["scheduler"]) in text
    assert "Clock offsets" not in text  # one host: one clock
    assert SCRIPT not in text  # the key is inside a JSON script: escaped there too


def test_report_renders_every_tab_in_chromium_without_errors(
    report: tuple[Any, Path], open_offline: Any
) -> None:
    run, path = report
    opened = _opened(open_offline, path)
    page = opened.page
    shots = ROOT / "test-output"
    shots.mkdir(exist_ok=True)
    for tab in ("Memory", "Bandwidth", "Timeline"):
        _show(page, tab)
        if tab != "Timeline":
            page.get_by_text(tab, exact=True).first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"export-cluster-{tab.lower()}.png"), full_page=True)
    titles = page.evaluate(JS_TITLES)
    assert "Cluster memory (sum over workers)" in titles
    for address in run.workers["address"]:
        assert f"Worker {address}" in titles
    assert "Bandwidth by worker" in titles
    assert "Bandwidth by type" in titles
    assert page.evaluate(JS_COUNT, "CANVAS") > 6
    text = page.evaluate(JS_TEXT)
    assert "numpy.ndarray" in text  # the bandwidth-by-type table
    # hover the longest transfer on the task stream: what, which key, how many bytes
    key, x, y = page.evaluate(JS_LONGEST_TRANSFER)
    page.mouse.move(x, y)
    page.wait_for_function(f"() => ({JS_TOOLTIPS})().includes('action')", timeout=5_000)
    tooltip = page.evaluate(JS_TOOLTIPS)
    assert "transfer" in tooltip
    assert key in tooltip
    assert " MB" in tooltip  # the bytes moved (blocks of 2 MB)
    assert opened.errors == []
    assert opened.dialogs == []


def test_inline_view_carries_the_cluster_tabs(report: tuple[Any, Path]) -> None:
    run, _ = report
    view = inline_html(run, kind="bokeh")  # the light view: tests/test_inline_light.py
    assert "Where it ran" in view
    assert "Cluster memory (sum over workers)" in view
    assert "Bandwidth by worker" in view


# ---------------------------------------------------------------- hostile strings
def _hostile(run: Any, workers: int = WORKER_FIGURES + 2) -> Any:
    """``run`` with hostile worker names, hosts, a cause, a type, a scheduler address, a
    worker's versions; a worker lost 1 s in; memory spread over ``workers`` workers (a
    selector); a worker's clock 3 s ahead."""
    d = json.loads(json.dumps(run.to_dict()))
    t0 = d["meta"]["t0"]
    members = d["cluster"]["workers"]
    first = members["address"][0]
    members["name"][0] = members["host"][0] = IMG
    members["left"][0], members["reason"][0], members["cause"][0] = t0 + 1.0, "lost", IMG
    d["cluster"]["transfers"]["types"] = [IMG if t == "numpy.ndarray" else t
                                          for t in d["cluster"]["transfers"]["types"]]  # fmt: skip
    memory = d["cluster"]["memory"]
    memory["workers"] = [f"tcp://{IMG}:{i}" for i in range(workers)]
    memory["limits"] = [600_000_000] * workers
    memory["worker"] = [i % workers for i in range(len(memory["worker"]))]
    described = d["meta"]["distributed"]
    described["scheduler"] = IMG
    described["workers"][first]["versions"]["dask"] = IMG
    described["clocks"][first] = 3.0
    return daskprofile.Run.from_dict(d)


def test_hostile_strings_show_as_text_and_never_run(
    report: tuple[Any, Path], tmp_path: Path, open_offline: Any
) -> None:
    run = _hostile(report[0])
    path = tmp_path / "hostile.html"
    run.to_html(path, title=SCRIPT)
    html = path.read_text()
    assert IMG not in html
    assert SCRIPT not in html
    assert "Workers run other versions than the kernel" in html
    assert "+3.000 s" in html  # the clock offset
    opened = _opened(open_offline, path)
    page = opened.page
    body = page.inner_text("body")
    assert f"scheduler: {IMG}" in body
    assert f"dask {IMG} (kernel: {run.meta.versions['dask']})" in body
    assert f"lost ({IMG})" in body  # why the worker left, in the workers table
    for tab in ("Memory", "Bandwidth", "Timeline"):
        _show(page, tab)
    assert IMG in page.evaluate(JS_TEXT)  # the type, in the bandwidth table
    # more workers than figures: one figure and a selector whose options are text
    _show(page, "Memory")
    select = page.locator("select").first
    options = select.evaluate("s => [...s.options].map(o => o.text)")
    assert options == [f"tcp://{IMG}:{i}" for i in range(WORKER_FIGURES + 2)]
    select.select_option(index=3)
    page.wait_for_function(IDLE)
    assert f"Worker tcp://{IMG}:3" in page.evaluate(JS_TITLES)
    assert page.evaluate(JS_COUNT, "IMG") == 0
    assert opened.dialogs == []
    assert opened.errors == []


def test_a_worker_that_left_ends_its_lanes_with_a_label(report: tuple[Any, Path]) -> None:
    from bokeh.models import ColumnDataSource

    run = _hostile(report[0])
    gone = run.workers.iloc[0]
    lanes = [w for w in set(run.tasks["worker"]) if w.startswith(f"{gone['address']} thread")]
    texts = [
        s.data["text"]
        for s in run_tabs(run).select({"type": ColumnDataSource})
        if "text" in s.data and "align" in s.data
    ]
    assert texts
    assert sum(t == "lost at 1 s" for t in texts[0]) == len(lanes) > 0


# ---------------------------------------------------------------- runs without the tables
def test_a_local_run_has_no_cluster_section_or_tab() -> None:
    graph = {"inc-1": (operator.add, 1, 1), "inc-2": (operator.add, 2, 1)}
    with daskprofile.profile() as run:
        named_schedulers["threads"](graph, list(graph), num_workers=2)
    assert _titles(run_tabs(run)) == ["Timeline", "Cache", "Flame graph"]
    page = render_html(run)
    for words in CLUSTER_WORDS:
        assert words not in page


def test_a_file_without_the_cluster_tables_has_no_cluster_tab(report: tuple[Any, Path]) -> None:
    d = report[0].to_dict()
    del d["cluster"]  # as written before the cluster tables
    old = daskprofile.Run.from_dict(d)
    assert _titles(run_tabs(old)) == ["Timeline", "Cache", "Flame graph"]
    page = render_html(old)
    assert "daskprofile-actions" not in page
    assert "Cluster memory" not in page
    assert "Where it ran" in page  # what meta["distributed"] tells: scheduler, workers


def test_a_saved_and_loaded_cluster_run_renders_the_same(
    report: tuple[Any, Path], tmp_path: Path
) -> None:
    run, _ = report
    loaded = daskprofile.load(run.save(tmp_path / "run.npz"))
    again = daskprofile.Run.from_dict(json.loads(json.dumps(run.to_dict())))
    want_summary, want_sources = summary_html(run), _sources(run_tabs(run))
    for other in (loaded, again):
        assert summary_html(other) == want_summary
        root = run_tabs(other)
        assert _titles(root) == ["Timeline", "Memory", "Bandwidth", "Cache", "Flame graph"]
        assert _sources(root) == want_sources


# ---------------------------------------------------------------- pieces
def test_summed_memory_counts_each_worker_until_it_stops_reporting() -> None:
    memory = pd.DataFrame(
        {
            "time": [0.0, 1.0, 2.0, 0.5, 1.5, 9.0],
            "worker": ["a", "a", "a", "b", "b", "b"],
            "process": [10, 20, 30, 100, 200, 300],
            "managed": [1, 2, 3, 10, 20, 30],
            "unmanaged": [9, 18, 27, 90, 180, 270],
            "unmanaged_old": [9, 18, 27, 90, 180, 270],
            "unmanaged_recent": [0] * 6,
            "spilled": [0, 5, 0, 0, 0, 7],
            "limit": [1000] * 6,
        }
    )
    total = summed_memory(memory, bins=19).set_index("time")  # every 0.5 s
    assert total.loc[1.0, "process"] == 20 + 100
    assert total.loc[1.5, "spilled"] == 5
    assert total.loc[1.5, "limit"] == 2000
    assert total.loc[0.0, "process"] == 10  # b not yet
    assert total.loc[5.5, "process"] == 200  # a stopped at 2 s (+ 3 intervals): b only
    assert total.loc[5.5, "workers"] == 1
    assert total.loc[9.0, "process"] == 300


def test_bandwidth_bins_are_round_and_few() -> None:
    assert time_step(3.5) == 0.02
    assert time_step(3600) == 20.0
    assert time_step(0.01) == 0.001


def test_tasks_a_worker_took_with_it_are_marked_in_the_task_stream(
    report: tuple[Any, Path],
) -> None:
    from bokeh.models import ColumnDataSource

    d = json.loads(json.dumps(report[0].to_dict()))
    members = d["cluster"]["workers"]
    gone = members["address"][0]
    tasks = report[0].tasks
    on_it = tasks["worker"].str.startswith(f"{gone} thread")
    there = list(dict.fromkeys(tasks[on_it]["key"]))
    lost, killed = there[:3], there[3:4]
    members["left"][0], members["reason"][0] = d["meta"]["t0"] + 1.0, "lost"
    members["lost"][0], members["killed"][0] = [*lost, IMG], killed
    run = daskprofile.Run.from_dict(d)
    (marks,) = [
        s.data for s in run_tabs(run).select({"type": ColumnDataSource}) if "rerun" in s.data
    ]
    want = {(k, f"lost on {gone}") for k in lost} | {(k, f"killed on {gone}") for k in killed}
    assert set(zip(marks["key"], marks["rerun"], strict=True)) == want
    assert "daskprofile-reruns" not in render_html(report[0])  # no worker left: no marks
