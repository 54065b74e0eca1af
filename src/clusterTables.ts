/**
 * A run's cluster tables (protocol 1.2): what a cluster run holds beyond compute. Actions
 * (transfers, spills, deserialization of tasks on their workers), memory of each worker
 * (managed, unmanaged, spilled), the workers' transfer logs, the tasks that raised, and
 * the workers that came and went. Growable typed arrays and the pure helpers the views
 * draw from (summed memory, bandwidth, hover and run-bar texts); no DOM, no kernel. The
 * names follow the kernel's `daskprofile/cluster_tables.py`.
 */

import { Column } from './columns';
import { formatBytes, formatCount, formatDuration } from './format';
import { LaneIndex, lowerBound } from './lod';
import {
  ACTION_KINDS,
  IActionsMessage,
  IClusterWorker,
  IExceptionRow,
  IExceptionsMessage,
  IMemoryMessage,
  IRerunsMessage,
  ITransfersMessage
} from './protocol';

/** Colours of the action kinds, as distributed's task stream draws them. */
export const ACTION_COLORS: readonly string[] = [
  '#d62728', // transfer: red
  '#ff7f0e', // disk-read: orange
  '#ff7f0e', // disk-write: orange
  '#7f7f7f' // deserialize: grey
];

/** Colour of an action code this panel does not know. */
const OTHER_ACTION_COLOR = '#7f7f7f';

/** Name of action code `code` (`action 7` for a code this panel does not know). */
export function actionName(code: number): string {
  return ACTION_KINDS[code] ?? `action ${code}`;
}

/** Colour of action code `code`. */
export function actionColor(code: number): string {
  return ACTION_COLORS[code] ?? OTHER_ACTION_COLOR;
}

/** Hover text of an action: `transfer 12.3 MiB in 4.1 ms (group inc)`. */
export function actionText(
  code: number,
  bytes: number,
  seconds: number,
  group: string
): string {
  const size =
    Number.isFinite(bytes) && bytes >= 0 ? ` ${formatBytes(bytes)}` : '';
  return `${actionName(code)}${size} in ${formatDuration(seconds)} (group ${group})`;
}

/** Earliest and latest time a table holds (seconds since t0). */
class Extent {
  tMin = Infinity;
  tMax = -Infinity;

  add(lo: number, hi: number): void {
    if (lo < this.tMin) {
      this.tMin = lo;
    }
    if (hi > this.tMax) {
      this.tMax = hi;
    }
  }
}

/** The action table: one row per received action, and a lane index per worker lane. */
export class ActionTable extends Extent {
  /** Protocol index of each row (`first + j`). */
  readonly index = new Column(Int32Array);
  readonly worker = new Column(Uint16Array);
  readonly action = new Column(Uint8Array);
  readonly group = new Column(Uint16Array);
  readonly start = new Column(Float64Array);
  readonly stop = new Column(Float64Array);
  /** Bytes moved, read or written (NaN: not known). */
  readonly bytes = new Column(Float64Array);
  /** Rows of each lane (worker id), sorted by start: drawn and hit-tested like tasks. */
  readonly lanes = new Map<number, LaneIndex>();
  /** Rows of each action code (index = code). */
  readonly counts: number[] = [];

  get length(): number {
    return this.index.length;
  }

  /** The action codes present, in code order. */
  kinds(): number[] {
    const out: number[] = [];
    this.counts.forEach((n, code) => {
      if (n > 0) {
        out.push(code);
      }
    });
    return out;
  }

