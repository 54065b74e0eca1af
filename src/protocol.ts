/**
 * The daskprofile comm protocol, as written down in docs/protocol.md.
 *
 * Pure types and strict decoders: no DOM, no JupyterLab imports, so the TypeScript unit
 * tests can decode the shared JSON fixtures exactly as the panel does. A decoder either
 * returns a fully typed message or throws a ProtocolError naming the first bad field.
 */

import { decodeFindings, IFinding } from './findings';

/** Name of the comm target the kernel side registers. */
export const COMM_TARGET = 'daskprofile';

/**
 * Protocol version this frontend speaks; sent in the comm-open metadata. 1.1 added the
 * optional `source` of `resources` batches; 1.2 the cluster tables (`actions`, `memory`,
 * `exceptions`, `cluster_workers`, `transfers`) and spans (`spans`, the `span` column of
 * `tasks`), sent only to a panel announcing 1.2; 1.3 the functions' `sources` (for the
 * source view), sent only to a panel announcing 1.3. An older kernel (which never sends
 * them) is fine: the source view then shows the line counts without the text.
 */
export const PROTOCOL_VERSION = '1.3';

/** Key of the protocol version in comm-open metadata. */
export const PROTOCOL_METADATA_KEY = 'daskprofile_protocol';

/** Silent code that registers the comm target in a kernel (idempotent). */
export const BOOTSTRAP_CODE =
  'import daskprofile.jupyter.comm as _daskprofile_comm\n' +
  '_daskprofile_comm.register_target()\n' +
  'del _daskprofile_comm';

/** Command the panel suggests when the kernel lacks daskprofile. */
export const INSTALL_HINT = '%pip install daskprofile';

/** Most task indices one `keys` request may carry. */
export const MAX_KEYS_PER_REQUEST = 10000;

/** Export formats the kernel knows. */
export type ExportFormat = 'html' | 'trace' | 'speedscope' | 'run';

/** A run id as the kernel sends it (echoed back unchanged in requests). */
export type RunId = number | string;

/** A malformed message: the panel logs it and ignores the message. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

/** The kernel's answer to the panel's hello. */
export interface IHelloMessage {
  type: 'hello';
  protocol: string;
  versions: { [name: string]: string };
  pid: number;
  paused: boolean;
  history: number;
}

/** An error the kernel reports (bad request, incompatible protocol). */
export interface IErrorMessage {
  type: 'error';
  code: string;
  message: string;
  request: string | null;
}

export interface IRunStartMessage {
  type: 'run_start';
  run: RunId;
  t0: number;
  wall0: number;
  options: Record<string, unknown>;
  title: string | null;
}

export interface IGroupsMessage {
  type: 'groups';
  run: RunId;
  ids: number[];
  names: string[];
  colors: string[];
}

export interface IWorkersMessage {
  type: 'workers';
  run: RunId;
  ids: number[];
  labels: string[];
  kinds: string[];
}

export interface ITasksMessage {
  type: 'tasks';
  run: RunId;
  n: number;
  base: number;
  first: number;
  group: Uint16Array;
  worker: Uint16Array;
  status: Uint8Array;
  submit: Float32Array;
  start: Float32Array;
  stop: Float32Array;
  /** Span ids (protocol 1.2, of `spans` messages; 0: no span), or null: none sent. */
  span: Uint16Array | null;
}

/** New spans of a run (protocol 1.2): ids of the `span` column and their paths. */
export interface ISpansMessage {
  type: 'spans';
  run: RunId;
  ids: number[];
  /** Span paths, e.g. `load/clean` (text from the kernel). */
  names: string[];
}

export interface IResourcesMessage {
  type: 'resources';
  run: RunId;
  /** The worker process measured (protocol 1.1), or null for the run's total. */
  source: string | null;
  n: number;
  base: number;
  time: Float32Array;
  cpu: Float32Array;
  memory: Float64Array;
  processes: Uint16Array;
}

export interface ICacheMessage {
  type: 'cache';
  run: RunId;
  n: number;
  base: number;
  time: Float32Array;
  group: Uint16Array;
  metric: Float64Array;
}

export interface IProgressMessage {
  type: 'progress';
  run: RunId;
  groups: number[];
  total: number[];
  done: number[];
  erred: number[];
}

