"""A cluster run's tables in the panel (protocol 1.2), real JupyterLab and real Chromium.

Synthetic: a cluster run fed through the test hook (the decoder the kernel's messages go
through) with actions, memory, transfers, exceptions and a worker lost mid-run: transfer
bars are red along the bottom of their lanes with a legend entry and hover text, the memory
view stacks the workers' memory under their limit with the bandwidth line, the exceptions
are listed as text and fold out their traceback, the lost worker's lanes are hatched with a
tooltip, the tasks it took with it (``reruns``) outlined with a ``re-run`` hover line, the
lanes of the worker that joined are marked empty before it joined (``joined at 1 s``), the
bandwidth per pair of workers and per type of data moved (protocol 1.3, type names as
text) listed under the memory view, the run bar counts the workers.

Live: a LocalCluster of 2 worker processes in a real kernel computes a matmul whose blocks
move between the workers, then a task raises: the panel's run holds transfer actions (red
in the task stream, zoomed onto one), the transfer logs, both workers' memory (drawn), the
exception with its message and traceback, the bandwidth per type (``numpy.ndarray``); a
reload replays the same tables; then the cluster scales to 3 workers during a compute: the
new worker's lanes carry a joined mark.
"""

from __future__ import annotations

from typing import Any

from helpers import (
    PANEL,
    enable_test_hook,
    open_notebook_in_workspace,
    open_panel,
    output_value,
    run_code,
    wait_data,
    wait_status,
    widen_panel,
)
from test_live_cluster import CHILDREN, CLOSE, CLUSTER, SLOW

from conftest import write_notebook

STREAM = ".jp-DaskProfile-taskStream canvas"
MEMORY = ".jp-DaskProfile-memory canvas"
EXCEPTIONS = ".jp-DaskProfile-exceptions"
TOOLTIP = ".jp-DaskProfile-taskStream .jp-DaskProfile-tooltip"
SUMMARY = ".jp-DaskProfile-summary"
GUTTER = 72  # px left of every time axis (views/canvas.ts)
AXIS = 18  # px of the task stream's time axis (views/taskStream.ts)
TRANSFER_RED = (0xD6, 0x27, 0x28)  # distributed's transfer colour
MANAGED_BLUE = (0x1F, 0x77, 0xB4)
SPILLED_GREY = (0xA6, 0xA6, 0xA6)

A = "tcp://127.0.0.1:40123"
B = "tcp://127.0.0.1:40125"
C = "tcp://127.0.0.1:40127"