  /** Append a batch (its times are offsets from its `base`). */
  append(msg: IActionsMessage): void {
    const row0 = this.length;
    for (let j = 0; j < msg.n; j++) {
      this.index.push(msg.first + j);
    }
    this.worker.append(msg.worker);
    this.action.append(msg.action);
    this.group.append(msg.group);
    this.start.append(msg.start, msg.base);
    this.stop.append(msg.stop, msg.base);
    this.bytes.append(msg.bytes);
    for (let r = row0; r < row0 + msg.n; r++) {
      const w = this.worker.data[r];
      let lane = this.lanes.get(w);
      if (!lane) {
        lane = new LaneIndex();
        this.lanes.set(w, lane);
      }
      const s = this.start.data[r];
      const e = Math.max(s, this.stop.data[r]);
      const code = this.action.data[r];
      lane.push(r, s, e, code);
      this.add(s, e);
      while (this.counts.length <= code) {
        this.counts.push(0);
      }
      this.counts[code]++;
    }
  }
}

/** Memory samples of one cluster worker (time order), and its limit. */
export class MemorySeries {
  readonly time = new Column(Float64Array);
  readonly managed = new Column(Float64Array);
  readonly unmanaged = new Column(Float64Array);
  readonly spilled = new Column(Float64Array);
  /** The worker's memory limit in bytes (0: none), as last sent. */
  limit = 0;
  /** Largest managed + unmanaged + spilled seen. */
  maxTotal = 0;

  get length(): number {
    return this.time.length;
  }

  append(msg: IMemoryMessage): void {
    this.time.append(msg.time, msg.base);
    this.managed.append(msg.managed);
    this.unmanaged.append(msg.unmanaged);
    this.spilled.append(msg.spilled);
    this.limit = msg.limit;
    for (let i = 0; i < msg.n; i++) {
      const total = msg.managed[i] + msg.unmanaged[i] + msg.spilled[i];
      if (total > this.maxTotal) {
        this.maxTotal = total;
      }
    }
  }
}

/** Stacked memory: managed, unmanaged and spilled bytes at each time (time order). */
export interface IMemoryStack {
  n: number;
  time: Float64Array;
  managed: Float64Array;
  unmanaged: Float64Array;
  spilled: Float64Array;
}

/** A worker's memory series and when it left (its memory counts as 0 after; null: never). */
export interface IMemoryPart {
  series: MemorySeries;
  end: number | null;
}

/**
 * The memory of several workers summed over time: each worker's last sample holds until
 * its next one (0 before its first, and after it left), so workers sampled at different
 * moments add up without gaps. One point per distinct sample time; O(N log N).
 */
export function sumMemory(parts: IMemoryPart[]): IMemoryStack {
  // events: (time, part, row); row -1 is a worker leaving
  const times: number[] = [];
  const owners: number[] = [];
  const rows: number[] = [];
  parts.forEach((part, p) => {
    const n = part.series.length;
    for (let i = 0; i < n; i++) {
      times.push(part.series.time.data[i]);
      owners.push(p);
      rows.push(i);
    }
    if (part.end !== null && Number.isFinite(part.end)) {
      times.push(part.end);
      owners.push(p);
      rows.push(-1);
    }
  });
  const order = times.map((_, i) => i);
  order.sort((a, b) => times[a] - times[b] || a - b);
  const held = parts.map(() => [0, 0, 0]);
  const gone = parts.map(() => false);
  const sums = [0, 0, 0];
  const out: IMemoryStack = {
    n: 0,
    time: new Float64Array(order.length),
    managed: new Float64Array(order.length),
    unmanaged: new Float64Array(order.length),
    spilled: new Float64Array(order.length)
  };
  for (const e of order) {
    const p = owners[e];
    const s = parts[p].series;
    const row = rows[e];
    if (gone[p]) {
      continue;
    }
    const next =
      row < 0
        ? [0, 0, 0]
        : [s.managed.data[row], s.unmanaged.data[row], s.spilled.data[row]];
    gone[p] = row < 0;
    for (let k = 0; k < 3; k++) {
      sums[k] += next[k] - held[p][k];
      held[p][k] = next[k];
    }
    const t = times[e];
    // samples at the same time make one point (the last state wins)
    const i = out.n > 0 && out.time[out.n - 1] === t ? out.n - 1 : out.n++;
    out.time[i] = t;
    out.managed[i] = Math.max(0, sums[0]);
    out.unmanaged[i] = Math.max(0, sums[1]);
    out.spilled[i] = Math.max(0, sums[2]);
  }
  return out;
}