/** A stack tree node, in distributed's nested profile form. */
export interface IStackTree {
  identifier: string;
  name: string;
  filename: string;
  line: number;
  count: number;
  /** Samples at each line of this node's function: [line number, samples] (may be []). */
  lines: [number, number][];
  children: IStackTree[];
}

export interface IStacksMessage {
  type: 'stacks';
  run: RunId;
  tStart: number;
  tEnd: number;
  trees: { [group: string]: IStackTree };
}

/** The source text of one function (protocol 1.3), as the kernel found it. */
export interface ISourceInfo {
  /** File as the user knows it: a path, or `Cell In[5]` for a notebook cell. */
  file: string;
  name: string;
  /** Line number of `text[0]`. */
  start: number;
  /** The function's lines, without newlines (data: shown as text only). */
  text: string[];
}

/** Sources of functions sampled in a run, by node identifier (protocol 1.3). */
export interface ISourcesMessage {
  type: 'sources';
  run: RunId;
  sources: { [identifier: string]: ISourceInfo };
}

export interface IKeysMessage {
  type: 'keys';
  run: RunId;
  indices: number[];
  keys: string[];
}

export interface IRunEndMessage {
  type: 'run_end';
  run: RunId;
  summary: Record<string, unknown>;
  dropped: { [what: string]: number };
  errors: unknown[];
  /**
   * Parts recorded in a reduced way and why (protocol 1.1, optional: e.g. the stacks and
   * resources of cluster workers without daskprofile); {} when absent.
   */
  reduced: { [part: string]: string };
  /** The summary's top findings (`summary.findings`, additive); [] when absent. */
  findings: IFinding[];
  /** Entries of `summary.findings` dropped as malformed. */
  findingsDropped: number;
}

export interface IDroppedMessage {
  type: 'dropped';
  run: RunId;
  messages: number;
  rows: number;
}

export interface IStateMessage {
  type: 'state';
  paused: boolean;
}

export interface IExportMessage {
  type: 'export';
  run: RunId;
  format: string;
  filename: string;
  mime: string;
  bytes: Uint8Array;
}

/**
 * Kinds of `actions` rows (protocol 1.2), by their `action` code: what a task did on its
 * worker besides compute.
 */
export const ACTION_KINDS = [
  'transfer',
  'disk-read',
  'disk-write',
  'deserialize'
] as const;

/** Non-compute intervals of tasks on cluster workers (protocol 1.2). */
export interface IActionsMessage {
  type: 'actions';
  run: RunId;
  n: number;
  base: number;
  /** Row index of the first row in the run's action table. */
  first: number;
  /** Lane ids (of `workers` messages). */
  worker: Uint16Array;
  /** Index into ACTION_KINDS (a larger code: a kind this panel does not know). */
  action: Uint8Array;
  group: Uint16Array;
  start: Float32Array;
  stop: Float32Array;
  /** Bytes moved or read/written; NaN when not known. */
  bytes: Float64Array;
}

/** Memory samples of one cluster worker (protocol 1.2). */
export interface IMemoryMessage {
  type: 'memory';
  run: RunId;
  n: number;
  base: number;
  /** The worker's address. */
  source: string;
  /** The worker's memory limit in bytes (0: none). */
  limit: number;
  time: Float32Array;
  managed: Float64Array;
  unmanaged: Float64Array;
  spilled: Float64Array;
}

/** A task that raised (text cut by the kernel to a few KB; shown as text only). */
export interface IExceptionRow {
  key: string;
  group: string;
  worker: string;
  /** Seconds since the run's t0. */
  time: number;
  type: string;
  message: string;
  traceback: string;
}

/** Tasks that raised (protocol 1.2). */
export interface IExceptionsMessage {
  type: 'exceptions';
  run: RunId;
  /** Index of the first row in the run's exceptions table. */
  first: number;
  rows: IExceptionRow[];
  /** Failures the kernel did not keep (so far). */
  dropped: number;
}