# 2 workers x 2 threads from 0 to 4 s (B lost at 3 s); before every other task a transfer
# of 1 MB in the gap; a spill (disk-write) on A's first lane; memory of A and B every 0.1 s
# (A spills at 2.5 s); 2 failures with HTML in their texts; C joins at 1 s and computes from
# 1.25 s on (one thread). Transfers to B move numpy arrays, those to A a type named in HTML.
HTML_TYPE = '<img src=x onerror="window.__xss=2">'  # a type name is data: shown as text
SYNTHETIC_CLUSTER_JS = """
async ({run, a, b, c}) => {
  const HTML_TYPE = '<img src=x onerror="window.__xss=2">';
  const hook = window.daskprofileTestHook;
  const send = (data, buffers) => {
    if (!hook.receive(data, buffers || [])) throw new Error('rejected ' + data.type);
  };
  send({type: 'run_start', run, t0: 100.0, wall0: Date.now() / 1000, options: {tasks: true}, title: 'cluster tables'});
  const names = ['slow-input', 'matmul', 'sum-aggregate'];
  send({type: 'groups', run, ids: [0, 1, 2], names, colors: ['#2ca02c', '#9467bd', '#8c564b']});
  const labels = [a + ' thread 0', a + ' thread 1', b + ' thread 0', b + ' thread 1', c + ' thread 0'];
  send({type: 'workers', run, ids: [0, 1, 2, 3, 4], labels, kinds: Array(5).fill('worker')});
  const tasks = {g: [], w: [], s: [], e: []};
  const acts = {w: [], k: [], g: [], s: [], e: [], b: []};
  const xfer = {s: [], e: [], src: [], dst: [], b: [], inc: [], ty: []};
  for (let lane = 0; lane < 5; lane++) {
    const end = lane >= 2 && lane < 4 ? 3.0 : 4.0;
    for (let k = 0; ; k++) {
      const start = 0.05 + k * 0.1;
      if (start + 0.07 > end) break;
      if (lane === 4 && start < 1.25) continue;
      const g = k % 3;
      tasks.g.push(g); tasks.w.push(lane); tasks.s.push(start); tasks.e.push(start + 0.07);
      if (lane < 4 && k % 2 === 0) {
        acts.w.push(lane); acts.k.push(0); acts.g.push(g);
        acts.s.push(start - 0.028); acts.e.push(start - 0.002); acts.b.push(1e6);
        xfer.s.push(start - 0.028); xfer.e.push(start - 0.002);
        xfer.src.push(lane >= 2 ? 0 : 1); xfer.dst.push(lane >= 2 ? 1 : 0); xfer.b.push(1e6); xfer.inc.push(1);
        xfer.ty.push(lane >= 2 ? 0 : 1);
      }
      if (lane === 0 && k % 5 === 1) {
        acts.w.push(lane); acts.k.push(2); acts.g.push(g);
        acts.s.push(start + 0.071); acts.e.push(start + 0.098); acts.b.push(4e6);
      }
    }
  }
  const n = tasks.g.length;
  send({type: 'tasks', run, n, base: 0, first: 0, columns: ['group', 'worker', 'status', 'submit', 'start', 'stop']},
       [new Uint16Array(tasks.g).buffer, new Uint16Array(tasks.w).buffer, new Uint8Array(n).buffer,
        new Float32Array(tasks.s).buffer, new Float32Array(tasks.s).buffer, new Float32Array(tasks.e).buffer]);
  const m = acts.w.length;
  send({type: 'actions', run, n: m, base: 0, first: 0, columns: ['worker', 'action', 'group', 'start', 'stop', 'bytes']},
       [new Uint16Array(acts.w).buffer, new Uint8Array(acts.k).buffer, new Uint16Array(acts.g).buffer,
        new Float32Array(acts.s).buffer, new Float32Array(acts.e).buffer, new Float64Array(acts.b).buffer]);
  const nt = xfer.s.length;
  send({type: 'transfers', run, n: nt, base: 0, addresses: [a, b], types: ['numpy.ndarray', HTML_TYPE],
        columns: ['start', 'stop', 'source', 'destination', 'bytes', 'incoming', 'type']},
       [new Float32Array(xfer.s).buffer, new Float32Array(xfer.e).buffer, new Uint16Array(xfer.src).buffer,
        new Uint16Array(xfer.dst).buffer, new Float64Array(xfer.b).buffer, new Uint8Array(xfer.inc).buffer,
        new Uint16Array(xfer.ty).buffer]);
  for (const [source, end, spill] of [[a, 4.0, true], [b, 3.0, false]]) {
    const t = [], mg = [], um = [], sp = [];
    for (let i = 0; i * 0.1 <= end + 1e-9; i++) {
      const time = i * 0.1;
      t.push(time);
      mg.push(1e8 + 1.5e8 * Math.min(1, time / 2.5) * (spill && time >= 2.5 ? 0.4 : 1));
      um.push(6e7 + 1e7 * Math.sin(time * 3));
      sp.push(spill && time >= 2.5 ? 1.5e8 : 0);
    }
    send({type: 'memory', run, n: t.length, base: 0, source, limit: 4e8, columns: ['time', 'managed', 'unmanaged', 'spilled']},
         [new Float32Array(t).buffer, new Float64Array(mg).buffer, new Float64Array(um).buffer, new Float64Array(sp).buffer]);
  }
  const trace = 'Traceback (most recent call last):\\n  File "work.py", line 3, in inc\\n    return 1 / x\\nZeroDivisionError: division by zero\\n';
  send({type: 'exceptions', run, first: 0, dropped: 0, rows: [
    {key: "('inc-abc', 3)", group: 'slow-input', worker: a + ' thread 1', time: 1.25, type: 'ZeroDivisionError', message: 'division by zero', traceback: trace},
    {key: '<img src=x onerror="window.__xss=1">', group: 'matmul', worker: b + ' thread 0', time: 2.5, type: 'ValueError', message: '<b>not bold</b>', traceback: ''},
  ]});
  send({type: 'cluster_workers', run, workers: [
    {address: a, name: '0', host: '127.0.0.1', threads: 2, memory_limit: 4e8, joined: null, left: null, reason: null},
    {address: b, name: '1', host: '127.0.0.1', threads: 2, memory_limit: 4e8, joined: null, left: 3.0, reason: 'lost'},
    {address: c, name: '2', host: '127.0.0.1', threads: 2, memory_limit: 4e8, joined: 1.0, left: null, reason: null},
  ]});
  const lost = tasks.w.indexOf(2);  // B's first two tasks on its thread 0: results lost with it
  send({type: 'reruns', run, rows: [lost, lost + 1], why: ['lost', 'lost'], workers: [b, b]});
  send({type: 'run_end', run, summary: {wall_time: 4.0}, dropped: {}, errors: []});
  return {tasks: n, actions: m, transfers: nt};
}
"""