/** One worker's series as a stack (no copy of the arrays' contents beyond `length`). */
export function memoryStack(series: MemorySeries): IMemoryStack {
  return {
    n: series.length,
    time: series.time.view(),
    managed: series.managed.view(),
    unmanaged: series.unmanaged.view(),
    spilled: series.spilled.view()
  };
}

/** `type` of a transfer row whose batch carried no type (a kernel older than 1.3). */
export const NO_TYPE = 0xffff;

/** Name shown for a type of data not known. */
export const UNKNOWN_TYPE = '(unknown)';

/** Transfers per block of MovedIndex's latest stops. */
const MOVED_BLOCK = 64;

/**
 * The bytes the transfers of known size moved up to any time, so that a bandwidth bin
 * costs O(log n) instead of a pass over every transfer on every frame: the transfers
 * sorted by start, prefix sums of their bytes, and each block's latest stop (to find the
 * transfers under way at a time). Kept up to date as rows come: a batch is sorted and
 * merged in where it starts (near the end, in a live run).
 */
export class MovedIndex {
  constructor() {
    this.prefix.push(0);
  }

  readonly starts = new Column(Float64Array);
  readonly stops = new Column(Float64Array);
  readonly bytes = new Column(Float64Array);
  /** Bytes of the transfers before each index (length + 1 entries). */
  readonly prefix = new Column(Float64Array);
  /** Latest stop in each block of MOVED_BLOCK transfers. */
  readonly blockStop = new Column(Float64Array);
  /** Longest transfer: how long before a time a transfer under way then started. */
  maxDuration = 0;

  get length(): number {
    return this.starts.length;
  }

  /** Merge transfers in (any order); those of unknown or no size are left out. */
  add(
    starts: ArrayLike<number>,
    stops: ArrayLike<number>,
    bytes: ArrayLike<number>
  ): void {
    const fresh: number[] = [];
    for (let i = 0; i < starts.length; i++) {
      if (bytes[i] > 0 && Number.isFinite(bytes[i])) {
        fresh.push(i);
      }
    }
    if (fresh.length === 0) {
      return;
    }
    fresh.sort((a, b) => starts[a] - starts[b] || a - b);
    const n = this.length;
    const at = lowerBound(this.starts.data, n, starts[fresh[0]]);
    // the rows from `at` on and the fresh ones, merged by start (older rows first)
    const S = this.starts.data;
    const E = this.stops.data;
    const B = this.bytes.data;
    const m = n - at + fresh.length;
    const ms = new Float64Array(m);
    const me = new Float64Array(m);
    const mb = new Float64Array(m);
    let i = at;
    let j = 0;
    for (let k = 0; k < m; k++) {
      if (j >= fresh.length || (i < n && S[i] <= starts[fresh[j]])) {
        ms[k] = S[i];
        me[k] = E[i];
        mb[k] = B[i++];
      } else {
        const r = fresh[j++];
        ms[k] = starts[r];
        me[k] = Math.max(starts[r], stops[r]);
        mb[k] = bytes[r];
      }
    }
    for (const [col, merged] of [
      [this.starts, ms],
      [this.stops, me],
      [this.bytes, mb]
    ] as const) {
      col.truncate(at);
      col.append(merged);
    }
    this._reindex(at);
  }