/** A worker of a cluster run, as `cluster_workers` lists it. */
export interface IClusterWorker {
  address: string;
  name: string;
  host: string;
  threads: number;
  /** Bytes (0: none). */
  memoryLimit: number;
  /** Seconds since t0, or null: there before the run. */
  joined: number | null;
  /** Seconds since t0, or null: still there. */
  left: number | null;
  /** Why it left (`closed`, `retired`, `lost`, `timed out`, ...), or null. */
  reason: string | null;
}

/** The whole set of a run's cluster workers, sent when it changes (protocol 1.2). */
export interface IClusterWorkersMessage {
  type: 'cluster_workers';
  run: RunId;
  workers: IClusterWorker[];
}

/**
 * Task rows whose work a worker that left took with it, so the task ran again (protocol
 * 1.2): per row why (`lost`: its result was there; `interrupted`: it was running there;
 * `killed`: it failed with KilledWorker) and the address of the worker that left.
 */
export interface IRerunsMessage {
  type: 'reruns';
  run: RunId;
  /** Indices in the run's task table. */
  rows: number[];
  why: string[];
  workers: string[];
}

/** Rows of the workers' transfer logs (protocol 1.2). */
export interface ITransfersMessage {
  type: 'transfers';
  run: RunId;
  n: number;
  base: number;
  /** New worker addresses, appended to the run's address list (ids index it). */
  addresses: string[];
  start: Float32Array;
  stop: Float32Array;
  source: Uint16Array;
  destination: Uint16Array;
  bytes: Float64Array;
  /** 1: logged by the destination, 0: by the source. */
  incoming: Uint8Array;
  /**
   * Protocol 1.3: the type of the data each row moved (the wire's `type` column), an id
   * into the run's type names (`types` appended in order), or null: the batch carries
   * none (an older kernel).
   */
  dataType: Uint16Array | null;
  /** New type names (1.3), appended to the run's list ('': not known); [] if none. */
  types: string[];
}

/** Every message the kernel may send. */
export type KernelMessage =
  | IHelloMessage
  | IErrorMessage
  | IRunStartMessage
  | IGroupsMessage
  | IWorkersMessage
  | ITasksMessage
  | IResourcesMessage
  | ICacheMessage
  | IProgressMessage
  | IStacksMessage
  | IKeysMessage
  | IRunEndMessage
  | IDroppedMessage
  | IStateMessage
  | IExportMessage
  | IActionsMessage
  | IMemoryMessage
  | IExceptionsMessage
  | IClusterWorkersMessage
  | IRerunsMessage
  | ITransfersMessage
  | ISpansMessage
  | ISourcesMessage;

/** Major part of a "major.minor" version string, or NaN. */
export function majorVersion(version: unknown): number {
  if (typeof version !== 'string') {
    return NaN;
  }
  const match = /^(\d+)\.\d+$/.exec(version);
  return match ? Number(match[1]) : NaN;
}

/** Whether a peer speaking `version` can talk to this frontend. */
export function isCompatible(version: unknown): boolean {
  return majorVersion(version) === majorVersion(PROTOCOL_VERSION);
}

/** What a kernel's first answer means for the connection. */
export type HelloOutcome =
  | { status: 'connected'; hello: IHelloMessage }
  | { status: 'incompatible' | 'error'; detail: string };

/**
 * Judge the kernel's first message: its hello (checked for a compatible protocol), or the
 * error a kernel of another major version answers with. Never throws.
 */
export function checkHello(data: unknown): HelloOutcome {
  if (isRecord(data) && data.type === 'error') {
    return {
      status: 'incompatible',
      detail: String(data.message ?? 'refused')
    };
  }
  let hello: IHelloMessage;
  try {
    hello = parseHello(data);
  } catch (reason) {
    return { status: 'error', detail: String(reason) };
  }
  if (!isCompatible(hello.protocol)) {
    return {
      status: 'incompatible',
      detail:
        `the kernel speaks protocol ${hello.protocol}, this panel ${PROTOCOL_VERSION}: ` +
        'install matching versions of daskprofile in the kernel and in JupyterLab ' +
        `(${INSTALL_HINT} -U)`
    };
  }
  return { status: 'connected', hello };
}

// ------------------------------------------------------------------ field checks

type Obj = Record<string, unknown>;

