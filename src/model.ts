/**
 * The runs the panel shows, held in typed arrays (no DOM, no kernel): fed with the
 * kernel's messages by the controller, read by the views. Decoding is strict: a malformed
 * message is logged (console.error 'daskprofile: ...') and ignored. Changes are signalled
 * at most once per animation frame, with the set of what changed.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { ClusterTables, workersLine } from './clusterTables';
import { groupColor } from './colors';
import { Column } from './columns';
import { flameNode, IFlameNode, mergeFlame, mergeStackTree } from './flame';
import { groupIdsNamed, highlightMask, IFinding } from './findings';
import { compareNatural } from './lanes';
import { LaneIndex } from './lod';
import { ISpanCounts, spanCounts, spanMask, spanPaths } from './spans';
import {
  decodeMessage,
  ExportFormat,
  IActionsMessage,
  ICacheMessage,
  IExportMessage,
  IGroupsMessage,
  IHelloMessage,
  IProgressMessage,
  IResourcesMessage,
  IRunEndMessage,
  ISourceInfo,
  ISpansMessage,
  IStacksMessage,
  ITasksMessage,
  IWorkersMessage,
  KernelMessage,
  MAX_KEYS_PER_REQUEST,
  RunId
} from './protocol';

/** What changed since the last `changed` signal. */
export type ChangeKind =
  | 'runs'
  | 'current'
  | 'tasks'
  | 'resources'
  | 'cache'
  | 'progress'
  | 'stacks'
  | 'keys'
  | 'actions'
  | 'memory'
  | 'exceptions'
  | 'clusterWorkers'
  | 'transfers'
  | 'spans'
  | 'sources'
  | 'filter'
  | 'highlight'
  | 'summary'
  | 'state'
  | 'error'
  | 'rejected';

/** A task group of a run. */
export interface IGroupInfo {
  id: number;
  name: string;
  color: string;
}

/** A worker (lane) of a run. */
export interface IWorkerInfo {
  id: number;
  label: string;
  kind: string;
}

/** Progress of one task group. */
export interface IGroupProgress {
  group: number;
  total: number;
  done: number;
  erred: number;
}

/** One sampler cycle: its time span (seconds since t0) and per-group trees. */
export interface IStackCycle {
  tStart: number;
  tEnd: number;
  trees: Map<string, IFlameNode>;
}

/** A run's summary, as the header shows it. */
export interface IRunSummary {
  wallTime: number;
  tasks: number;
  errors: number;
  groups: number;
  workers: number;
  peakMemory: number | null;
  meanCpu: number | null;
  /** Records the collectors or the publisher dropped, by kind (absent when none). */
  dropped: { [what: string]: number };
  /** The cluster a distributed run ran on (known at its end), else null. */
  cluster: IClusterSummary | null;
  /** Parts recorded in a reduced way and why (known at the run's end; {} when none). */
  reduced: { [part: string]: string };
  /** The cluster's workers, e.g. `2 (+1 joined, 1 lost)` (protocol 1.2; '' when unknown). */
  clusterWorkers: string;
  /** Bytes moved between workers (protocol 1.2 transfers), or null when none were logged. */
  transferred: number | null;
}

/**
 * The run bar's warning line for the parts recorded in a reduced way, e.g.
 * `Reduced: stacks (workers lack daskprofile …: no stack samples)`; '' when none.
 * Plain text (set with textContent: the reasons come from the kernel).
 */
export function reducedLine(reduced: { [part: string]: string }): string {
  const parts = Object.entries(reduced).sort((a, b) =>
    a[0].localeCompare(b[0])
  );
  if (parts.length === 0) {
    return '';
  }
  return `Reduced: ${parts.map(([part, why]) => `${part} (${why})`).join('; ')}`;
}

/** Workers, threads and memory limit of the cluster of a run (the kernel's summary). */
export interface IClusterSummary {
  workers: number;
  threads: number;
  memoryLimit: number;
}