  /**
   * Bytes moved by time `t`: those of the transfers that started before it, less what
   * the ones under way at `t` had left (a transfer's bytes spread evenly over it; one of
   * no duration counts from just after its start).
   */
  movedBy(t: number): number {
    const S = this.starts.data;
    const E = this.stops.data;
    const B = this.bytes.data;
    const latest = this.blockStop.data;
    const j = lowerBound(S, this.length, t);
    let moved = this.prefix.data[j];
    for (let block = Math.floor((j - 1) / MOVED_BLOCK); block >= 0; block--) {
      const first = block * MOVED_BLOCK;
      const last = Math.min(j, first + MOVED_BLOCK) - 1;
      if (S[last] + this.maxDuration <= t) {
        break; // the transfers of this block and of those before it ended by t
      }
      if (latest[block] <= t) {
        continue;
      }
      for (let r = last; r >= first; r--) {
        if (E[r] > t) {
          moved -= (B[r] * (E[r] - t)) / (E[r] - S[r]);
        }
      }
    }
    return moved;
  }

  /** Prefix sums and latest stops from index `from` on. */
  private _reindex(from: number): void {
    const n = this.length;
    const S = this.starts.data;
    const E = this.stops.data;
    const B = this.bytes.data;
    const prefix = this.prefix;
    prefix.truncate(from + 1);
    for (let i = from; i < n; i++) {
      prefix.push(prefix.data[i] + B[i]);
      this.maxDuration = Math.max(this.maxDuration, E[i] - S[i]);
    }
    const firstBlock = Math.floor(from / MOVED_BLOCK);
    this.blockStop.truncate(firstBlock);
    for (let block = firstBlock; block * MOVED_BLOCK < n; block++) {
      let latest = -Infinity;
      const end = Math.min(n, (block + 1) * MOVED_BLOCK);
      for (let i = block * MOVED_BLOCK; i < end; i++) {
        latest = Math.max(latest, E[i]);
      }
      this.blockStop.push(latest);
    }
  }
}

/** The transfer logs: the incoming rows only (each transfer counted once). */
export class TransferTable extends Extent {
  /** Worker addresses; `source` and `destination` index this list. */
  readonly addresses: string[] = [];
  /** Type names of the data moved (protocol 1.3); `type` indexes this list. */
  readonly types: string[] = [];
  readonly start = new Column(Float64Array);
  readonly stop = new Column(Float64Array);
  readonly source = new Column(Uint16Array);
  readonly destination = new Column(Uint16Array);
  /** Bytes moved (NaN: not known). */
  readonly bytes = new Column(Float64Array);
  /** Type of the data moved: an id of `types`, or NO_TYPE. */
  readonly type = new Column(Uint16Array);
  /** Rows that came with a type (from a 1.3 kernel). */
  typed = 0;
  /** Bytes of the incoming rows whose size is known. */
  totalBytes = 0;
  /** Outgoing rows received (not kept: the incoming row counts the transfer). */
  outgoing = 0;
  /** The incoming rows by start, for bandwidth over any window (see MovedIndex). */
  readonly moved = new MovedIndex();

  get length(): number {
    return this.start.length;
  }

  /** The address of id `id` (`address <id>` when not known). */
  address(id: number): string {
    return this.addresses[id] || `address ${id}`;
  }

  /** The type name of id `id` (`(unknown)` for '' or an id not known). */
  typeName(id: number): string {
    return this.types[id] || UNKNOWN_TYPE;
  }

  append(msg: ITransfersMessage): void {
    this.addresses.push(...msg.addresses);
    this.types.push(...msg.types);
    const first = this.length;
    for (let i = 0; i < msg.n; i++) {
      if (msg.incoming[i] !== 1) {
        this.outgoing++;
        continue;
      }
      const s = msg.start[i] + msg.base;
      const e = Math.max(s, msg.stop[i] + msg.base);
      const b = msg.bytes[i];
      this.start.push(s);
      this.stop.push(e);
      this.source.push(msg.source[i]);
      this.destination.push(msg.destination[i]);
      this.bytes.push(b);
      this.type.push(msg.dataType ? msg.dataType[i] : NO_TYPE);
      this.typed += msg.dataType ? 1 : 0;
      this.add(s, e);
      if (Number.isFinite(b) && b > 0) {
        this.totalBytes += b;
      }
    }
    const n = this.length;
    this.moved.add(
      this.start.data.subarray(first, n),
      this.stop.data.subarray(first, n),
      this.bytes.data.subarray(first, n)
    );
  }
}