function isRecord(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fail(type: string, what: string): never {
  throw new ProtocolError(`${type}: ${what}`);
}

function num(d: Obj, key: string, type: string): number {
  const v = d[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    fail(type, `"${key}" must be a finite number`);
  }
  return v;
}

function count(d: Obj, key: string, type: string): number {
  const v = num(d, key, type);
  if (!Number.isInteger(v) || v < 0) {
    fail(type, `"${key}" must be a non-negative integer`);
  }
  return v;
}

function str(d: Obj, key: string, type: string): string {
  const v = d[key];
  if (typeof v !== 'string') {
    fail(type, `"${key}" must be a string`);
  }
  return v;
}

function runId(d: Obj, type: string): RunId {
  const v = d.run;
  if (typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))) {
    return v;
  }
  fail(type, '"run" must be a string or a number');
}

function intList(d: Obj, key: string, type: string): number[] {
  const v = d[key];
  if (!Array.isArray(v) || !v.every(x => Number.isInteger(x) && x >= 0)) {
    fail(type, `"${key}" must be a list of non-negative integers`);
  }
  return v as number[];
}

function strList(d: Obj, key: string, type: string): string[] {
  const v = d[key];
  if (!Array.isArray(v) || !v.every(x => typeof x === 'string')) {
    fail(type, `"${key}" must be a list of strings`);
  }
  return v as string[];
}

/** A finite number or null (absent counts as null). */
function numOrNull(d: Obj, key: string, type: string): number | null {
  return d[key] === null || d[key] === undefined ? null : num(d, key, type);
}

/** A string or null (absent counts as null). */
function strOrNull(d: Obj, key: string, type: string): string | null {
  return d[key] === null || d[key] === undefined ? null : str(d, key, type);
}

/** A list of objects. */
function recordList(d: Obj, key: string, type: string): Obj[] {
  const v = d[key];
  if (!Array.isArray(v) || !v.every(isRecord)) {
    fail(type, `"${key}" must be a list of objects`);
  }
  return v as Obj[];
}

function sameLength(type: string, lists: { [key: string]: unknown[] }): void {
  const entries = Object.entries(lists);
  const n = entries[0][1].length;
  for (const [key, list] of entries) {
    if (list.length !== n) {
      fail(type, `"${key}" has ${list.length} items, expected ${n}`);
    }
  }
}

// ------------------------------------------------------------------ binary columns

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

interface ITypedArrayCtor<T> {
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): T;
  new (length: number): T;
  readonly BYTES_PER_ELEMENT: number;
}

type Reader = (view: DataView, offset: number) => number;

/** A typed array over a little-endian buffer (copied when unaligned or on big-endian). */
function typed<T extends { [i: number]: number }>(
  ctor: ITypedArrayCtor<T>,
  read: Reader,
  view: DataView,
  n: number,
  name: string,
  type: string
): T {
  const size = ctor.BYTES_PER_ELEMENT;
  if (view.byteLength !== n * size) {
    fail(
      type,
      `column "${name}" has ${view.byteLength} bytes, expected ${n * size}`
    );
  }
  if (LITTLE_ENDIAN) {
    if (view.byteOffset % size === 0) {
      return new ctor(view.buffer, view.byteOffset, n);
    }
    const copy = view.buffer.slice(
      view.byteOffset,
      view.byteOffset + view.byteLength
    );
    return new ctor(copy, 0, n);
  }
  const out = new ctor(n);
  for (let i = 0; i < n; i++) {
    out[i] = read(view, i * size);
  }
  return out;
}

const u8 = (v: DataView, n: number, name: string, type: string) =>
  typed(Uint8Array, (d, o) => d.getUint8(o), v, n, name, type);
const u16 = (v: DataView, n: number, name: string, type: string) =>
  typed(Uint16Array, (d, o) => d.getUint16(o, true), v, n, name, type);
const f32 = (v: DataView, n: number, name: string, type: string) =>
  typed(Float32Array, (d, o) => d.getFloat32(o, true), v, n, name, type);
const f64 = (v: DataView, n: number, name: string, type: string) =>
  typed(Float64Array, (d, o) => d.getFloat64(o, true), v, n, name, type);