/** The cluster part of a kernel summary, or null when absent or malformed. */
export function clusterSummary(
  k: Record<string, unknown>
): IClusterSummary | null {
  const c = k.cluster;
  if (typeof c !== 'object' || c === null) {
    return null;
  }
  const r = c as Record<string, unknown>;
  const n = (v: unknown): number =>
    typeof v === 'number' && Number.isFinite(v) ? v : 0;
  return {
    workers: n(r.workers),
    threads: n(r.threads),
    memoryLimit: n(r.memory_limit)
  };
}

/**
 * One series of resource samples (time order): the run's total, or one worker process's
 * (a `resources` batch with a `source`, protocol 1.1). Keeps its maxima as rows arrive.
 */
export class ResourceSeries {
  readonly time = new Column(Float64Array);
  readonly cpu = new Column(Float32Array);
  readonly memory = new Column(Float64Array);
  readonly processes = new Column(Uint16Array);
  /** Largest CPU (% of one core) and memory (bytes) seen; 0 when empty. */
  maxCpu = 0;
  maxMemory = 0;

  get length(): number {
    return this.time.length;
  }

  /** Append a batch (its times are offsets from its `base`). */
  append(msg: IResourcesMessage): void {
    this.time.append(msg.time, msg.base);
    this.cpu.append(msg.cpu);
    this.memory.append(msg.memory);
    this.processes.append(msg.processes);
    for (let i = 0; i < msg.n; i++) {
      this.maxCpu = Math.max(this.maxCpu, msg.cpu[i]);
      this.maxMemory = Math.max(this.maxMemory, msg.memory[i]);
    }
  }
}

/** Sends a request to the kernel side (set by the controller while connected). */
export type Sender = (data: Record<string, unknown>) => void;

/** One run: its tables in growable typed arrays. */
export class RunData {
  constructor(id: RunId, t0 = 0, wall0 = 0, title: string | null = null) {
    this.id = id;
    this.t0 = t0;
    this.wall0 = wall0;
    this.title = title;
  }

  readonly id: RunId;
  t0: number;
  wall0: number;
  title: string | null;
  options: Record<string, unknown> = {};
  finished = false;

  /** Groups by id (sparse). */
  readonly groups: IGroupInfo[] = [];
  /** Groups by name. */
  readonly groupsByName = new Map<string, IGroupInfo>();
  readonly workers = new Map<number, IWorkerInfo>();
  /** Worker ids in lane order (order of appearance). */
  readonly lanes: number[] = [];
  readonly laneIndex = new Map<number, LaneIndex>();

  // task table, one row per received task (row r is protocol index `index[r]`)
  readonly taskIndex = new Column(Int32Array);
  readonly taskGroup = new Column(Uint16Array);
  readonly taskWorker = new Column(Uint16Array);
  readonly taskStatus = new Column(Uint8Array);
  readonly taskSubmit = new Column(Float64Array);
  readonly taskStart = new Column(Float64Array);
  readonly taskStop = new Column(Float64Array);
  /** Span id of each row (protocol 1.2; 0: no span, or none sent). */
  readonly taskSpan = new Column(Uint16Array);
  /** Span paths by id (protocol 1.2 `spans`; empty: the run has none). */
  readonly spanNames = new Map<number, string>();
  /** Earliest submit/start and latest stop seen (seconds since t0). */
  tMin = Infinity;
  tMax = -Infinity;
  taskErrors = 0;

  /** The run's total resource samples (batches without a `source`). */
  readonly resources = new ResourceSeries();
  /** Samples of each worker process, by source label (order of appearance). */
  readonly resourceSources = new Map<string, ResourceSeries>();

  get resTime(): Column<Float64Array> {
    return this.resources.time;
  }

  get resCpu(): Column<Float32Array> {
    return this.resources.cpu;
  }

  get resMemory(): Column<Float64Array> {
    return this.resources.memory;
  }

  get resProcesses(): Column<Uint16Array> {
    return this.resources.processes;
  }

  /** Cache occupancy per group: time and metric columns. */
  readonly cache = new Map<
    number,
    { time: Column<Float64Array>; metric: Column<Float64Array> }
  >();
  cacheMax = 0;