# share of a canvas's device pixels within ``tol`` of each colour
COLOR_SHARE_JS = """([sel, colors, tol]) => {
    const c = document.querySelector(sel);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const hits = colors.map(() => 0);
    for (let i = 0; i < d.length; i += 4) {
        colors.forEach(([r, g, b], k) => {
            if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) <= tol) hits[k]++;
        });
    }
    return hits.map(h => h / (d.length / 4));
}"""


def color_share(page: Any, selector: str, colors: list[tuple[int, int, int]]) -> list[float]:
    """Share of ``selector``'s canvas pixels of each of ``colors`` (within a small distance)."""
    return page.evaluate(COLOR_SHARE_JS, [selector, [list(c) for c in colors], 24])  # type: ignore[no-any-return]


def _ready(page: Any, lab: Any, name: str) -> None:
    page.set_viewport_size({"width": 1600, "height": 1200})
    enable_test_hook(page)
    write_notebook(lab.root, name, ["1 + 1"])
    open_notebook_in_workspace(page, lab, name, name.replace(".ipynb", ""))
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 1000)


def _wait_canvas(page: Any, selector: str, name: str, predicate: str) -> None:
    page.wait_for_function(
        f"""() => {{
            const el = document.querySelector('{selector}');
            const v = el ? (el.dataset['{name}'] ?? '') : '';
            return {predicate};
        }}"""
    )