/** The buffers of a columnar message, by column name (extra columns are ignored). */
function columns(
  d: Obj,
  buffers: DataView[],
  required: string[],
  type: string
): { [name: string]: DataView } {
  const names = strList(d, 'columns', type);
  if (names.length !== buffers.length) {
    fail(type, `${names.length} columns but ${buffers.length} buffers`);
  }
  const out: { [name: string]: DataView } = {};
  names.forEach((name, i) => (out[name] = buffers[i]));
  for (const name of required) {
    if (!(name in out)) {
      fail(type, `missing column "${name}"`);
    }
  }
  return out;
}

// ------------------------------------------------------------------ stack trees

const MAX_TREE_DEPTH = 1000;

/** A node's `lines` ({"line number": samples}, JSON keys are strings) as pairs. */
function parseLines(value: unknown, type: string): [number, number][] {
  if (value === undefined || value === null) {
    return [];
  }
  if (!isRecord(value)) {
    fail(type, '"lines" must be an object');
  }
  const out: [number, number][] = [];
  for (const [key, n] of Object.entries(value)) {
    const line = Number(key);
    if (!Number.isInteger(line) || line < 0) {
      fail(type, `"lines" key ${JSON.stringify(key)} is not a line number`);
    }
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
      fail(type, `"lines.${key}" must be a non-negative integer`);
    }
    out.push([line, n]);
  }
  return out;
}

function parseTree(value: unknown, depth: number): IStackTree {
  const type = 'stacks';
  if (!isRecord(value)) {
    fail(type, 'a tree node must be an object');
  }
  if (depth > MAX_TREE_DEPTH) {
    fail(type, `tree deeper than ${MAX_TREE_DEPTH}`);
  }
  const description = isRecord(value.description) ? value.description : {};
  const children = value.children ?? {};
  if (!isRecord(children)) {
    fail(type, '"children" must be an object');
  }
  const line = description.line_number;
  return {
    identifier: str(value, 'identifier', type),
    name: typeof description.name === 'string' ? description.name : '',
    filename:
      typeof description.filename === 'string' ? description.filename : '',
    line: typeof line === 'number' ? line : 0,
    count: count(value, 'count', type),
    lines: parseLines(value.lines, type),
    children: Object.values(children).map(c => parseTree(c, depth + 1))
  };
}

/**
 * Decode one stack tree in distributed's nested form (as `stacks` messages and saved
 * runs hold it); throws a ProtocolError naming the first bad field.
 */
export function parseStackTree(value: unknown): IStackTree {
  return parseTree(value, 0);
}

// ------------------------------------------------------------------ protocol 1.3

function sourceInfo(value: unknown, identifier: string): ISourceInfo {
  const t = `sources: ${JSON.stringify(identifier)}`;
  if (!isRecord(value)) {
    fail(t, 'must be an object');
  }
  return {
    file: str(value, 'file', t),
    name: str(value, 'name', t),
    start: count(value, 'start', t),
    text: strList(value, 'text', t)
  };
}

/** Decode the `sources` of a `sources` message (or of a saved run): {identifier: source}. */
export function parseSources(value: unknown): {
  [identifier: string]: ISourceInfo;
} {
  if (!isRecord(value)) {
    fail('sources', '"sources" must be an object');
  }
  const out: { [identifier: string]: ISourceInfo } = {};
  for (const [identifier, info] of Object.entries(value)) {
    out[identifier] = sourceInfo(info, identifier);
  }
  return out;
}

// ------------------------------------------------------------------ decoders

type Decoder = (d: Obj, buffers: DataView[]) => KernelMessage;

/** Validate a hello message; throws an Error naming the first bad field. */
export function parseHello(data: unknown): IHelloMessage {
  if (!isRecord(data) || data.type !== 'hello') {
    throw new ProtocolError('hello: not a hello message');
  }
  if (typeof data.protocol !== 'string') {
    throw new ProtocolError('hello: "protocol" must be a string');
  }
  if (!isRecord(data.versions)) {
    throw new ProtocolError('hello: "versions" must be an object');
  }
  const versions: { [name: string]: string } = {};
  for (const [name, value] of Object.entries(data.versions)) {
    versions[name] = String(value);
  }
  return {
    type: 'hello',
    protocol: data.protocol,
    versions,
    pid: typeof data.pid === 'number' ? data.pid : -1,
    paused: data.paused === true,
    history: typeof data.history === 'number' ? data.history : 0
  };
}