  readonly progress = new Map<number, IGroupProgress>();

  readonly cycles: IStackCycle[] = [];
  /** All cycles merged, per group name. */
  readonly stacks = new Map<string, IFlameNode>();
  stackSamples = 0;
  /**
   * Source text of the run's sampled functions, by node identifier (protocol 1.3
   * `sources`, merged as they arrive; empty from an older kernel).
   */
  readonly functionSources = new Map<string, ISourceInfo>();

  /** Task keys fetched so far, by protocol index. */
  readonly keys = new Map<number, string>();
  kernelSummary: Record<string, unknown> = {};
  dropped: { [what: string]: number } = {};
  droppedMessages = 0;
  droppedRows = 0;
  errors: unknown[] = [];
  /** Parts recorded in a reduced way and why (from run_end). */
  reduced: { [part: string]: string } = {};
  /** The top findings, largest impact first (from run_end's summary; [] until then). */
  findings: IFinding[] = [];
  /** Entries of the summary's findings dropped as malformed. */
  findingsDropped = 0;
  /** What a cluster run holds beyond compute (protocol 1.2; empty otherwise). */
  readonly tables = new ClusterTables();
  private _mask: { selected: string; size: number; mask: Uint8Array } | null =
    null;
  private _findingMask: {
    finding: IFinding;
    n: number;
    mask: Uint8Array | null;
  } | null = null;
  private _counts: {
    selected: string;
    n: number;
    size: number;
    counts: ISpanCounts;
  } | null = null;

  get taskCount(): number {
    return this.taskIndex.length;
  }

  /**
   * Per task row, 1 when finding `finding` (one of `findings`) names it; null when it
   * names nothing. Kept until rows arrive.
   */
  findingMask(finding: IFinding): Uint8Array | null {
    const n = this.taskCount;
    const cached = this._findingMask;
    if (cached?.finding !== finding || cached.n !== n) {
      const ids = groupIdsNamed(this.groups, finding.groups);
      const data = [this.taskIndex.data, this.taskGroup.data] as const;
      const mask = highlightMask(finding, ...data, n, ids);
      this._findingMask = { finding, n, mask };
    }
    return this._findingMask!.mask;
  }

  /** Whether the run has spans (a selector is shown only then). */
  get hasSpans(): boolean {
    return this.spanNames.size > 0;
  }

  /** The span paths a selector lists: each span and its parents, sorted. */
  spanPaths(): string[] {
    return spanPaths(this.spanNames.values());
  }

  /** Per span id, 1 when it is in span `selected` (or a sub-span of it). */
  spanMask(selected: string): Uint8Array {
    if (
      this._mask?.selected !== selected ||
      this._mask.size !== this.spanNames.size
    ) {
      this._mask = {
        selected,
        size: this.spanNames.size,
        mask: spanMask(this.spanNames, selected)
      };
    }
    return this._mask.mask;
  }

  /** Tasks, failures and per-group counts of span `selected` (kept until rows arrive). */
  spanCounts(selected: string): ISpanCounts {
    const n = this.taskCount;
    const cached = this._counts;
    if (
      cached?.selected === selected &&
      cached.n === n &&
      cached.size === this.spanNames.size
    ) {
      return cached.counts;
    }
    const counts = spanCounts(
      this.spanMask(selected),
      this.taskSpan.data,
      this.taskGroup.data,
      this.taskStatus.data,
      n
    );
    this._counts = { selected, n, size: this.spanNames.size, counts };
    return counts;
  }

  get resourceCount(): number {
    return this.resTime.length;
  }

  /**
   * The worker processes' series by label (numbers compared as numbers): the same order
   * however their batches arrived, live or replayed.
   */
  sources(): [string, ResourceSeries][] {
    return [...this.resourceSources].sort((a, b) => compareNatural(a[0], b[0]));
  }