def test_a_synthetic_cluster_run_shows_actions_memory_exceptions_and_lost_workers(
    page: Any, lab: Any, screenshots: Any
) -> None:
    _ready(page, lab, "tables.ipynb")
    made = page.evaluate(SYNTHETIC_CLUSTER_JS, {"run": "tables", "a": A, "b": B, "c": C})
    wait_data(page, "run-state", "v === 'finished'")
    wait_data(page, "tasks", f"v === '{made['tasks']}'")
    _wait_canvas(page, STREAM, "actions", "Number(v) > 0")
    _wait_canvas(page, STREAM, "left", "v === '1'")
    _wait_canvas(page, MEMORY, "points", "Number(v) > 0")

    # transfers: red bars in the task stream, a legend entry per action kind present
    (red,) = color_share(page, STREAM, [TRANSFER_RED])
    assert red > 0.002, red
    legend = page.locator(f"{PANEL} .jp-DaskProfile-legend")
    kinds = legend.locator("[data-action]")
    assert sorted(kinds.evaluate_all("els => els.map(e => e.dataset.action)")) == [
        "disk-write",
        "transfer",
    ]

    # hover the first transfer (lane 0, bottom band): its text
    box = page.locator(STREAM).bounding_box()
    view = page.locator(STREAM).get_attribute("data-view") or "0,1"
    v0, v1 = (float(x) for x in view.split(","))
    t = 0.05 - 0.015  # middle of the first transfer
    x = box["x"] + GUTTER + (t - v0) / (v1 - v0) * (box["width"] - GUTTER)
    lanes_top = AXIS + 14  # below the axis and the first group's band
    page.mouse.move(x, box["y"] + lanes_top + 18 * 0.85)
    tooltip = page.locator(TOOLTIP)
    tooltip.wait_for(state="visible")
    text = tooltip.inner_text()
    assert "transfer 977 KiB in 26 ms (group slow-input)" in text, text

    # the lost worker's lanes: hatched after 3 s, a tooltip says when
    t = 3.5
    x = box["x"] + GUTTER + (t - v0) / (v1 - v0) * (box["width"] - GUTTER)
    lane2_top = AXIS + 14 + 2 * 18 + 14
    page.mouse.move(x, box["y"] + lane2_top + 5)
    page.wait_for_function(
        f"() => document.querySelector('{TOOLTIP}').innerText.includes('lost at 3 s')"
    )
    assert B in tooltip.inner_text()
    page.mouse.move(5, 1190)

    # the worker that joined at 1 s: its lane is marked empty before, a tooltip says when
    _wait_canvas(page, STREAM, "joined", "v === '1'")
    assert page.locator(STREAM).get_attribute("data-joined-workers") == C
    t = 0.5
    x = box["x"] + GUTTER + (t - v0) / (v1 - v0) * (box["width"] - GUTTER)
    lane4_top = AXIS + 3 * 14 + 4 * 18  # under the bands of A, B and C and their 4 lanes
    page.mouse.move(x, box["y"] + lane4_top + 5)
    page.wait_for_function(
        f"() => document.querySelector('{TOOLTIP}').innerText.includes('joined at 1 s')"
    )
    assert C in tooltip.inner_text()
    page.mouse.move(5, 1190)

    # the tasks B took with it: outlined, and their hover says why they ran again
    _wait_canvas(page, STREAM, "reruns", "v === '2'")
    t = 0.05 + 0.035  # middle of B's first task
    x = box["x"] + GUTTER + (t - v0) / (v1 - v0) * (box["width"] - GUTTER)
    page.mouse.move(x, box["y"] + lane2_top + 5)
    page.wait_for_function(
        f"() => document.querySelector('{TOOLTIP}').innerText.includes('re-run: lost on {B}')"
    )
    page.mouse.move(5, 1190)

    # bytes moved per pair of workers, under the memory view (text)
    pairs = page.locator(".jp-DaskProfile-bandwidthPairs")
    assert pairs.get_attribute("data-pairs") == "2"
    listed = pairs.inner_text()
    assert f"{A} → {B}" in listed, listed
    assert f"{B} → {A}" in listed, listed
    assert "Bandwidth by worker pair" in listed, listed

    # and per type of data moved (protocol 1.3), most bytes first; type names are text
    types = page.locator(".jp-DaskProfile-bandwidthTypes")
    assert types.get_attribute("data-types") == "2"
    rows = types.locator("tr").all_inner_texts()
    assert "Bandwidth by type" in rows[0], rows
    assert rows[1].startswith(HTML_TYPE), rows  # 40 transfers of 1 MB to A
    assert rows[2].startswith("numpy.ndarray"), rows  # 30 to B
    assert types.locator("img").count() == 0
    page.locator(".jp-DaskProfile-memory").screenshot(
        path=str(screenshots / "panel-bandwidth-synthetic.png")
    )

    # the memory view: stacked layers, both workers in the picker
    blue, grey = color_share(page, MEMORY, [MANAGED_BLUE, SPILLED_GREY])
    assert blue > 0.05, blue
    assert grey > 0.005, grey  # A spilled
    memory = page.locator(MEMORY)
    assert memory.get_attribute("data-workers") == "2"
    assert float(memory.get_attribute("data-limit") or 0) == 4e8  # B left: A's limit only
    assert float(memory.get_attribute("data-bandwidth") or 0) > 0
    picker = page.locator(".jp-DaskProfile-memoryWorker")
    picker.select_option(A)
    _wait_canvas(page, MEMORY, "selected", f"v === '{A}'")

    # the run bar: workers at the start, joined and lost; bytes moved
    summary = page.locator(SUMMARY).inner_text()
    assert "Workers 2 (+1 joined, 1 lost)" in summary, summary
    assert "Transferred" in summary, summary

    # exceptions: listed as text (never HTML), a click folds out the traceback
    section = page.locator(EXCEPTIONS)
    assert section.locator("summary").first.inner_text() == "Exceptions (2)"
    items = section.locator(".jp-DaskProfile-exception")
    assert items.count() == 2
    first = items.nth(0)
    assert "ZeroDivisionError: division by zero" in first.inner_text()
    assert not first.locator("pre").is_visible()
    first.locator("summary").click()
    assert "return 1 / x" in first.locator("pre").inner_text()
    second = items.nth(1).inner_text()
    assert "ValueError: <b>not bold</b>" in second, second
    assert '<img src=x onerror="window.__xss=1">' in second, second
    assert section.locator("img, b b").count() == 0
    assert page.evaluate("() => window.__xss") is None

    page.locator(PANEL).screenshot(path=str(screenshots / "panel-cluster-tables-synthetic.png"))
    assert not [e for e in page.console_errors if "daskprofile" in e]