// ------------------------------------------------------------------ protocol 1.2

function exceptionRow(r: Obj, i: number): IExceptionRow {
  const t = `exceptions: rows[${i}]`;
  return {
    key: str(r, 'key', t),
    group: str(r, 'group', t),
    worker: str(r, 'worker', t),
    time: num(r, 'time', t),
    type: str(r, 'type', t),
    message: str(r, 'message', t),
    traceback: str(r, 'traceback', t)
  };
}

function clusterWorker(w: Obj, i: number): IClusterWorker {
  const t = `cluster_workers: workers[${i}]`;
  const name = w.name;
  if (typeof name !== 'string' && typeof name !== 'number') {
    fail(t, '"name" must be a string or a number');
  }
  const limit = num(w, 'memory_limit', t);
  return {
    address: str(w, 'address', t),
    name: String(name),
    host: str(w, 'host', t),
    threads: count(w, 'threads', t),
    memoryLimit: Math.max(0, limit),
    joined: numOrNull(w, 'joined', t),
    left: numOrNull(w, 'left', t),
    reason: strOrNull(w, 'reason', t)
  };
}

const DECODERS_1_2: { [type: string]: Decoder } = {
  reruns: d => {
    const t = 'reruns';
    const rows = intList(d, 'rows', t);
    const why = strList(d, 'why', t);
    const workers = strList(d, 'workers', t);
    if (why.length !== rows.length || workers.length !== rows.length) {
      fail(t, '"rows", "why" and "workers" must have the same length');
    }
    return { type: t, run: runId(d, t), rows, why, workers };
  },
  spans: d => {
    const t = 'spans';
    const msg: ISpansMessage = {
      type: t,
      run: runId(d, t),
      ids: intList(d, 'ids', t),
      names: strList(d, 'names', t)
    };
    sameLength(t, { ids: msg.ids, names: msg.names });
    if (msg.ids.some(id => id === 0 || id > 0xffff)) {
      fail(t, '"ids" must be in 1..65535 (0 is no span)');
    }
    return msg;
  },
  actions: (d, buffers) => {
    const t = 'actions';
    const n = count(d, 'n', t);
    const c = columns(
      d,
      buffers,
      ['worker', 'action', 'group', 'start', 'stop', 'bytes'],
      t
    );
    return {
      type: t,
      run: runId(d, t),
      n,
      base: num(d, 'base', t),
      first: count(d, 'first', t),
      worker: u16(c.worker, n, 'worker', t),
      action: u8(c.action, n, 'action', t),
      group: u16(c.group, n, 'group', t),
      start: f32(c.start, n, 'start', t),
      stop: f32(c.stop, n, 'stop', t),
      bytes: f64(c.bytes, n, 'bytes', t)
    };
  },
  memory: (d, buffers) => {
    const t = 'memory';
    const n = count(d, 'n', t);
    const c = columns(
      d,
      buffers,
      ['time', 'managed', 'unmanaged', 'spilled'],
      t
    );
    return {
      type: t,
      run: runId(d, t),
      n,
      base: num(d, 'base', t),
      source: str(d, 'source', t),
      limit: Math.max(0, num(d, 'limit', t)),
      time: f32(c.time, n, 'time', t),
      managed: f64(c.managed, n, 'managed', t),
      unmanaged: f64(c.unmanaged, n, 'unmanaged', t),
      spilled: f64(c.spilled, n, 'spilled', t)
    };
  },
  exceptions: d => {
    const t = 'exceptions';
    return {
      type: t,
      run: runId(d, t),
      first: count(d, 'first', t),
      rows: recordList(d, 'rows', t).map(exceptionRow),
      dropped: d.dropped === undefined ? 0 : count(d, 'dropped', t)
    };
  },
  cluster_workers: d => {
    const t = 'cluster_workers';
    return {
      type: t,
      run: runId(d, t),
      workers: recordList(d, 'workers', t).map(clusterWorker)
    };
  },
  transfers: (d, buffers) => {
    const t = 'transfers';
    const n = count(d, 'n', t);
    const c = columns(
      d,
      buffers,
      ['start', 'stop', 'source', 'destination', 'bytes', 'incoming'],
      t
    );
    return {
      type: t,
      run: runId(d, t),
      n,
      base: num(d, 'base', t),
      addresses: d.addresses === undefined ? [] : strList(d, 'addresses', t),
      start: f32(c.start, n, 'start', t),
      stop: f32(c.stop, n, 'stop', t),
      source: u16(c.source, n, 'source', t),
      destination: u16(c.destination, n, 'destination', t),
      bytes: f64(c.bytes, n, 'bytes', t),
      incoming: u8(c.incoming, n, 'incoming', t),
      dataType: c.type ? u16(c.type, n, 'type', t) : null,
      types: c.type ? strList(d, 'types', t) : []
    };
  }
};

