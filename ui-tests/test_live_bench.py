"""Browser benchmarks: 1,000,000 synthetic tasks in the panel's model, pan/zoom frame times
in Chromium, for a local run (8 lanes) and a cluster run (64 workers x 4 threads, with
actions, transfers, memory and resources per worker). Print figures; assert only loose
bounds (the target is a whole-frame p95 <= 33 ms)."""

from __future__ import annotations

import json
from typing import Any

from helpers import (
    enable_test_hook,
    hover_task,
    open_notebook_in_workspace,
    open_panel,
    settle,
    synthetic_cluster_run,
    synthetic_run,
    wait_data,
    wait_status,
    widen_panel,
)

from conftest import write_notebook

FRAMES_JS = """
async () => {
  const h = window.daskprofileTestHook;
  const panel = h.panel, vp = panel.viewport, stream = panel.taskStream;
  vp.reset();
  const lo = vp.start, hi = vp.end, span = hi - lo;
  const frame = () => new Promise(r => requestAnimationFrame(() => r()));
  const stats = a => {
    const s = [...a].sort((x, y) => x - y);
    return {median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)], max: s[s.length - 1], n: s.length};
  };
  // 1. draw cost of the task stream alone, synchronous, over a zoom sweep and pans
  let draw = [], rects = [], visited = [], actions = [];
  let cold = null;
  const windows = [];
  for (let z = 0; z <= 40; z++) {
    const w = span * Math.pow(1000, -z / 40);
    windows.push([lo + (span - w) / 2, lo + (span + w) / 2]);
  }
  for (let p = 0; p < 40; p++) {
    const w = span / 20;
    windows.push([lo + p * span / 40, lo + p * span / 40 + w]);
  }
  for (let pass = 0; pass < 2; pass++) {
  if (pass === 1) { cold = stats(draw); draw = []; rects = []; visited = []; actions = []; }
  for (const [a, b] of windows) {
    vp.zoom((a + b) / 2, 1); // leave auto mode
    const cur = vp.end - vp.start;
    vp.zoom(vp.start, (b - a) / cur);
    vp.pan(a - vp.start);
    const t = performance.now();
    stream.render();
    draw.push(performance.now() - t);
    rects.push(Number(stream.canvas.dataset.rects));
    visited.push(Number(stream.canvas.dataset.visited));
    actions.push(Number(stream.canvas.dataset.actions || 0));
  }
  }
  // 2. whole frames (task stream + lines + cache redraw, layout, paint) driven by rAF
  vp.reset();
  await frame();
  const frames = [];
  // script time of each time-axis view in those frames (what the panel spends drawing)
  const views = {taskStream: panel.taskStream, resources: panel.resources, cache: panel.cache, memory: panel.memory};
  const viewMs = Object.fromEntries(Object.keys(views).map(k => [k, []]));
  let last = performance.now();
  for (let i = 0; i < 60; i++) {
    const c = vp.start + (vp.end - vp.start) * 0.5;
    if (i < 30) vp.zoom(c, 0.85); else vp.pan((vp.end - vp.start) * 0.05);
    await frame();
    const now = performance.now();
    frames.push(now - last);
    last = now;
    for (const [k, v] of Object.entries(views)) viewMs[k].push(v.lastFrameMs);
  }
  vp.reset();
  const viewP95 = Object.fromEntries(Object.entries(viewMs).map(([k, a]) => [k, Math.round(stats(a).p95 * 10) / 10]));
  return {draw: stats(draw), drawFirstPass: cold, slowest: draw.map((d, i) => [Math.round(d), i, rects[i], visited[i]]).sort((a, b) => b[0] - a[0]).slice(0, 5), frames: stats(frames), viewP95, maxRects: Math.max(...rects), maxVisited: Math.max(...visited), maxActionRects: Math.max(...actions), fullViewDraw: draw[0], lanes: Number(stream.canvas.dataset.lanes), laneGroups: Number(stream.canvas.dataset.groups)};
}
"""


REPAINT_JS = """
() => {
  const panel = window.daskprofileTestHook.panel, stream = panel.taskStream, vp = panel.viewport;
  const d = stream.canvas.dataset;
  stream.render();
  const [painted, rects, visited] = [Number(d.painted), d.rects, d.visited];
  stream.render();
  const sameView = {painted: Number(d.painted) - painted, rects: d.rects === rects, visited: d.visited === visited};
  // a change of the model the pixels do not depend on (a task's key came), then one they do
  const model = stream._model;
  model._mark('keys');
  model.flush();
  stream.render();
  const keys = Number(d.painted) - painted;
  model._mark('summary');
  model.flush();
  stream.render();
  const summary = Number(d.painted) - painted - keys;
  const before = Number(d.painted);
  vp.pan((vp.end - vp.start) * 0.01);
  stream.render();
  const panned = Number(d.painted) - before;
  vp.reset();
  return {sameView, keys, summary, panned};
}
"""