  /** The run's time extent in seconds since t0 ([0, 0] when empty). */
  extent(): [number, number] {
    let lo = Number.isFinite(this.tMin) ? Math.min(0, this.tMin) : 0;
    let hi = Number.isFinite(this.tMax) ? this.tMax : 0;
    for (const series of [this.resources, ...this.resourceSources.values()]) {
      const n = series.length;
      if (n > 0) {
        lo = Math.min(lo, series.time.data[0]);
        hi = Math.max(hi, series.time.data[n - 1]);
      }
    }
    const tables = this.tables.extent();
    if (tables) {
      lo = Math.min(lo, tables[0]);
      hi = Math.max(hi, tables[1]);
    }
    const wall = this.kernelSummary.wall_time;
    if (typeof wall === 'number' && Number.isFinite(wall)) {
      hi = Math.max(hi, wall);
    }
    return [lo, hi > lo ? hi : lo + 1];
  }

  /** Group info for an id, or a placeholder when the kernel never named it. */
  group(id: number): IGroupInfo {
    return (
      this.groups[id] ?? {
        id,
        name: `group ${id}`,
        color: groupColor(`group ${id}`, undefined)
      }
    );
  }

  summary(): IRunSummary {
    const k = this.kernelSummary;
    const num = (v: unknown): number | null =>
      typeof v === 'number' && Number.isFinite(v) ? v : null;
    let peak = num(k.peak_memory);
    let cpuSum = 0;
    const n = this.resTime.length;
    for (let i = 0; i < n; i++) {
      peak = Math.max(peak ?? 0, this.resMemory.data[i]);
      cpuSum += this.resCpu.data[i];
    }
    const [lo, hi] = this.extent();
    const dropped: { [what: string]: number } = {};
    for (const [what, count] of Object.entries(this.dropped)) {
      if (count > 0) {
        dropped[what] = count;
      }
    }
    if (this.droppedRows > 0 || this.droppedMessages > 0) {
      dropped.messages = this.droppedMessages;
      dropped.rows = this.droppedRows;
    }
    return {
      wallTime:
        num(k.wall_time) ??
        (Number.isFinite(this.tMax) ? hi - Math.min(0, lo) : 0),
      tasks: Math.max(this.taskCount, num(k.tasks) ?? 0),
      errors: Math.max(this.taskErrors, num(k.errors) ?? 0),
      groups: this.groupsByName.size,
      workers: this.workers.size,
      peakMemory: peak,
      meanCpu: n > 0 ? cpuSum / n : num(k.mean_cpu),
      dropped,
      cluster: clusterSummary(k),
      reduced: { ...this.reduced },
      clusterWorkers:
        this.tables.workers.length > 0 ? workersLine(this.tables.workers) : '',
      transferred:
        this.tables.transfers.length > 0
          ? this.tables.transfers.totalBytes
          : null
    };
  }
}

function runKey(id: RunId): string {
  return `${typeof id}:${id}`;
}

/** The model of the panel: the runs received from one kernel, and the selected run. */
export class ProfileModel {
  /** Emitted at most once per animation frame with what changed. */
  get changed(): ISignal<this, Set<ChangeKind>> {
    return this._changed;
  }

  /** Emitted when an export the panel asked for arrives. */
  get exported(): ISignal<this, IExportMessage> {
    return this._exported;
  }

  /** The runs, oldest first. */
  get runs(): readonly RunData[] {
    return this._runs;
  }

  /** The run the views show (the newest unless the user picked another), or null. */
  get current(): RunData | null {
    return this._current;
  }

  get paused(): boolean {
    return this._paused;
  }

  /** The last error the kernel reported (e.g. a failed export), or null. */
  get lastError(): string | null {
    return this._lastError;
  }

  /** Messages rejected as malformed since the model was created. */
  get rejected(): number {
    return this._rejected;
  }

  /**
   * The span the views show (its sub-spans included), or null for all tasks: the one
   * picked, while the current run has it.
   */
  get spanFilter(): string | null {
    const picked = this._spanFilter;
    const run = this._current;
    return picked !== null && run?.spanPaths().includes(picked) ? picked : null;
  }

  /** Show only span `path` (and its sub-spans) in every view; null: all tasks. */
  setSpanFilter(path: string | null): void {
    if (path !== this._spanFilter) {
      this._spanFilter = path;
      this._mark('filter');
    }
  }