/**
 * Bandwidth over [v0, v1] in `bins` equal bins: bytes per second of the incoming
 * transfers, each transfer's bytes spread evenly over its duration (an instantaneous one
 * lands in the bin of its start). Transfers of unknown size count for nothing. Each bin
 * is the difference of the bytes moved by its ends (`table.moved`): O(bins log n).
 */
export function bandwidth(
  table: TransferTable,
  v0: number,
  v1: number,
  bins: number
): Float64Array {
  const out = new Float64Array(Math.max(0, bins));
  if (!(v1 > v0) || bins <= 0) {
    return out;
  }
  const width = (v1 - v0) / bins;
  const moved = table.moved;
  let before = moved.movedBy(v0);
  for (let k = 0; k < bins; k++) {
    const after = moved.movedBy(k === bins - 1 ? v1 : v0 + (k + 1) * width);
    out[k] = Math.max(0, after - before) / width; // (no rounding below 0)
    before = after;
  }
  return out;
}

/** Bytes moved, seconds transferring, transfers and bytes/s of a set of transfers. */
export interface IMoved {
  /** Bytes of the transfers whose size is known. */
  bytes: number;
  /** Seconds spent transferring (each transfer at least 1 ms, as the kernel counts). */
  seconds: number;
  transfers: number;
  /** bytes / seconds. */
  bandwidth: number;
}

/** Bytes moved between two workers: a row of the panel's bandwidth by pair. */
export interface IPairBandwidth extends IMoved {
  source: string;
  destination: string;
}

/** Bytes of one type of data moved: a row of the panel's bandwidth by type. */
export interface ITypeBandwidth extends IMoved {
  /** The type's name (`(unknown)` when not known). */
  type: string;
}

/** The incoming transfers summed per `keyOf(row)`; `make` starts an entry. */
function sumMoved<T extends IMoved>(
  table: TransferTable,
  keyOf: (row: number) => number,
  make: (row: number) => T
): T[] {
  const entries = new Map<number, T>();
  for (let i = 0; i < table.length; i++) {
    const key = keyOf(i);
    let entry = entries.get(key);
    if (!entry) {
      entry = make(i);
      entries.set(key, entry);
    }
    const b = table.bytes.data[i];
    entry.bytes += Number.isFinite(b) && b > 0 ? b : 0;
    entry.seconds += Math.max(1e-3, table.stop.data[i] - table.start.data[i]);
    entry.transfers++;
  }
  const out = [...entries.values()];
  for (const e of out) {
    e.bandwidth = e.bytes / e.seconds;
  }
  return out;
}

const NOTHING_MOVED: IMoved = {
  bytes: 0,
  seconds: 0,
  transfers: 0,
  bandwidth: 0
};

/**
 * Per (source, destination) pair of workers: bytes moved, seconds transferring, count and
 * bytes per second of the incoming transfers (`Run.bandwidth(by="workers")`), most bytes
 * first (then by source and destination). Transfers of unknown size count as 0 bytes.
 */
export function pairBandwidth(table: TransferTable): IPairBandwidth[] {
  const src = table.source.data;
  const dst = table.destination.data;
  return sumMoved(
    table,
    i => src[i] * 0x10000 + dst[i],
    i => ({
      ...NOTHING_MOVED,
      source: table.address(src[i]),
      destination: table.address(dst[i])
    })
  ).sort(
    (a, b) =>
      b.bytes - a.bytes ||
      a.source.localeCompare(b.source) ||
      a.destination.localeCompare(b.destination)
  );
}