const DECODERS_1_3: { [type: string]: Decoder } = {
  sources: d => ({
    type: 'sources',
    run: runId(d, 'sources'),
    sources: parseSources(d.sources)
  })
};

const DECODERS: { [type: string]: Decoder } = {
  hello: d => parseHello(d),
  error: d => ({
    type: 'error',
    code: str(d, 'code', 'error'),
    message: str(d, 'message', 'error'),
    request: typeof d.request === 'string' ? d.request : null
  }),
  run_start: d => {
    const t = 'run_start';
    if (
      d.title !== null &&
      d.title !== undefined &&
      typeof d.title !== 'string'
    ) {
      fail(t, '"title" must be a string or null');
    }
    return {
      type: t,
      run: runId(d, t),
      t0: num(d, 't0', t),
      wall0: num(d, 'wall0', t),
      options: isRecord(d.options) ? d.options : {},
      title: typeof d.title === 'string' ? d.title : null
    };
  },
  groups: d => {
    const t = 'groups';
    const msg: IGroupsMessage = {
      type: t,
      run: runId(d, t),
      ids: intList(d, 'ids', t),
      names: strList(d, 'names', t),
      colors: strList(d, 'colors', t)
    };
    sameLength(t, { ids: msg.ids, names: msg.names, colors: msg.colors });
    return msg;
  },
  workers: d => {
    const t = 'workers';
    const msg: IWorkersMessage = {
      type: t,
      run: runId(d, t),
      ids: intList(d, 'ids', t),
      labels: strList(d, 'labels', t),
      kinds: strList(d, 'kinds', t)
    };
    sameLength(t, { ids: msg.ids, labels: msg.labels, kinds: msg.kinds });
    return msg;
  },
  tasks: (d, buffers) => {
    const t = 'tasks';
    const n = count(d, 'n', t);
    const c = columns(
      d,
      buffers,
      ['group', 'worker', 'status', 'submit', 'start', 'stop'],
      t
    );
    return {
      type: t,
      run: runId(d, t),
      n,
      base: num(d, 'base', t),
      first: count(d, 'first', t),
      group: u16(c.group, n, 'group', t),
      worker: u16(c.worker, n, 'worker', t),
      status: u8(c.status, n, 'status', t),
      submit: f32(c.submit, n, 'submit', t),
      start: f32(c.start, n, 'start', t),
      stop: f32(c.stop, n, 'stop', t),
      span: c.span ? u16(c.span, n, 'span', t) : null
    };
  },
  resources: (d, buffers) => {
    const t = 'resources';
    const n = count(d, 'n', t);
    const c = columns(d, buffers, ['time', 'cpu', 'memory', 'processes'], t);
    if (
      d.source !== undefined &&
      d.source !== null &&
      typeof d.source !== 'string'
    ) {
      fail(t, '"source" must be a string or null');
    }
    return {
      type: t,
      run: runId(d, t),
      source: typeof d.source === 'string' ? d.source : null,
      n,
      base: num(d, 'base', t),
      time: f32(c.time, n, 'time', t),
      cpu: f32(c.cpu, n, 'cpu', t),
      memory: f64(c.memory, n, 'memory', t),
      processes: u16(c.processes, n, 'processes', t)
    };
  },
  cache: (d, buffers) => {
    const t = 'cache';
    const n = count(d, 'n', t);
    const c = columns(d, buffers, ['time', 'group', 'metric'], t);
    return {
      type: t,
      run: runId(d, t),
      n,
      base: num(d, 'base', t),
      time: f32(c.time, n, 'time', t),
      group: u16(c.group, n, 'group', t),
      metric: f64(c.metric, n, 'metric', t)
    };
  },
  progress: d => {
    const t = 'progress';
    const msg: IProgressMessage = {
      type: t,
      run: runId(d, t),
      groups: intList(d, 'groups', t),
      total: intList(d, 'total', t),
      done: intList(d, 'done', t),
      erred: intList(d, 'erred', t)
    };
    sameLength(t, {
      groups: msg.groups,
      total: msg.total,
      done: msg.done,
      erred: msg.erred
    });
    return msg;
  },
  stacks: d => {
    const t = 'stacks';
    if (!isRecord(d.trees)) {
      fail(t, '"trees" must be an object');
    }
    const trees: { [group: string]: IStackTree } = {};
    for (const [group, tree] of Object.entries(d.trees)) {
      trees[group] = parseTree(tree, 0);
    }
    return {
      type: t,
      run: runId(d, t),
      tStart: num(d, 't_start', t),
      tEnd: num(d, 't_end', t),
      trees
    };
  },
  keys: d => {
    const t = 'keys';
    const msg: IKeysMessage = {
      type: t,
      run: runId(d, t),
      indices: intList(d, 'indices', t),
      keys: strList(d, 'keys', t)
    };
    sameLength(t, { indices: msg.indices, keys: msg.keys });
    return msg;
  },
  run_end: d => {
    const t = 'run_end';
    const dropped: { [what: string]: number } = {};
    if (d.dropped !== undefined && d.dropped !== null) {
      if (!isRecord(d.dropped)) {
        fail(t, '"dropped" must be an object');
      }
      for (const [what, n] of Object.entries(d.dropped)) {
        if (typeof n !== 'number') {
          fail(t, `"dropped.${what}" must be a number`);
        }
        dropped[what] = n;
      }
    }
    const reduced: { [part: string]: string } = {};
    if (d.reduced !== undefined && d.reduced !== null) {
      if (!isRecord(d.reduced)) {
        fail(t, '"reduced" must be an object');
      }
      for (const [part, why] of Object.entries(d.reduced)) {
        if (typeof why !== 'string') {
          fail(t, `"reduced.${part}" must be a string`);
        }
        reduced[part] = why;
      }
    }
    const summary = isRecord(d.summary) ? d.summary : {};
    const found = decodeFindings(summary.findings);
    return {
      type: t,
      run: runId(d, t),
      summary,
      dropped,
      errors: Array.isArray(d.errors) ? d.errors : [],
      reduced,
      findings: found.findings,
      findingsDropped: found.dropped
    };
  },
  dropped: d => ({
    type: 'dropped',
    run: runId(d, 'dropped'),
    messages: count(d, 'messages', 'dropped'),
    rows: count(d, 'rows', 'dropped')
  }),
  state: d => {
    if (typeof d.paused !== 'boolean') {
      fail('state', '"paused" must be a boolean');
    }
    return { type: 'state', paused: d.paused };
  },
  export: (d, buffers) => {
    const t = 'export';
    if (buffers.length !== 1) {
      fail(t, `expected one buffer, got ${buffers.length}`);
    }
    const b = buffers[0];
    return {
      type: t,
      run: runId(d, t),
      format: str(d, 'format', t),
      filename: str(d, 'filename', t),
      mime: str(d, 'mime', t),
      bytes: new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
    };
  },
  ...DECODERS_1_2,
  ...DECODERS_1_3
};

/**
 * Decode one kernel message. Returns null for an unknown `type` (forward compatible
 * within a major version); throws a ProtocolError when the message is malformed.
 */
export function decodeMessage(
  data: unknown,
  buffers: DataView[] = []
): KernelMessage | null {
  if (!isRecord(data) || typeof data.type !== 'string') {
    throw new ProtocolError('message: not an object with a string "type"');
  }
  const decoder = Object.prototype.hasOwnProperty.call(DECODERS, data.type)
    ? DECODERS[data.type]
    : undefined;
  return decoder ? decoder(data, buffers) : null;
}