  /** The finding picked (highlighted in the views) of the current run, or null. */
  get highlight(): IFinding | null {
    const picked = this._highlight;
    return picked && picked.run === this._current ? picked.finding : null;
  }

  /**
   * Highlight `finding` (one of the current run's findings) in every view; null, or the
   * finding already picked, clears it.
   */
  setHighlight(finding: IFinding | null): void {
    const run = this._current;
    const next =
      finding && run?.findings.includes(finding) && finding !== this.highlight
        ? { run, finding }
        : null;
    if (next?.finding !== this._highlight?.finding) {
      this._highlight = next;
      this._mark('highlight');
    }
  }

  /** Per task row of the current run, 1 when the picked finding names it; else null. */
  highlightMask(run: RunData): Uint8Array | null {
    const finding = run === this._current ? this.highlight : null;
    return finding ? run.findingMask(finding) : null;
  }

  /** Per span id of the current run, 1 when shown; null when no span is picked. */
  spanMask(run: RunData): Uint8Array | null {
    const selected = run === this._current ? this.spanFilter : null;
    return selected === null ? null : run.spanMask(selected);
  }

  /** Most runs kept (the oldest are forgotten). */
  maxRuns = 20;

  /** Where requests go; null while not connected. */
  set sender(sender: Sender | null) {
    this._sender = sender;
  }

  get connected(): boolean {
    return this._sender !== null;
  }

  /** Show run `id` (and stop following new runs unless it is the newest). */
  select(id: RunId): void {
    const run = this._find(id);
    if (run && run !== this._current) {
      this._current = run;
      this._follow = run === this._runs[this._runs.length - 1];
      this._mark('current');
    }
  }

  /** Forget every run (a new kernel connection replays the kept ones). */
  reset(hello: IHelloMessage | null = null): void {
    this._runs = [];
    this._byKey.clear();
    this._current = null;
    this._follow = true;
    this._paused = hello?.paused ?? false;
    this._lastError = null;
    this._mark('runs', 'current', 'state');
  }

  /**
   * Handle one message from the kernel (JSON data + binary buffers). Malformed messages
   * are logged and ignored; unknown types are ignored. Returns whether it was applied.
   */
  handle(data: unknown, buffers: DataView[] = []): boolean {
    let msg: KernelMessage | null;
    try {
      msg = decodeMessage(data, buffers);
    } catch (reason) {
      this._rejected++;
      console.error(
        'daskprofile: rejected a malformed message:',
        String(reason)
      );
      return false;
    }
    if (msg === null) {
      return false;
    }
    try {
      return this._apply(msg);
    } catch (reason) {
      this._rejected++;
      console.error('daskprofile: could not apply a message:', String(reason));
      this._mark('rejected');
      return false;
    }
  }

  /** Ask the kernel for the keys of task rows `rows` of `run` (the ones not known yet). */
  requestKeys(run: RunData, rows: number[]): void {
    const indices: number[] = [];
    for (const r of rows) {
      if (r < 0 || r >= run.taskCount) {
        continue;
      }
      const index = run.taskIndex.data[r];
      if (
        !run.keys.has(index) &&
        !this._pendingKeys.has(`${runKey(run.id)}#${index}`)
      ) {
        indices.push(index);
      }
    }
    if (indices.length === 0 || !this._sender) {
      return;
    }
    for (let i = 0; i < indices.length; i += MAX_KEYS_PER_REQUEST) {
      const chunk = indices.slice(i, i + MAX_KEYS_PER_REQUEST);
      chunk.forEach(index =>
        this._pendingKeys.add(`${runKey(run.id)}#${index}`)
      );
      this._sender({ type: 'keys', run: run.id, indices: chunk });
    }
  }

  /** The key of task row `row`, if fetched. */
  keyOf(run: RunData, row: number): string | undefined {
    return row >= 0 && row < run.taskCount
      ? run.keys.get(run.taskIndex.data[row])
      : undefined;
  }

  /** Pause or resume live messages. */
  setPaused(paused: boolean): void {
    this._sender?.({ type: paused ? 'pause' : 'resume' });
  }

