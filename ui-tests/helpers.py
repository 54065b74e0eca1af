"""Page helpers shared by the browser tests (wait on page state, never on sleeps)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

PANEL = "#daskprofile-panel"
PANEL_TAB = '.lm-TabBar-tab[data-id="daskprofile-panel"]'
FILEBROWSER_CURRENT = '.lm-TabBar-tab.lm-mod-current[data-id="filebrowser"]'


def open_notebook(page: Any, lab: Any, name: str) -> None:
    """Open notebook ``name`` in a workspace of its own and wait until its kernel is idle.

    A fresh workspace per call keeps tabs a previous test left open out of this one.
    """
    open_notebook_in_workspace(page, lab, name, f"t{uuid.uuid4().hex[:10]}")


def open_panel(page: Any) -> Any:
    """Open the Dask Profile sidebar panel (unless the restored layout has it open).

    Returns once the sidebar has taken the width the panel opens at (src/sidebarWidth.ts).
    """
    panel = page.locator(PANEL)
    tab = page.locator(PANEL_TAB)
    tab.wait_for(state="visible")
    if "lm-mod-current" not in (tab.get_attribute("class") or ""):
        tab.click()
    panel.wait_for(state="visible")
    settle(page)
    return panel


def settle(page: Any, frames: int = 4) -> None:
    """Wait ``frames`` animation frames: Lumino lays out on the frames after a change."""
    page.evaluate(
        """(n) => new Promise(done => {
            const step = () => (n-- > 0 ? requestAnimationFrame(step) : done());
            step();
        })""",
        frames,
    )


AREA_JS = """(sel) => {
    const el = document.querySelector(sel);
    if (!el) return '';
    if (el.closest('#jp-main-dock-panel')) return 'main';
    if (el.closest('#jp-left-stack')) return 'left';
    if (el.closest('#jp-right-stack')) return 'right';
    return 'elsewhere';
}"""


def panel_area(page: Any) -> str:
    """The shell area holding the panel: 'main', 'left', 'right' (or '' when absent)."""
    return str(page.evaluate(AREA_JS, PANEL))


def wait_area(page: Any, area: str, timeout: float = 30_000) -> None:
    """Wait until the panel is in shell area ``area`` and visible there."""
    page.wait_for_function(
        f"([sel, area]) => ({AREA_JS})(sel) === area && document.querySelector(sel).offsetWidth > 0",
        arg=[PANEL, area],
        timeout=timeout,
    )


def wait_status(page: Any, status: str, timeout: float = 60_000) -> None:
    page.wait_for_selector(f"{PANEL}[data-status='{status}']", timeout=timeout)


# --- the server: poll an endpoint, put settings ---------------------------------------------

WAIT_SERVER_JS = """async ([url, token, condition, timeout]) => {
    // poll a server endpoint from the page until condition(json) holds (or time is up)
    const test = eval(condition);
    const deadline = performance.now() + timeout;
    let json = null;
    for (;;) {
        const r = await fetch(url, {headers: {Authorization: 'token ' + token}, cache: 'no-store'});
        json = await r.json();
        if (test(json)) return {ok: true, json};
        if (performance.now() > deadline) return {ok: false, json};
        await new Promise(resolve => setTimeout(resolve, 200));
    }
}"""


def wait_server(
    page: Any, lab: Any, path: str, condition: str, timeout: float = 30_000
) -> dict[str, Any]:
    """Wait until JS ``condition`` holds on the JSON of GET ``path``; returns that JSON."""
    result = page.evaluate(WAIT_SERVER_JS, [lab.url + path, lab.token, condition, timeout])
    assert result["ok"], (path, condition, result["json"])
    return dict(result["json"])


def put_settings(lab: Any, raw: dict[str, Any], plugin: str = "daskprofile:plugin") -> None:
    """Replace a plugin's user settings, the panel's by default (``{}``: the defaults)."""
    body = json.dumps({"raw": json.dumps(raw)}).encode()
    request = urllib.request.Request(
        f"{lab.url}lab/api/settings/{plugin}",
        data=body,
        method="PUT",
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()


# --- daskprofile panel: test hook, synthetic runs, pixels ---------------------------------

TEST_HOOK_SCRIPT = "window.localStorage.setItem('daskprofile:test-hook', '1');"


def enable_test_hook(page: Any) -> None:
    """Expose ``window.daskprofileTestHook`` (model + message injection) on next loads."""
    page.add_init_script(TEST_HOOK_SCRIPT)


def panel_data(page: Any, name: str) -> str:
    """A data attribute of the panel (``data-<name>``)."""
    return page.locator(PANEL).get_attribute(f"data-{name}") or ""


def wait_data(page: Any, name: str, predicate: str, timeout: float = 60_000) -> None:
    """Wait until JS ``predicate`` (over ``v``, the attribute's string) holds."""
    page.wait_for_function(
        f"""() => {{
            const el = document.querySelector('{PANEL}');
            const v = el ? (el.dataset['{_camel(name)}'] ?? '') : '';
            return {predicate};
        }}""",
        timeout=timeout,
    )


def _camel(name: str) -> str:
    head, *rest = name.split("-")
    return head + "".join(p.capitalize() for p in rest)


def widen_panel(page: Any, width: int) -> None:
    """Drag the left sidebar's split handle so the panel is ``width`` px wide."""
    box = page.locator(PANEL).bounding_box()
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    hbox = handle.bounding_box()
    x = hbox["x"] + hbox["width"] / 2
    y = hbox["y"] + hbox["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + (box["x"] + width - hbox["x"]), y, steps=5)
    page.mouse.up()


# Builds a synthetic run in the page through the same decoder the kernel's messages use.
SYNTHETIC_RUN_JS = """
async ({run, n, workers, groups, batch, duration, gap, samples, keysHtml}) => {
  const hook = window.daskprofileTestHook;
  const send = (data, buffers) => { if (!hook.receive(data, buffers || [])) throw new Error('rejected ' + data.type); };
  send({type: 'run_start', run, t0: 100.0, wall0: Date.now() / 1000, options: {tasks: true}, title: 'synthetic'});
  const names = Array.from({length: groups}, (_, i) => ['inc', 'add', 'sum-aggregate', 'getitem', 'mul', 'random_sample', 'mean_chunk', 'transpose'][i % 8] + (i >= 8 ? '-' + i : ''));
  send({type: 'groups', run, ids: names.map((_, i) => i), names, colors: names.map(() => '')});
  send({type: 'workers', run, ids: Array.from({length: workers}, (_, i) => i),
        labels: Array.from({length: workers}, (_, i) => 'thread ' + (i + 1)), kinds: Array(workers).fill('thread')});
  const perLane = Math.ceil(n / workers);
  const step = duration + gap;
  const finished = new Array(groups).fill(0), erred = new Array(groups).fill(0);
  let row = 0;
  while (row < n) {
    const m = Math.min(batch, n - row);
    const g = new Uint16Array(m), w = new Uint16Array(m), st = new Uint8Array(m);
    const sub = new Float32Array(m), s = new Float32Array(m), e = new Float32Array(m);
    const k0 = row % perLane;
    const base = k0 * step;
    for (let j = 0; j < m; j++) {
      const r = row + j;
      const lane = Math.floor(r / perLane) % workers;
      const k = r % perLane;
      const jitter = ((r * 2654435761) % 1000) / 1000;
      const t = k * step - base;
      w[j] = lane; g[j] = (k + lane) % groups; st[j] = r % 997 === 0 ? 1 : 0;
      finished[g[j]] += 1; erred[g[j]] += st[j];
      sub[j] = t - gap * jitter; s[j] = t; e[j] = t + duration * (0.3 + 0.7 * jitter);
    }
    send({type: 'tasks', run, n: m, base, first: row, columns: ['group', 'worker', 'status', 'submit', 'start', 'stop']},
         [g.buffer, w.buffer, st.buffer, sub.buffer, s.buffer, e.buffer]);
    row += m;
  }
  const span = perLane * step;
  const nr = 200;
  const time = new Float32Array(nr), cpu = new Float32Array(nr), mem = new Float64Array(nr), procs = new Uint16Array(nr);
  for (let i = 0; i < nr; i++) {
    time[i] = (i / (nr - 1)) * span; cpu[i] = 50 + 140 * Math.abs(Math.sin(i / 9)); mem[i] = 2e8 + 3e8 * (i / nr) + 5e7 * Math.sin(i / 5); procs[i] = 1;
  }
  send({type: 'resources', run, n: nr, base: 0, columns: ['time', 'cpu', 'memory', 'processes']}, [time.buffer, cpu.buffer, mem.buffer, procs.buffer]);
  const nc = 60;
  const ct = new Float32Array(nc), cg = new Uint16Array(nc), cm = new Float64Array(nc);
  for (let i = 0; i < nc; i++) { ct[i] = (i / nc) * span; cg[i] = i % Math.min(3, groups); cm[i] = 1e6 * (1 + (i % 7)); }
  send({type: 'cache', run, n: nc, base: 0, columns: ['time', 'group', 'metric']}, [ct.buffer, cg.buffer, cm.buffer]);
  const node = (name, file, count, children) => {
    const kids = {};
    for (const c of children || []) kids[c.identifier] = c;
    return {identifier: name + ';' + file + ';1', description: {filename: file, name, line_number: 1, line: ''}, count, children: kids};
  };
  for (let c = 0; c < samples; c++) {
    const trees = {};
    for (let gi = 0; gi < Math.min(groups, 3); gi++) {
      const tree = node('execute_task', 'dask/core.py', 30, [
        node(names[gi], 'work.py', 20, [node('numpy_op', 'numpy/core.py', 12), node('copy', 'numpy/copy.py', 5)]),
        node('_execute_subgraph', 'dask/local.py', 10, [node('sleep', 'time.py', 9)])
      ]);
      tree.identifier = 'root';
      trees[names[gi]] = tree;
    }
    send({type: 'stacks', run, t_start: c, t_end: c + 1, trees});
  }
  // as the kernel counts them: done = every finished task, erred = those that raised
  send({type: 'progress', run, groups: names.map((_, i) => i), total: finished, done: finished, erred});
  if (keysHtml) {
    send({type: 'keys', run, indices: [0, 1], keys: ['<img src=x onerror="window.__xss=1">', "('inc-<b>bold</b>', 0)"]});
  }
  send({type: 'run_end', run, summary: {wall_time: span}, dropped: {tasks: 0}, errors: []});
  return {span};
}
"""


def synthetic_run(
    page: Any,
    run: str = "synthetic",
    n: int = 2000,
    workers: int = 4,
    groups: int = 5,
    batch: int = 50_000,
    duration: float = 0.002,
    gap: float = 0.0005,
    samples: int = 5,
    keys_html: bool = False,
) -> dict[str, Any]:
    """Feed a synthetic run into the panel's model (needs ``enable_test_hook``)."""
    return page.evaluate(
        SYNTHETIC_RUN_JS,
        {
            "run": run,
            "n": n,
            "workers": workers,
            "groups": groups,
            "batch": batch,
            "duration": duration,
            "gap": gap,
            "samples": samples,
            "keysHtml": keys_html,
        },
    )


def canvas_stats(page: Any, selector: str) -> dict[str, Any]:
    """Colour statistics of a canvas: non-background pixel share, mean luminance, colours."""
    return page.evaluate(
        """(sel) => {
            const c = document.querySelector(sel);
            const ctx = c.getContext('2d');
            const {width, height} = c;
            const d = ctx.getImageData(0, 0, width, height).data;
            const probe = document.createElement('canvas').getContext('2d');
            const css = getComputedStyle(c).getPropertyValue('--jp-layout-color1').trim() || '#ffffff';
            probe.fillStyle = css; probe.fillRect(0, 0, 1, 1);
            const bg = Array.from(probe.getImageData(0, 0, 1, 1).data.slice(0, 3));
            let other = 0, lum = 0; const colors = new Set();
            for (let i = 0; i < d.length; i += 16) {
                const r = d[i], g = d[i + 1], b = d[i + 2];
                lum += 0.2126 * r + 0.7152 * g + 0.0722 * b;
                if (Math.abs(r - bg[0]) + Math.abs(g - bg[1]) + Math.abs(b - bg[2]) > 30) other++;
                if (colors.size < 200) colors.add((r >> 4) + ',' + (g >> 4) + ',' + (b >> 4));
            }
            const n = d.length / 16;
            return {width, height, filled: other / n, luminance: lum / n / 255, colors: colors.size, background: bg};
        }""",
        selector,
    )


def open_notebook_in_workspace(
    page: Any, lab: Any, name: str, workspace: str, reset: bool = True
) -> None:
    """Open notebook ``name`` in its own workspace (no tabs restored from other tests)."""
    query = f"reset&token={lab.token}" if reset else f"token={lab.token}"
    page.goto(f"{lab.url}lab/workspaces/{workspace}/tree/{name}?{query}")
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    if reset:
        # once a reset workspace's layout is restored, JupyterLab brings the file browser
        # to the front and takes the focus: a panel opened or a cell clicked before that
        # is hidden or loses its keys
        page.locator(FILEBROWSER_CURRENT).wait_for(timeout=60_000)


# --- notebook cells typed and run in the browser, panel state over time -----------------

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def cells(page: Any) -> Any:
    """The code cells of the visible notebook."""
    return page.locator(f"{NOTEBOOK} .jp-Cell")


def submit_code(page: Any, source: str) -> Any:
    """Put ``source`` in the notebook's last cell and run it (Shift+Enter); returns the cell.

    The text is inserted in one piece (no key events), so the editor neither auto-indents
    nor auto-closes brackets; the cell is fresh (``[ ]``) so its prompt tells when it ran.
    """
    all_cells = cells(page)
    all_cells.first.wait_for()
    cell = all_cells.nth(all_cells.count() - 1)  # pinned: Shift+Enter appends a new cell
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text(source)
    page.keyboard.press("Shift+Enter")
    _wait_queued(page, cell, editor)
    return cell


def _wait_queued(page: Any, cell: Any, editor: Any, tries: int = 3) -> None:
    """Wait until ``cell`` is queued or ran (``[*]`` or ``[n]``). Right after a notebook
    opens, JupyterLab can skip a Shift+Enter (the prompt stays ``[ ]`` with the kernel
    idle, seen on a loaded machine): the cell has not run, so it is run again."""
    import re

    started = cell.locator(".jp-InputArea-prompt").filter(has_text=re.compile(r"\[(\*|\d+)\]"))
    for attempt in range(tries):
        try:
            started.wait_for(timeout=10_000)
            return
        except Exception:
            if attempt == tries - 1:
                raise
        # a dialog the skipped run opened (CI, loaded: one intercepted every click, e.g.
        # the kernel not ready yet) takes its default answer, then the cell runs again
        dialog = page.locator(".jp-Dialog")
        if dialog.count():
            dialog.locator(".jp-Dialog-button.jp-mod-accept").first.click()
            dialog.first.wait_for(state="detached", timeout=30_000)
        editor.click()
        page.keyboard.press("Shift+Enter")


def wait_cell_done(cell: Any, timeout: float = 120_000) -> str:
    """Wait until ``cell`` has run (its prompt shows a number); returns its output text."""
    import re

    cell.locator(".jp-InputArea-prompt").filter(has_text=re.compile(r"\[\d+\]")).wait_for(
        timeout=timeout
    )
    outputs = cell.locator(".jp-OutputArea-output")
    return "\n".join(outputs.nth(i).inner_text() for i in range(outputs.count()))


def run_code(page: Any, source: str, timeout: float = 120_000) -> str:
    """Run ``source`` in a new cell and return its output text."""
    return wait_cell_done(submit_code(page, source), timeout)


def output_value(output: str, tag: str) -> str:
    """The word after ``tag`` in a cell's output (cells print ``TAG value``)."""
    for line in output.splitlines():
        if line.startswith(tag + " "):
            return line[len(tag) + 1 :].strip()
    raise AssertionError(f"no {tag!r} line in the output {output!r}")


RECORD_JS = """(sel) => {
    const el = document.querySelector(sel);
    const log = window.__daskprofileLog = [];
    const snap = () => log.push(Object.assign({t: Date.now()}, el.dataset));
    snap();
    window.__daskprofileObserver?.disconnect();
    window.__daskprofileObserver = new MutationObserver(snap);
    window.__daskprofileObserver.observe(el, {attributes: true});
}"""


def record_panel(page: Any) -> None:
    """Log every change of the panel's data attributes with its time (``Date.now()``)."""
    page.evaluate(RECORD_JS, PANEL)


def panel_log(page: Any) -> list[dict[str, Any]]:
    """What :func:`record_panel` logged: one dict of data attributes (+ ``t``, ms) a change."""
    return page.evaluate("() => window.__daskprofileLog || []")  # type: ignore[no-any-return]


def first_time(log: list[dict[str, Any]], predicate: Any) -> float | None:
    """Seconds (Unix) of the first logged state where ``predicate(state)`` holds."""
    for state in log:
        if predicate(state):
            return float(state["t"]) / 1000
    return None


def run_command(page: Any, label: str) -> None:
    """Run the command labelled ``label`` from the command palette (Ctrl+Shift+C)."""
    page.keyboard.press("Escape")
    page.keyboard.press("ControlOrMeta+Shift+c")
    search = page.locator(".lm-CommandPalette-input")
    search.wait_for(state="visible")
    search.fill(label)
    page.locator(".lm-CommandPalette-item", has_text=label).first.click()


def restart_kernel(page: Any) -> None:
    """Kernel > Restart Kernel…, then confirm the dialog."""
    page.keyboard.press("Escape")
    page.locator(".lm-MenuBar-item", has_text="Kernel").click()
    page.locator(".lm-Menu-item", has_text="Restart Kernel…").first.click()
    page.locator(".jp-Dialog-button", has_text="Restart").click()


def open_from_path(page: Any, path: str) -> None:
    """File > Open from Path…: open ``path`` in a new tab of the same page (no reload)."""
    page.keyboard.press("Escape")
    page.locator(".lm-MenuBar-item", has_text="File").click()
    page.locator(".lm-Menu-item", has_text="Open from Path…").first.click()
    page.locator(".jp-Dialog input").fill(path)
    page.locator(".jp-Dialog-button", has_text="Open").click()
    page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab[title*="{path}"]').wait_for()


def activate_tab(page: Any, path: str) -> None:
    """Bring the main-area tab of document ``path`` to the front."""
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=path).first.click()


# --- hostile content: what a payload may not have made of the page ------------------------

HOSTILE_DOM_JS = """(marker) => {
    // every element (shadow roots too: bokeh draws in them) that a payload carrying
    // `marker` would have made live: an event handler, a javascript: URL, a script of its
    // own (`<script>window.<marker>=...`; data blocks hold it inside strings), the
    // <img src=x> of the classic probe
    const found = [];
    const url = /^(href|src|action|formaction|xlink:href|data)$/;
    const walk = (root) => {
        for (const el of root.querySelectorAll('*')) {
            const tag = el.tagName.toLowerCase();
            for (const a of el.attributes) {
                if (a.name.startsWith('on') && a.value.includes(marker)) found.push(tag + '[' + a.name + ']');
                if (url.test(a.name) && /^\\s*javascript:/i.test(a.value)) found.push(tag + '[' + a.name + '=javascript:]');
            }
            if (tag === 'img' && el.getAttribute('src') === 'x') found.push('img[src=x]');
            if (tag === 'script' && el.textContent.trim().startsWith('window.' + marker)) found.push('script');
            if (el.shadowRoot) walk(el.shadowRoot);
        }
    };
    walk(document);
    return found;
}"""


def hostile_elements(page: Any, marker: str = "__pwned") -> list[str]:
    """Elements of every frame of ``page`` that a payload naming ``marker`` made live
    (handlers, ``javascript:`` URLs, its own scripts, ``img[src=x]``); ``[]`` when none."""
    found: list[str] = []
    for frame in page.frames:
        found += frame.evaluate(HOSTILE_DOM_JS, marker)
    return found


def pwned(page: Any, name: str = "__pwned") -> list[str]:
    """The frames of ``page`` where a payload ran (set ``window[name]``)."""
    return [f.url for f in page.frames if f.evaluate(f"() => typeof window.{name}") != "undefined"]


def hover_task(page: Any, root: str, text: str = "key") -> str:
    """Move over the task stream under ``root`` until a task's tooltip shows ``text``;
    returns the tooltip's text."""
    canvas = page.locator(f"{root} .jp-DaskProfile-taskStream canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    tooltip = page.locator(f"{root} .jp-DaskProfile-taskStream .jp-DaskProfile-tooltip")
    for y in range(22, int(box["height"]) - 4, 6):
        for x in range(80, int(box["width"]) - 4, 12):
            page.mouse.move(box["x"] + x, box["y"] + y)
            if tooltip.is_visible() and text in tooltip.inner_text():
                return str(tooltip.inner_text())
    raise AssertionError(f"no task tooltip with {text!r} anywhere on the task stream")


# A synthetic cluster run, shaped as a 1.2/1.3 kernel sends one: W workers x T threads
# (lanes `<address> thread <t>`, grouped per worker), tasks in time order across the lanes
# (batches of `batch` rows), and the cluster tables the kernel records beside them: actions
# (a transfer of inputs before ~`transferShare` of the tasks, a few spills to and reads
# from disk, deserializations), the workers' transfer logs (each transfer logged by both
# ends), each worker's memory and resources every 0.2 s, the workers' list.
SYNTHETIC_CLUSTER_RUN_JS = """
async ({run, n, workers, threads, groups, batch, duration, gap, transferShare}) => {
  const hook = window.daskprofileTestHook;
  const send = (data, buffers) => { if (!hook.receive(data, buffers || [])) throw new Error('rejected ' + data.type); };
  send({type: 'run_start', run, t0: 100.0, wall0: Date.now() / 1000, options: {tasks: true}, title: 'synthetic cluster'});
  const stems = ['random_sample', 'transpose', 'rechunk-split', 'rechunk-merge', 'add', 'sum-chunk', 'sum-partial', 'sum-aggregate', 'getitem', 'mul', 'astype', 'concatenate'];
  const names = Array.from({length: groups}, (_, i) => stems[i % stems.length] + (i >= stems.length ? '-' + i : ''));
  send({type: 'groups', run, ids: names.map((_, i) => i), names, colors: names.map(() => '')});
  const addresses = Array.from({length: workers}, (_, i) => 'tcp://10.0.' + Math.floor(i / 200) + '.' + (i % 200 + 10) + ':' + (40000 + i));
  const lanes = workers * threads;
  send({type: 'workers', run, ids: Array.from({length: lanes}, (_, i) => i),
        labels: Array.from({length: lanes}, (_, i) => addresses[Math.floor(i / threads)] + ' thread ' + (i % threads)),
        kinds: Array(lanes).fill('worker')});
  const hash = r => ((r * 2654435761) >>> 0) % 1000;
  const step = duration + gap;
  const phase = l => (((l * 7919) >>> 0) % 1000) / 1000 * step;
  const finished = new Array(groups).fill(0), erred = new Array(groups).fill(0);
  const counts = {tasks: 0, actions: 0, transfers: 0, memory: 0, resources: 0};
  let first = 0, actionFirst = 0, addressesSent = false;
  for (let row = 0; row < n; ) {
    const m = Math.min(batch, n - row);
    const base = Math.floor(row / lanes) * step;
    const g = new Uint16Array(m), w = new Uint16Array(m), st = new Uint8Array(m);
    const sub = new Float32Array(m), s = new Float32Array(m), e = new Float32Array(m);
    const act = {w: [], k: [], g: [], s: [], e: [], b: []};
    const xfer = {s: [], e: [], src: [], dst: [], b: [], inc: [], ty: []};
    for (let j = 0; j < m; j++) {
      const r = row + j, lane = r % lanes, k = Math.floor(r / lanes), h = hash(r);
      const start = phase(lane) + k * step - base;
      const stop = start + duration * (0.3 + 0.7 * h / 1000);
      w[j] = lane; g[j] = (k + lane) % groups; st[j] = r % 997 === 0 ? 1 : 0;
      finished[g[j]] += 1; erred[g[j]] += st[j];
      sub[j] = start - gap * (h % 7) / 7; s[j] = start; e[j] = stop;
      const worker = Math.floor(lane / threads);
      const action = (code, a, b, bytes) => {
        act.w.push(lane); act.k.push(code); act.g.push(g[j]); act.s.push(a); act.e.push(b); act.b.push(bytes);
      };
      if (h < transferShare * 1000) {
        const a = start - gap * 0.9, b = start - gap * 0.15, bytes = 1e5 + h * 8e3;
        const peer = (worker + 1 + h % (workers - 1)) % workers;
        action(0, a, b, bytes);
        for (const inc of [1, 0]) {
          xfer.s.push(a); xfer.e.push(b); xfer.src.push(peer); xfer.dst.push(worker);
          xfer.b.push(bytes); xfer.inc.push(inc); xfer.ty.push(h % 5 === 0 ? 1 : 0);
        }
      } else if (h < transferShare * 1000 + 10) {
        action(1, start - gap * 0.8, start - gap * 0.2, 4e6);  // read back from disk
      }
      if (h % 50 === 7) action(2, stop, stop + gap * 0.5, 4e6);  // spilled right after
      if (h % 40 === 3) action(3, start - gap * 0.1, start, NaN);  // deserialized
    }
    send({type: 'tasks', run, n: m, base, first, columns: ['group', 'worker', 'status', 'submit', 'start', 'stop']},
         [g.buffer, w.buffer, st.buffer, sub.buffer, s.buffer, e.buffer]);
    const na = act.w.length;
    send({type: 'actions', run, n: na, base, first: actionFirst, columns: ['worker', 'action', 'group', 'start', 'stop', 'bytes']},
         [new Uint16Array(act.w).buffer, new Uint8Array(act.k).buffer, new Uint16Array(act.g).buffer,
          new Float32Array(act.s).buffer, new Float32Array(act.e).buffer, new Float64Array(act.b).buffer]);
    const nt = xfer.s.length;
    send({type: 'transfers', run, n: nt, base, addresses: addressesSent ? [] : addresses,
          types: addressesSent ? [] : ['numpy.ndarray', 'pandas.core.frame.DataFrame'],
          columns: ['start', 'stop', 'source', 'destination', 'bytes', 'incoming', 'type']},
         [new Float32Array(xfer.s).buffer, new Float32Array(xfer.e).buffer, new Uint16Array(xfer.src).buffer,
          new Uint16Array(xfer.dst).buffer, new Float64Array(xfer.b).buffer, new Uint8Array(xfer.inc).buffer,
          new Uint16Array(xfer.ty).buffer]);
    addressesSent = true;
    first += m; actionFirst += na; row += m;
    counts.tasks += m; counts.actions += na; counts.transfers += nt;
  }
  const span = Math.ceil(n / lanes) * step + step;
  const ns = Math.floor(span / 0.2) + 1;
  for (let i = 0; i < workers; i++) {
    const time = new Float32Array(ns), cpu = new Float32Array(ns), rss = new Float64Array(ns), procs = new Uint16Array(ns);
    const managed = new Float64Array(ns), unmanaged = new Float64Array(ns), spilled = new Float64Array(ns);
    for (let k = 0; k < ns; k++) {
      const t = k * 0.2, wave = Math.abs(Math.sin(t / 7 + i));
      time[k] = t; cpu[k] = 80 + 300 * wave; procs[k] = 1;
      managed[k] = 5e8 + 1.5e9 * wave; unmanaged[k] = 3e8 + 5e7 * Math.sin(t + i);
      spilled[k] = wave > 0.9 ? 4e8 * (wave - 0.9) * 10 : 0;
      rss[k] = managed[k] + unmanaged[k];
    }
    send({type: 'memory', run, n: ns, base: 0, source: addresses[i], limit: 4e9, columns: ['time', 'managed', 'unmanaged', 'spilled']},
         [time.buffer.slice(0), managed.buffer, unmanaged.buffer, spilled.buffer]);
    send({type: 'resources', run, n: ns, base: 0, source: addresses[i], columns: ['time', 'cpu', 'memory', 'processes']},
         [time.buffer, cpu.buffer, rss.buffer, procs.buffer]);
    counts.memory += ns; counts.resources += ns;
  }
  send({type: 'cluster_workers', run, workers: addresses.map((address, i) => (
    {address, name: String(i), host: address.split('//')[1].split(':')[0], threads, memory_limit: 4e9, joined: null, left: null, reason: null}))});
  send({type: 'progress', run, groups: names.map((_, i) => i), total: finished, done: finished, erred});
  send({type: 'run_end', run, summary: {wall_time: span}, dropped: {tasks: 0}, errors: []});
  return {span, ...counts};
}
"""


def synthetic_cluster_run(
    page: Any,
    run: str = "cluster",
    n: int = 1_000_000,
    workers: int = 64,
    threads: int = 4,
    groups: int = 12,
    batch: int = 50_000,
    duration: float = 0.02,
    gap: float = 0.008,
    transfer_share: float = 0.3,
) -> dict[str, Any]:
    """Feed a synthetic cluster run (tasks, actions, transfers, memory, resources per worker)
    into the panel's model (needs ``enable_test_hook``); returns its span and row counts."""
    return page.evaluate(
        SYNTHETIC_CLUSTER_RUN_JS,
        {
            "run": run,
            "n": n,
            "workers": workers,
            "threads": threads,
            "groups": groups,
            "batch": batch,
            "duration": duration,
            "gap": gap,
            "transferShare": transfer_share,
        },
    )