def _open_bench(page: Any, lab: Any, workspace: str) -> None:
    """A notebook with its kernel connected and the panel 1000 px wide (test hook on)."""
    enable_test_hook(page)
    name = write_notebook(lab.root, f"{workspace}.ipynb", ["1 + 1"])
    open_notebook_in_workspace(page, lab, name, workspace)
    open_panel(page)
    wait_status(page, "connected")
    widen_panel(page, 1000)


def _measure(page: Any, n: int, feed: Any) -> dict[str, Any]:
    """Feed a run of ``n`` tasks with ``feed(page)`` (returns its counts), then time frames."""
    start = page.evaluate("() => performance.now()")
    counts = feed(page)
    load_ms = page.evaluate("(t) => performance.now() - t", start)
    wait_data(page, "tasks", f"v === '{n}'")
    heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : 0")
    result: dict[str, Any] = page.evaluate(FRAMES_JS)
    result.update(counts or {}, tasks=n, load_ms=round(load_ms, 1), heap_mb=round(heap / 2**20, 1))
    return result


def _print(capsys: Any, title: str, result: dict[str, Any]) -> None:
    frames, draw = result["frames"], result["draw"]
    with capsys.disabled():
        print(
            f"\n{title}: whole frame p95 {frames['p95']:.1f} ms (median {frames['median']:.1f},"
            f" max {frames['max']:.1f}; target <= 33 ms), task stream draw median"
            f" {draw['median']:.1f} / p95 {draw['p95']:.1f} ms, views' p95 {result['viewP95']},"
            f" load {result['load_ms'] / 1000:.1f} s, heap {result['heap_mb']} MB"
        )
        print(json.dumps(result))


def test_one_million_tasks_pan_zoom_frame_time(page: Any, lab: Any, capsys: Any) -> None:
    _open_bench(page, lab, "bench")
    n = 1_000_000
    result = _measure(
        page,
        n,
        lambda p: synthetic_run(
            p, n=n, workers=8, groups=20, batch=50_000, duration=0.001, gap=0.0002, samples=10
        ),
    )
    _print(capsys, "bench_panel (1,000,000 tasks, 8 lanes, 1000 px panel)", result)
    assert result["lanes"] == 8
    assert result["draw"]["median"] < 200  # loose sanity bound, the figures are the point


def test_cluster_one_million_tasks_with_actions_pan_zoom_frame_time(
    page: Any, lab: Any, capsys: Any
) -> None:
    """64 workers x 4 threads, 1,000,000 tasks, ~30% with a transfer before them."""
    _open_bench(page, lab, "bench-cluster")
    n = 1_000_000
    result = _measure(page, n, lambda p: synthetic_cluster_run(p, n=n, workers=64, threads=4))
    _print(
        capsys,
        "bench_panel cluster (1,000,000 tasks, 64 workers x 4 threads, actions, 1000 px panel)",
        result,
    )
    assert (result["lanes"], result["laneGroups"]) == (256, 64)
    assert result["actions"] > 0.3 * n
    assert result["maxActionRects"] > 0
    # the memory chart's bandwidth line (bytes/s of the incoming transfers) is drawn
    memory = page.evaluate("() => ({...window.daskprofileTestHook.panel.memory.canvas.dataset})")
    assert (int(memory["workers"]), float(memory["bandwidth"]) > 0) == (64, True)
    # loose bounds for CI's software-rendered Chromium on a shared machine (the target is
    # a p95 <= 33 ms; a p95 swings with other processes' load, a median far less)
    assert result["frames"]["median"] < 100
    assert result["draw"]["median"] < 200
    # a frame for the same view (hover, a tooltip's key arriving) puts the last frame's
    # pixels again, with its counts; a pan paints anew
    again = page.evaluate(REPAINT_JS)
    assert again["sameView"] == {"painted": 0, "rects": True, "visited": True}, again
    assert (again["keys"], again["summary"], again["panned"]) == (0, 1, 1), again
    settle(page)
    stream = page.locator(".jp-DaskProfile-taskStream canvas")
    painted = int(stream.get_attribute("data-painted") or 0)
    text = hover_task(page, "", "worker")
    settle(page)
    assert "tcp://10.0.0." in text
    assert int(stream.get_attribute("data-painted") or 0) == painted