  /** Ask the kernel to send `run` again (all kept runs when null). */
  replay(run: RunData | null): void {
    this._sender?.(run ? { type: 'replay', run: run.id } : { type: 'replay' });
  }

  /** Ask for an export of `run` in `format`; the file arrives through `exported`. */
  requestExport(run: RunData, format: ExportFormat): void {
    this._sender?.({ type: 'export', run: run.id, format });
  }

  /** Emit pending changes now (tests; the views otherwise get them once per frame). */
  flush(): void {
    this._scheduled = false;
    if (this._pending.size === 0) {
      return;
    }
    const changes = this._pending;
    this._pending = new Set();
    this._changed.emit(changes);
  }

  dispose(): void {
    this._sender = null;
    Signal.clearData(this);
  }

  // ------------------------------------------------------------------ applying

  private _apply(msg: KernelMessage): boolean {
    switch (msg.type) {
      case 'hello':
        this.reset(msg);
        return true;
      case 'state':
        this._paused = msg.paused;
        this._mark('state');
        return true;
      case 'error':
        this._lastError = `${msg.code}: ${msg.message}`;
        console.warn('daskprofile: the kernel reported', this._lastError);
        this._mark('error');
        return true;
      case 'export':
        this._exported.emit(msg);
        return true;
      case 'run_start':
        this._runStart(msg.run, msg.t0, msg.wall0, msg.title, msg.options);
        return true;
    }
    const run = this._find(msg.run);
    if (!run) {
      throw new Error(`${msg.type}: unknown run ${JSON.stringify(msg.run)}`);
    }
    switch (msg.type) {
      case 'groups':
        this._groups(run, msg);
        break;
      case 'workers':
        this._workers(run, msg);
        break;
      case 'tasks':
        this._tasks(run, msg);
        break;
      case 'spans':
        this._spans(run, msg);
        break;
      case 'resources':
        this._resources(run, msg);
        break;
      case 'cache':
        this._cache(run, msg);
        break;
      case 'progress':
        this._progress(run, msg);
        break;
      case 'stacks':
        this._stacks(run, msg);
        break;
      case 'sources':
        for (const [identifier, info] of Object.entries(msg.sources)) {
          run.functionSources.set(identifier, info);
        }
        this._mark('sources');
        break;
      case 'keys':
        msg.indices.forEach((index, i) => {
          run.keys.set(index, msg.keys[i]);
          this._pendingKeys.delete(`${runKey(run.id)}#${index}`);
        });
        this._mark('keys');
        break;
      case 'run_end':
        this._runEnd(run, msg);
        break;
      case 'dropped':
        run.droppedMessages = msg.messages;
        run.droppedRows = msg.rows;
        this._mark('summary');
        break;
      default:
        this._applyTables(run, msg);
    }
    return true;
  }

  /** The cluster tables of protocol 1.2. */
  private _applyTables(run: RunData, msg: KernelMessage): void {
    switch (msg.type) {
      case 'actions':
        this._actions(run, msg);
        break;
      case 'memory':
        run.tables.addMemory(msg);
        this._mark('memory', 'summary');
        break;
      case 'transfers':
        run.tables.transfers.append(msg);
        this._mark('transfers', 'summary');
        break;
      case 'exceptions':
        run.tables.exceptions.add(msg);
        this._mark('exceptions', 'summary');
        break;
      case 'cluster_workers':
        run.tables.setWorkers(msg.workers);
        this._mark('clusterWorkers', 'summary');
        break;
      case 'reruns': // comes with the cluster_workers of the worker that left
        run.tables.reruns.add(msg);
        this._mark('clusterWorkers');
        break;
    }
  }

  private _actions(run: RunData, msg: IActionsMessage): void {
    run.tables.actions.append(msg);
    let last = -1;
    for (const w of msg.worker) {
      if (w !== last) {
        this._ensureLane(run, w);
        last = w;
      }
    }
    this._mark('actions', 'summary');
  }

