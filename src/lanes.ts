/**
 * The task stream's lanes, top to bottom, and where they are (pure: no DOM, unit-tested).
 *
 * Local runs keep one lane per worker in order of appearance, ungrouped. Threads of
 * cluster workers (kind `worker`, labels `"<address> thread <n>"`, see
 * daskprofile/distributed/_common.py) are ordered by address, then thread number, both
 * compared numerically where they hold digits, and each worker's lanes form one group
 * labelled with its address. A run with both shows its local lanes first, as the group
 * `kernel`. Lanes may arrive in any order: the layout depends only on the set of workers.
 */

/** Kind of a cluster worker's lane (protocol `workers.kinds`). */
export const CLUSTER_KIND = 'worker';

/** Label of the group of local lanes when a run also has cluster lanes. */
export const KERNEL_GROUP = 'kernel';

/** What a lane is made from: a worker of the run. */
export interface ILaneWorker {
  id: number;
  label: string;
  kind: string;
}

/** Consecutive lanes shown under one label. */
export interface ILaneGroup {
  /** The worker's address, or `kernel` for the local lanes. */
  label: string;
  /** Whether these are the local lanes (their own labels say what they are). */
  local: boolean;
  /** Index of the group's first lane, and how many lanes it has. */
  first: number;
  count: number;
}

/** The lanes in display order. */
export interface ILaneLayout {
  /** Worker ids, top to bottom. */
  order: number[];
  /** Gutter label of each lane (`thread N` for a cluster worker's thread). */
  labels: string[];
  /** Lane index of each worker id. */
  index: Map<number, number>;
  /** Groups covering every lane in order; empty for a run with no cluster lanes. */
  groups: ILaneGroup[];
}

const THREAD = ' thread ';

/** Address and thread number of a cluster lane's label (thread null when it has none). */
export function parseWorkerLabel(label: string): {
  address: string;
  thread: number | null;
} {
  const at = label.lastIndexOf(THREAD);
  const digits = at >= 0 ? label.slice(at + THREAD.length) : '';
  if (at <= 0 || !/^\d+$/.test(digits)) {
    return { address: label, thread: null };
  }
  return { address: label.slice(0, at), thread: Number(digits) };
}

function compareDigits(a: string, b: string): number {
  const x = a.replace(/^0+(?=\d)/, '');
  const y = b.replace(/^0+(?=\d)/, '');
  if (x.length !== y.length) {
    return x.length - y.length;
  }
  return x < y ? -1 : x > y ? 1 : a.length - b.length;
}

/**
 * Compare strings with runs of digits taken as numbers (`10.0.0.9:8786` before
 * `10.0.0.10:8786`); deterministic, independent of the locale.
 */
export function compareNatural(a: string, b: string): number {
  const chunks = /(\d+)|(\D+)/g;
  const xs = a.match(chunks) ?? [];
  const ys = b.match(chunks) ?? [];
  for (let i = 0; i < Math.min(xs.length, ys.length); i++) {
    const x = xs[i];
    const y = ys[i];
    const xd = /^\d/.test(x);
    const yd = /^\d/.test(y);
    let c: number;
    if (xd && yd) {
      c = compareDigits(x, y);
    } else {
      c = x < y ? -1 : x > y ? 1 : 0;
    }
    if (c !== 0) {
      return c;
    }
  }
  return xs.length - ys.length;
}

interface IClusterLane {
  id: number;
  address: string;
  thread: number | null;
  label: string;
}

function compareClusterLanes(a: IClusterLane, b: IClusterLane): number {
  return (
    compareNatural(a.address, b.address) ||
    (a.thread ?? -1) - (b.thread ?? -1) ||
    compareNatural(a.label, b.label) ||
    a.id - b.id
  );
}

/**
 * The lanes of `workers` (given in order of appearance) in display order: local lanes
 * first, as they came, then cluster lanes by address and thread, grouped by address.
 */
export function layoutLanes(workers: Iterable<ILaneWorker>): ILaneLayout {
  const local: ILaneWorker[] = [];
  const cluster: IClusterLane[] = [];
  for (const w of workers) {
    if (w.kind === CLUSTER_KIND) {
      cluster.push({ id: w.id, label: w.label, ...parseWorkerLabel(w.label) });
    } else {
      local.push(w);
    }
  }
  cluster.sort(compareClusterLanes);
  const order = local.map(w => w.id);
  const labels = local.map(w => w.label);
  const groups: ILaneGroup[] = [];
  if (cluster.length > 0 && local.length > 0) {
    groups.push({
      label: KERNEL_GROUP,
      local: true,
      first: 0,
      count: local.length
    });
  }
  let group: ILaneGroup | null = null;
  for (const lane of cluster) {
    if (group === null || group.label !== lane.address) {
      group = {
        label: lane.address,
        local: false,
        first: order.length,
        count: 0
      };
      groups.push(group);
    }
    group.count++;
    order.push(lane.id);
    labels.push(lane.thread === null ? lane.label : `thread ${lane.thread}`);
  }
  const index = new Map<number, number>();
  order.forEach((id, i) => index.set(id, i));
  return { order, labels, index, groups };
}