# --- live: a LocalCluster in a real kernel --------------------------------------------------

# a matmul of 2 MB blocks over 2 worker processes (blocks move between them), then a task
# that raises, in one cell (one run)
COMPUTE = "\n".join(
    [
        "import dask.array as da",
        "x = da.random.random((3000, 3000), chunks=500)",
        "total = (x @ x.T).sum().compute()",
        "def fail(v):",
        "    return 1 / v",
        "try:",
        "    client.submit(fail, 0, pure=False).result()",
        "except ZeroDivisionError as e:",
        "    print('RAISED', type(e).__name__)",
    ]
)

# 40 naps of 0.25 s on the 2 workers' 4 threads, the cluster scaled to 3 workers, then 60
# more naps once the third is there (root tasks wait on the scheduler: it takes some)
SCALE_UP = "\n".join(
    [
        "import time, dask",
        "def nap(i):",
        "    time.sleep(0.25)",
        "    return i",
        "naps = client.compute([dask.delayed(nap)(i) for i in range(40)])",
        "cluster.scale(3)",
        "client.wait_for_workers(3, timeout=120)",
        "naps += client.compute([dask.delayed(nap)(i) for i in range(40, 100)])",
        "print('NAPPED', sum(client.gather(naps)))",
        "print('WORKERS_NOW', *sorted(client.scheduler_info()['workers']))",
    ]
)

# what the current run holds, through the test hook's model
TABLES_JS = f"""() => {{
    const d = document.querySelector('{PANEL}').dataset;
    const run = window.daskprofileTestHook?.model.current;
    const t = run?.tables;
    const stream = document.querySelector('{STREAM}').dataset;
    const memory = document.querySelector('{MEMORY}').dataset;
    return {{
        runState: d.runState, tasks: d.tasks, runs: d.runs,
        kinds: t ? t.actions.counts.slice() : [],
        transfers: t ? (t.actions.counts[0] ?? 0) : 0,
        actions: t ? t.actions.length : 0,
        transferRows: t ? t.transfers.length : 0,
        memorySources: t ? t.memory.size : 0,
        exceptions: t ? t.exceptions.total : 0,
        workers: t ? t.workers.length : 0,
        actionRects: stream.actions, memoryPoints: memory.points,
    }};
}}"""

# zoom the task stream onto the longest transfer (a sixth of the window)
ZOOM_TRANSFER_JS = """() => {
    const hook = window.daskprofileTestHook;
    const a = hook.model.current.tables.actions;
    let best = -1;
    for (let r = 0; r < a.length; r++) {
        if (a.action.data[r] === 0 && (best < 0 ||
            a.stop.data[r] - a.start.data[r] > a.stop.data[best] - a.start.data[best])) best = r;
    }
    const start = a.start.data[best], stop = a.stop.data[best];
    const vp = hook.panel.viewport;
    vp.reset();
    const want = Math.max((stop - start) * 6, 1e-4);
    vp.zoom((start + stop) / 2, want / (vp.end - vp.start));
    return {start, stop, bytes: a.bytes.data[best], view: [vp.start, vp.end]};
}"""


def _tables(page: Any) -> dict[str, Any]:
    return page.evaluate(TABLES_JS)  # type: ignore[no-any-return]