  /** A lane for worker `w`, named as a placeholder if the kernel never did. */
  private _ensureLane(run: RunData, w: number): void {
    if (!run.workers.has(w)) {
      run.workers.set(w, { id: w, label: `worker ${w}`, kind: 'unknown' });
      run.lanes.push(w);
    }
  }

  private _runStart(
    id: RunId,
    t0: number,
    wall0: number,
    title: string | null,
    options: Record<string, unknown>
  ): void {
    const key = runKey(id);
    const old = this._byKey.get(key);
    const run = new RunData(id, t0, wall0, title);
    run.options = options;
    if (old) {
      // a replay of a run we hold: start it afresh in place
      this._runs[this._runs.indexOf(old)] = run;
      if (this._current === old) {
        this._current = run;
      }
    } else {
      this._runs.push(run);
      while (this._runs.length > Math.max(1, this.maxRuns)) {
        const gone = this._runs.shift()!;
        this._byKey.delete(runKey(gone.id));
        if (this._current === gone) {
          this._current = null;
        }
      }
    }
    this._byKey.set(key, run);
    if (this._follow || this._current === null) {
      this._current = this._runs[this._runs.length - 1];
      this._follow = true;
    }
    this._mark('runs', 'current');
  }

  private _groups(run: RunData, msg: IGroupsMessage): void {
    msg.ids.forEach((id, i) => {
      const name = msg.names[i];
      const info = { id, name, color: groupColor(name, msg.colors[i]) };
      run.groups[id] = info;
      run.groupsByName.set(name, info);
    });
    this._mark('tasks', 'summary');
  }

  private _workers(run: RunData, msg: IWorkersMessage): void {
    msg.ids.forEach((id, i) => {
      if (!run.workers.has(id)) {
        run.lanes.push(id);
      }
      run.workers.set(id, { id, label: msg.labels[i], kind: msg.kinds[i] });
    });
    this._mark('tasks', 'summary');
  }

  private _tasks(run: RunData, msg: ITasksMessage): void {
    const { n, base } = msg;
    for (const col of [
      run.taskIndex,
      run.taskGroup,
      run.taskWorker,
      run.taskStatus,
      run.taskSubmit,
      run.taskStart,
      run.taskStop,
      run.taskSpan
    ]) {
      col.reserve(n);
    }
    run.taskSpan.append(msg.span ?? new Uint16Array(n));
    const row0 = run.taskCount;
    run.taskGroup.append(msg.group);
    run.taskWorker.append(msg.worker);
    run.taskStatus.append(msg.status);
    run.taskSubmit.append(msg.submit, base);
    run.taskStart.append(msg.start, base);
    run.taskStop.append(msg.stop, base);
    const index = run.taskIndex;
    for (let j = 0; j < n; j++) {
      index.push(msg.first + j);
    }
    const starts = run.taskStart.data;
    const stops = run.taskStop.data;
    const submits = run.taskSubmit.data;
    let lastWorker = -1;
    let lane: LaneIndex | undefined;
    for (let r = row0; r < row0 + n; r++) {
      const w = run.taskWorker.data[r];
      if (w !== lastWorker) {
        lane = run.laneIndex.get(w);
        if (!lane) {
          lane = new LaneIndex();
          run.laneIndex.set(w, lane);
          this._ensureLane(run, w);
        }
        lastWorker = w;
      }
      const s = starts[r];
      const e = stops[r];
      lane!.push(r, s, e, run.taskGroup.data[r]);
      const lo = Math.min(s, submits[r]);
      if (lo < run.tMin) {
        run.tMin = lo;
      }
      if (e > run.tMax) {
        run.tMax = e;
      }
      if (run.taskStatus.data[r] !== 0) {
        run.taskErrors++;
      }
    }
    this._mark('tasks', 'summary');
  }

  private _spans(run: RunData, msg: ISpansMessage): void {
    msg.ids.forEach((id, i) => run.spanNames.set(id, msg.names[i]));
    this._mark('spans', 'summary');
  }