/**
 * The layout of the last workers asked for, laid out again only when they change (a new
 * lane, or a worker named anew: a new object): sorting hundreds of cluster lanes by
 * address on every frame of a pan costs more than drawing them.
 */
export class LaneLayoutCache {
  get(workers: readonly ILaneWorker[]): ILaneLayout {
    const same =
      this._layout !== null &&
      workers.length === this._workers.length &&
      workers.every((w, i) => w === this._workers[i]);
    if (!same || this._layout === null) {
      this._workers = workers.slice();
      this._layout = layoutLanes(workers);
    }
    return this._layout;
  }

  private _workers: ILaneWorker[] = [];
  private _layout: ILaneLayout | null = null;
}

/** Where the lanes are, in CSS pixels from the top of the plot. */
export interface ILaneGeometry {
  /** Top of each lane. */
  tops: Float64Array;
  /** Height of every lane. */
  laneHeight: number;
  /** Height of the band above each group holding its label (0: no bands). */
  header: number;
  /** Top of each group (of its band when there are bands), as `layout.groups`. */
  groupTops: number[];
}

/** Fewest pixels a lane keeps before group bands are given up for lane height. */
export const MIN_LANE_WITH_HEADERS = 6;

/**
 * Lay the lanes out over `height` pixels: evenly when there are no groups (the local
 * look), else with a `header`-pixel band above each group for its label, unless that would
 * leave lanes thinner than MIN_LANE_WITH_HEADERS (then no bands: separators only).
 */
export function laneGeometry(
  layout: ILaneLayout,
  height: number,
  header: number
): ILaneGeometry {
  const lanes = layout.order.length;
  const groups = layout.groups;
  let band = groups.length > 0 ? header : 0;
  const room = (h: number) =>
    lanes > 0 ? Math.max(0, height - groups.length * h) / lanes : 0;
  if (band > 0 && room(band) < MIN_LANE_WITH_HEADERS) {
    band = 0;
  }
  const laneHeight = room(band);
  const tops = new Float64Array(lanes);
  const groupTops: number[] = [];
  if (groups.length === 0) {
    for (let l = 0; l < lanes; l++) {
      tops[l] = l * laneHeight;
    }
  } else {
    for (const [g, group] of groups.entries()) {
      const top = group.first * laneHeight + g * band;
      groupTops.push(top);
      for (let l = 0; l < group.count; l++) {
        tops[group.first + l] = top + band + l * laneHeight;
      }
    }
  }
  return { tops, laneHeight, header: band, groupTops };
}

/** Content height of `layout` at `laneHeight` per lane and `header` per group band. */
export function layoutHeight(
  layout: ILaneLayout,
  laneHeight: number,
  header: number
): number {
  return (
    layout.order.length * laneHeight +
    (layout.groups.length > 0 ? layout.groups.length * header : 0)
  );
}

/** The lane at `y` pixels from the top of the plot, or -1 (a group band, or outside). */
export function laneAt(geometry: ILaneGeometry, y: number): number {
  const { tops, laneHeight } = geometry;
  let lo = 0;
  let hi = tops.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (tops[mid] <= y) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  const lane = lo - 1;
  return lane >= 0 && y < tops[lane] + laneHeight ? lane : -1;
}

/** A stretch of the view in which a cluster worker was not there. */
export interface IAbsence {
  /** Its start and end, within the view (seconds since t0). */
  from: number;
  to: number;
  /** `joined`: before the worker joined; `left`: after it left. */
  why: 'joined' | 'left';
  /** When it joined or left. */
  at: number;
}

/**
 * The stretches of the view [v0, v1] in which a worker's lanes are empty: before it
 * joined (`joined` seconds since t0; null: there from the start) and from when it left
 * (`left`; null: still there). Its lanes start and end with the worker.
 */
export function absences(
  joined: number | null,
  left: number | null,
  v0: number,
  v1: number
): IAbsence[] {
  const out: IAbsence[] = [];
  if (joined !== null && joined > v0 && v1 > v0) {
    out.push({ from: v0, to: Math.min(joined, v1), why: 'joined', at: joined });
  }
  if (left !== null && left <= v1 && v1 > v0) {
    out.push({ from: Math.max(left, v0), to: v1, why: 'left', at: left });
  }
  return out;
}

/** Whether a worker was not there at time `t`: `joined` (not yet), `left`, or null. */
export function absentAt(
  joined: number | null,
  left: number | null,
  t: number
): 'joined' | 'left' | null {
  if (joined !== null && t < joined) {
    return 'joined';
  }
  return left !== null && t >= left ? 'left' : null;
}