def test_a_cluster_run_shows_transfers_memory_and_its_exception(
    page: Any, lab: Any, screenshots: Any
) -> None:
    page.set_viewport_size({"width": 1600, "height": 1200})
    enable_test_hook(page)
    write_notebook(lab.root, "cluster_tables.ipynb", [""])
    open_notebook_in_workspace(page, lab, "cluster_tables.ipynb", "cluster-tables")
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 1000)
    workers = output_value(run_code(page, CLUSTER, timeout=SLOW), "WORKERS").split()
    try:
        assert len(workers) == 2, workers
        out = run_code(page, COMPUTE, timeout=SLOW)
        assert "RAISED ZeroDivisionError" in out, out
        wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
        try:
            page.wait_for_function(
                f"""() => {{ const f = ({TABLES_JS})();
                    return f.runState === 'finished' && f.transfers > 0 && f.transferRows > 0
                        && f.memorySources === 2 && f.exceptions >= 1 && f.workers === 2
                        && Number(f.actionRects) > 0 && Number(f.memoryPoints) > 0; }}""",
                timeout=60_000,
            )
        except Exception as exc:
            raise AssertionError(f"{exc}\nthe run's tables: {_tables(page)}") from exc
        tables = _tables(page)
        assert tables["runs"] == "1", tables

        # the exception, as text, with its message
        section = page.locator(EXCEPTIONS)
        section.wait_for(state="visible")
        assert (
            section.locator("summary").first.inner_text() == f"Exceptions ({tables['exceptions']})"
        )
        item = section.locator(".jp-DaskProfile-exception").first
        assert "ZeroDivisionError: division by zero" in item.inner_text()
        item.locator("summary").click()
        assert "in fail" in item.locator("pre").inner_text()  # its frame (a worker has no source)

        # the run bar: both workers there from the start, bytes moved
        summary = page.locator(SUMMARY).inner_text()
        assert "Workers 2" in summary, summary
        assert "Transferred" in summary, summary

        # the memory view drew the workers' memory (summed); under it the bandwidth per
        # type of data moved: the matmul's blocks are numpy arrays
        (blue,) = color_share(page, MEMORY, [MANAGED_BLUE])
        assert blue > 0.01, blue
        types = page.locator(".jp-DaskProfile-bandwidthTypes")
        assert int(types.get_attribute("data-types") or 0) >= 1
        assert "numpy.ndarray" in types.inner_text(), types.inner_text()
        page.locator(".jp-DaskProfile-memory").screenshot(
            path=str(screenshots / "panel-bandwidth-live.png")
        )

        # zoomed onto a transfer: red along the bottom of its lane
        zoomed = page.evaluate(ZOOM_TRANSFER_JS)
        page.wait_for_function(f"() => document.querySelector('{STREAM}').dataset.view !== ''")
        page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
        (red,) = color_share(page, STREAM, [TRANSFER_RED])
        assert red > 0.003, (red, zoomed, tables)
        page.locator(STREAM).screenshot(path=str(screenshots / "panel-cluster-transfer-zoom.png"))

        page.evaluate("() => window.daskprofileTestHook.panel.viewport.reset()")
        page.keyboard.press("Escape")
        page.mouse.move(5, 1190)
        page.locator(PANEL).screenshot(path=str(screenshots / "panel-cluster-tables.png"))
        assert not [e for e in page.console_errors if "daskprofile" in e]

        # a reload (same kernel) replays the run with the same tables
        page.reload()
        page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
        open_panel(page)
        wait_status(page, "connected")
        same = ("kinds", "actions", "transferRows", "memorySources", "exceptions", "workers")
        try:
            page.wait_for_function(
                f"""() => {{ const f = ({TABLES_JS})();
                    return f.runState === 'finished' && f.exceptions === {tables["exceptions"]}
                        && f.actions === {tables["actions"]}; }}""",
                timeout=60_000,
            )
        except Exception as exc:
            raise AssertionError(f"{exc}\nbefore: {tables}\nreplayed: {_tables(page)}") from exc
        replayed = _tables(page)
        assert {k: replayed[k] for k in same} == {k: tables[k] for k in same}, (tables, replayed)

        # the cluster scales up during a compute: the new worker's lanes start with it
        out = run_code(page, SCALE_UP, timeout=SLOW)
        new = set(output_value(out, "WORKERS_NOW").split()) - set(workers)
        assert len(new) == 1, out
        wait_data(page, "runs", "Number(v) >= 2", timeout=SLOW)
        wait_data(page, "run-state", "v === 'finished'", timeout=SLOW)
        _wait_canvas(page, STREAM, "joined", "v === '1'")
        marked = page.locator(STREAM).get_attribute("data-joined-workers")
        assert marked == new.pop(), (marked, out)
        page.locator(STREAM).screenshot(path=str(screenshots / "panel-cluster-joined.png"))
    finally:
        run_code(page, CLOSE, timeout=SLOW)
    assert output_value(run_code(page, CHILDREN), "CLUSTER_PROCS") == "0"