/**
 * Per type of data moved (protocol 1.3): bytes, seconds transferring, count and bytes per
 * second of the incoming transfers (`Run.bandwidth(by="type")`), most bytes first (then by
 * name). Types of the same name are one row; rows without a type are `(unknown)`. Empty
 * when no row came with a type (a kernel older than 1.3).
 */
export function typeBandwidth(table: TransferTable): ITypeBandwidth[] {
  if (table.typed === 0) {
    return [];
  }
  const names = new Map<string, number>();
  const ids = table.type.data;
  const keyOf = (i: number) => {
    const name = table.typeName(ids[i]);
    let key = names.get(name);
    if (key === undefined) {
      key = names.size;
      names.set(name, key);
    }
    return key;
  };
  return sumMoved(table, keyOf, i => ({
    ...NOTHING_MOVED,
    type: table.typeName(ids[i])
  })).sort((a, b) => b.bytes - a.bytes || a.type.localeCompare(b.type));
}

/** Why a task row ran again: what its worker's leaving did to it, and that worker. */
export interface IRerun {
  /** `lost` (its result), `interrupted` (it was running) or `killed` (it failed). */
  why: string;
  worker: string;
}

/** `lost on tcp://10.0.0.1:4001`: the task stream's `re-run` hover line. */
export function rerunText(rerun: IRerun): string {
  return `${rerun.why} on ${rerun.worker}`;
}

/** Task rows a worker that left took with it, by task row index. */
export class RerunTable {
  readonly rows = new Map<number, IRerun>();

  get size(): number {
    return this.rows.size;
  }

  add(msg: IRerunsMessage): void {
    msg.rows.forEach((row, i) => {
      this.rows.set(row, { why: msg.why[i], worker: msg.workers[i] });
    });
  }

  get(row: number): IRerun | undefined {
    return this.rows.get(row);
  }
}

/** A failure of the run: its row and its index in the run's exceptions table. */
export interface IException extends IExceptionRow {
  index: number;
}

/** The tasks that raised, by index (a row sent again replaces itself). */
export class ExceptionTable {
  /** Rows in index order. */
  readonly rows: IException[] = [];
  /** Failures the kernel did not keep. */
  dropped = 0;

  /** Failures in all: those kept and those the kernel dropped. */
  get total(): number {
    return this.rows.length + this.dropped;
  }

  add(msg: IExceptionsMessage): void {
    msg.rows.forEach((row, j) => {
      const index = msg.first + j;
      const entry = { ...row, index };
      const at = this._byIndex.get(index);
      if (at !== undefined) {
        this.rows[at] = entry;
        return;
      }
      let i = this.rows.length;
      while (i > 0 && this.rows[i - 1].index > index) {
        i--;
      }
      this.rows.splice(i, 0, entry);
      this._reindex(i);
    });
    this.dropped = Math.max(this.dropped, msg.dropped);
  }

  private _reindex(from: number): void {
    for (let i = from; i < this.rows.length; i++) {
      this._byIndex.set(this.rows[i].index, i);
    }
  }

  private _byIndex = new Map<number, number>();
}

/** `lost at 3.2 s` (or `retired at ...`, `left at ...` with no reason); '' if still there. */
export function leftText(worker: IClusterWorker): string {
  if (worker.left === null) {
    return '';
  }
  return `${worker.reason ?? 'left'} at ${formatDuration(worker.left)}`;
}

/** `joined at 3.2 s` for a worker that joined during the run; '' if there from the start. */
export function joinedText(worker: IClusterWorker): string {
  return worker.joined === null
    ? ''
    : `joined at ${formatDuration(worker.joined)}`;
}

/** A worker's comings and goings: `joined at 1 s · lost at 3 s` ('' if neither). */
export function lifeText(worker: IClusterWorker): string {
  return [joinedText(worker), leftText(worker)].filter(t => t).join(' · ');
}

/**
 * The run bar's count of workers: those there when the run began, then the ones that
 * joined and those that left, by reason: `2 (+1 joined, 1 lost)`.
 */