  private _resources(run: RunData, msg: IResourcesMessage): void {
    let series = run.resources;
    if (msg.source !== null) {
      series = run.resourceSources.get(msg.source) ?? new ResourceSeries();
      run.resourceSources.set(msg.source, series);
    }
    series.append(msg);
    this._mark('resources', 'summary');
  }

  private _cache(run: RunData, msg: ICacheMessage): void {
    for (let i = 0; i < msg.n; i++) {
      const g = msg.group[i];
      let series = run.cache.get(g);
      if (!series) {
        series = {
          time: new Column(Float64Array),
          metric: new Column(Float64Array)
        };
        run.cache.set(g, series);
      }
      series.time.push(msg.time[i] + msg.base);
      series.metric.push(msg.metric[i]);
      if (msg.metric[i] > run.cacheMax) {
        run.cacheMax = msg.metric[i];
      }
    }
    this._mark('cache');
  }

  private _progress(run: RunData, msg: IProgressMessage): void {
    msg.groups.forEach((group, i) => {
      run.progress.set(group, {
        group,
        total: msg.total[i],
        done: msg.done[i],
        erred: msg.erred[i]
      });
    });
    this._mark('progress');
  }

  private _stacks(run: RunData, msg: IStacksMessage): void {
    const trees = new Map<string, IFlameNode>();
    for (const [group, tree] of Object.entries(msg.trees)) {
      const node = flameNode('root', group);
      mergeStackTree(node, tree);
      trees.set(group, node);
      let total = run.stacks.get(group);
      if (!total) {
        total = flameNode('root', group);
        run.stacks.set(group, total);
      }
      mergeFlame(total, node);
      run.stackSamples += node.count;
    }
    run.cycles.push({ tStart: msg.tStart, tEnd: msg.tEnd, trees });
    this._mark('stacks');
  }

  private _runEnd(run: RunData, msg: IRunEndMessage): void {
    run.finished = true;
    run.kernelSummary = msg.summary;
    run.dropped = msg.dropped;
    run.errors = msg.errors;
    run.reduced = msg.reduced;
    run.findings = msg.findings;
    run.findingsDropped = msg.findingsDropped;
    if (msg.findingsDropped > 0) {
      console.warn(
        `daskprofile: dropped ${msg.findingsDropped} malformed finding(s) of run ${String(msg.run)}`
      );
    }
    this._mark('summary', 'runs');
  }

  private _find(id: RunId): RunData | undefined {
    return this._byKey.get(runKey(id));
  }

  private _mark(...kinds: ChangeKind[]): void {
    for (const k of kinds) {
      this._pending.add(k);
    }
    if (this._scheduled) {
      return;
    }
    this._scheduled = true;
    if (typeof requestAnimationFrame === 'function') {
      requestAnimationFrame(() => this.flush());
    } else {
      setTimeout(() => this.flush(), 16);
    }
  }

  private _runs: RunData[] = [];
  private _byKey = new Map<string, RunData>();
  private _current: RunData | null = null;
  private _follow = true;
  private _spanFilter: string | null = null;
  private _highlight: { run: RunData; finding: IFinding } | null = null;
  private _paused = false;
  private _lastError: string | null = null;
  private _rejected = 0;
  private _sender: Sender | null = null;
  private _pendingKeys = new Set<string>();
  private _pending = new Set<ChangeKind>();
  private _scheduled = false;
  private _changed = new Signal<this, Set<ChangeKind>>(this);
  private _exported = new Signal<this, IExportMessage>(this);
}

/** Merged flame trees of `run` for cycles overlapping [t0, t1] (all cycles when null). */
export function stacksInRange(
  run: RunData,
  range: [number, number] | null
): Map<string, IFlameNode> {
  if (range === null) {
    return run.stacks;
  }
  const [a, b] = range;
  const out = new Map<string, IFlameNode>();
  for (const cycle of run.cycles) {
    if (cycle.tEnd < a || cycle.tStart > b) {
      continue;
    }
    for (const [group, tree] of cycle.trees) {
      let total = out.get(group);
      if (!total) {
        total = flameNode('root', group);
        out.set(group, total);
      }
      mergeFlame(total, tree);
    }
  }
  return out;
}