export function workersLine(workers: readonly IClusterWorker[]): string {
  const atStart = workers.filter(w => w.joined === null).length;
  const joined = workers.length - atStart;
  const reasons = new Map<string, number>();
  for (const w of workers) {
    if (w.left !== null) {
      const why = w.reason ?? 'left';
      reasons.set(why, (reasons.get(why) ?? 0) + 1);
    }
  }
  const parts: string[] = [];
  if (joined > 0) {
    parts.push(`+${formatCount(joined)} joined`);
  }
  for (const [why, n] of reasons) {
    parts.push(`${formatCount(n)} ${why}`);
  }
  const head = formatCount(atStart);
  return parts.length > 0 ? `${head} (${parts.join(', ')})` : head;
}

/** A run's cluster tables. */
export class ClusterTables {
  readonly actions = new ActionTable();
  /** Memory of each worker, by address (order of appearance). */
  readonly memory = new Map<string, MemorySeries>();
  readonly transfers = new TransferTable();
  readonly exceptions = new ExceptionTable();
  /** Task rows that ran again because a worker left (`reruns`). */
  readonly reruns = new RerunTable();
  /** The run's workers, as the last `cluster_workers` listed them. */
  get workers(): readonly IClusterWorker[] {
    return this._workers;
  }

  /** Changes of memory samples and workers so far (what summed memory depends on). */
  get memoryVersion(): number {
    return this._memoryVersion;
  }

  /** Add a worker's memory samples. */
  addMemory(msg: IMemoryMessage): void {
    let series = this.memory.get(msg.source);
    if (!series) {
      series = new MemorySeries();
      this.memory.set(msg.source, series);
    }
    series.append(msg);
    this._memoryVersion++;
  }

  /** The whole list of workers (each `cluster_workers` message replaces it). */
  setWorkers(workers: IClusterWorker[]): void {
    this._workers = workers;
    this._memoryVersion++;
  }

  /**
   * The worker of `address`, if listed (the first so listed): a lookup, not a search,
   * since the task stream asks for every group of lanes in every frame.
   */
  worker(address: string): IClusterWorker | undefined {
    const workers = this._workers;
    if (this._byAddressOf !== workers || this._byAddressN !== workers.length) {
      this._byAddress.clear();
      for (const w of workers) {
        if (!this._byAddress.has(w.address)) {
          this._byAddress.set(w.address, w);
        }
      }
      this._byAddressOf = workers;
      this._byAddressN = workers.length;
    }
    return this._byAddress.get(address);
  }

  /** Memory of the workers summed (see sumMemory), each ending when it left. */
  summedMemory(): IMemoryStack {
    const left = new Map(this.workers.map(w => [w.address, w.left]));
    return sumMemory(
      [...this.memory].map(([address, series]) => ({
        series,
        end: left.get(address) ?? null
      }))
    );
  }

  /** Sum of the limits of the workers still there (all when none is listed). */
  summedLimit(): number {
    let total = 0;
    for (const [address, series] of this.memory) {
      if ((this.worker(address)?.left ?? null) === null) {
        total += series.limit;
      }
    }
    return total;
  }

  /** Earliest and latest time of any row, or null when the tables are empty. */
  extent(): [number, number] | null {
    let lo = Math.min(this.actions.tMin, this.transfers.tMin);
    let hi = Math.max(this.actions.tMax, this.transfers.tMax);
    for (const series of this.memory.values()) {
      const n = series.length;
      if (n > 0) {
        lo = Math.min(lo, series.time.data[0]);
        hi = Math.max(hi, series.time.data[n - 1]);
      }
    }
    return Number.isFinite(lo) && Number.isFinite(hi) ? [lo, hi] : null;
  }

  private _workers: IClusterWorker[] = [];
  private _byAddress = new Map<string, IClusterWorker>();
  private _byAddressOf: IClusterWorker[] | null = null;
  private _byAddressN = -1;
  private _memoryVersion = 0;
}
