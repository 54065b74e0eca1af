/**
 * Level of detail for the task stream (pure, no DOM): per-lane arrays sorted by start,
 * binary search of the visible window, and sub-pixel tasks merged into per-pixel-column
 * runs, so a frame costs O(visible tasks + lanes x width) fills whatever the run's size.
 * The task stream paints each lane with paintLane, straight into its pixel buffer, then
 * copies the lanes' rows with copyLaneRows.
 */

import { Column } from './columns';

/** First index i in [from, n) with arr[i] >= value (n when none). */
export function lowerBound(
  arr: ArrayLike<number>,
  n: number,
  value: number,
  from = 0
): number {
  let lo = from;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/** The tasks of one lane (worker), kept sorted by start time. */
export class LaneIndex {
  /** Task rows (indices into the run's task table), in start order. */
  readonly rows = new Column(Int32Array);
  readonly starts = new Column(Float64Array);
  readonly stops = new Column(Float64Array);
  /**
   * The colour index of each task (its group, an action's kind), beside it: a frame reads
   * it once per pixel column, where the run's own column (rows of a lane far apart in it)
   * would cost a cache miss each.
   */
  readonly groups = new Column(Uint16Array);
  /** Sum of the durations of the tasks before each index (length + 1 entries). */
  readonly cumulative = new Column(Float64Array);
  /** Longest task in each block of BLOCK tasks (for aggregated columns). */
  readonly blockMax = new Column(Float64Array);

  get length(): number {
    return this.rows.length;
  }

  /** Longest task in the lane: how far back from a window a visible task may start. */
  get maxDuration(): number {
    return this._maxDuration;
  }

  push(row: number, start: number, stop: number, group = 0): void {
    if (
      this.starts.length > 0 &&
      start < this.starts.data[this.starts.length - 1]
    ) {
      this._sorted = false;
    }
    this.rows.push(row);
    this.starts.push(start);
    this.stops.push(stop);
    this.groups.push(group);
    this._index(this.length - 1);
  }

  /** Update the duration sums and block maxima for the task at `i` (appended last). */
  private _index(i: number): void {
    const d = this.stops.data[i] - this.starts.data[i];
    if (d > this._maxDuration) {
      this._maxDuration = d;
    }
    if (this.cumulative.length === 0) {
      this.cumulative.push(0);
    }
    this.cumulative.push(this.cumulative.data[i] + d);
    const b = Math.floor(i / BLOCK);
    if (b === this.blockMax.length) {
      this.blockMax.push(d);
    } else if (d > this.blockMax.data[b]) {
      this.blockMax.data[b] = d;
    }
  }

  /** Longest task among indices [i, j). */
  maxDurationIn(i: number, j: number): number {
    let m = 0;
    const bm = this.blockMax.data;
    for (let b = Math.floor(i / BLOCK); b * BLOCK < j; b++) {
      if (bm[b] > m) {
        m = bm[b];
      }
    }
    return m;
  }

  /** Restore start order after out-of-order appends (rare: tasks arrive by stop). */
  ensureSorted(): void {
    if (this._sorted) {
      return;
    }
    const n = this.length;
    const starts = this.starts.data;
    const order = Array.from({ length: n }, (_, i) => i);
    order.sort((a, b) => starts[a] - starts[b] || a - b);
    const rows = this.rows.data.slice(0, n);
    const s = starts.slice(0, n);
    const e = this.stops.data.slice(0, n);
    const g = this.groups.data.slice(0, n);
    for (let i = 0; i < n; i++) {
      const j = order[i];
      this.rows.data[i] = rows[j];
      this.starts.data[i] = s[j];
      this.stops.data[i] = e[j];
      this.groups.data[i] = g[j];
    }
    this.cumulative.clear();
    this.blockMax.clear();
    this._maxDuration = 0;
    for (let i = 0; i < n; i++) {
      this._index(i);
    }
    this._sorted = true;
  }

  /** Index of the first task that may overlap [t, ...). */
  firstVisible(t: number): number {
    this.ensureSorted();
    return lowerBound(this.starts.data, this.length, t - this._maxDuration);
  }

  /** The row of the task under time `t` (within `tolerance` seconds), or -1. */
  hitTest(t: number, tolerance: number): number {
    const n = this.length;
    const starts = this.starts.data;
    const stops = this.stops.data;
    let best = -1;
    let bestDistance = Infinity;
    for (let i = this.firstVisible(t - tolerance); i < n; i++) {
      const s = starts[i];
      if (s > t + tolerance) {
        break;
      }
      const e = stops[i];
      const d = t < s ? s - t : t > e ? t - e : 0;
      if (d <= tolerance && d < bestDistance) {
        best = this.rows.data[i];
        bestDistance = d;
      }
    }
    return best;
  }

  private _sorted = true;
  private _maxDuration = 0;
}

/** Tasks per block of the block maxima. */
const BLOCK = 64;

/** Tasks in one pixel column above which the column is summed, not iterated. */
const DENSE = 16;

/**
 * Opacities of the levels 0..3 paintLane paints at (a palette holds a colour index's
 * four at `group * 4 + level`): 3 for a task at least a pixel wide, and for a merged
 * column by how much of it tasks cover (coverageLevel).
 */
export const LEVEL_ALPHA = [0.4, 0.6, 0.8, 1];

/** Opacity level (0..3) of a merged column, from the fraction of it tasks cover. */
function coverageLevel(coverage: number): number {
  return coverage >= 0.9 ? 3 : coverage >= 0.5 ? 2 : coverage >= 0.2 ? 1 : 0;
}

/** A series reduced to at most one (min, max, last) triple per pixel column. */
export interface IDecimated {
  x: number[];
  min: number[];
  max: number[];
  /** The column's last value (so consecutive columns join without spikes). */
  last: number[];
}

/**
 * Decimate a time series (times sorted) for drawing `width` pixels over [v0, v1]: the
 * points in each pixel column collapse to their min, max and last value; one point on
 * either side of the window is kept so lines run to the edges.
 */
export function decimate(
  time: ArrayLike<number>,
  values: ArrayLike<number>,
  n: number,
  v0: number,
  v1: number,
  width: number
): IDecimated {
  const out: IDecimated = { x: [], min: [], max: [], last: [] };
  if (n === 0 || !(v1 > v0) || width <= 0) {
    return out;
  }
  const k = width / (v1 - v0);
  const from = Math.max(0, lowerBound(time, n, v0) - 1);
  let to = lowerBound(time, n, v1);
  to = Math.min(n - 1, to);
  let col = NaN;
  for (let i = from; i <= to; i++) {
    const x = (time[i] - v0) * k;
    const c = x < 0 ? x : x > width ? x : Math.floor(x);
    const v = values[i];
    if (c === col) {
      const j = out.x.length - 1;
      if (v < out.min[j]) {
        out.min[j] = v;
      }
      if (v > out.max[j]) {
        out.max[j] = v;
      }
      out.last[j] = v;
    } else {
      col = c;
      out.x.push(c < 0 || c > width ? x : c);
      out.min.push(v);
      out.max.push(v);
      out.last.push(v);
    }
  }
  return out;
}

/**
 * A decimated series (as IDecimated) in typed arrays kept from frame to frame: a view
 * that draws many series reuses one and allocates nothing per frame.
 */
export class DecimatedBuffer {
  x = new Float64Array(64);
  min = new Float64Array(64);
  max = new Float64Array(64);
  last = new Float64Array(64);
  /** Points (pixel columns) in use. */
  length = 0;

  /** Room for `n` points (keeps none). */
  reserve(n: number): void {
    if (n > this.x.length) {
      const size = Math.max(n, this.x.length * 2);
      this.x = new Float64Array(size);
      this.min = new Float64Array(size);
      this.max = new Float64Array(size);
      this.last = new Float64Array(size);
    }
    this.length = 0;
  }
}

/** decimate(), into `out` (its arrays reused): the same points. */
export function decimateInto(
  time: ArrayLike<number>,
  values: ArrayLike<number>,
  n: number,
  v0: number,
  v1: number,
  width: number,
  out: DecimatedBuffer
): DecimatedBuffer {
  out.length = 0;
  if (n === 0 || !(v1 > v0) || width <= 0) {
    return out;
  }
  const k = width / (v1 - v0);
  const from = Math.max(0, lowerBound(time, n, v0) - 1);
  const to = Math.min(n - 1, lowerBound(time, n, v1));
  out.reserve(to - from + 1);
  const xs = out.x;
  const mins = out.min;
  const maxs = out.max;
  const lasts = out.last;
  let j = -1;
  let col = NaN;
  for (let i = from; i <= to; i++) {
    const x = (time[i] - v0) * k;
    const c = x < 0 ? x : x > width ? x : Math.floor(x);
    const v = values[i];
    if (c === col) {
      if (v < mins[j]) {
        mins[j] = v;
      }
      if (v > maxs[j]) {
        maxs[j] = v;
      }
      lasts[j] = v;
    } else {
      col = c;
      j++;
      xs[j] = c < 0 || c > width ? x : c;
      mins[j] = v;
      maxs[j] = v;
      lasts[j] = v;
    }
  }
  out.length = j + 1;
  return out;
}

/**
 * The vertices of a step line through a decimated series, as (x, value) pairs: the value
 * holds until the next column, where the line runs across at the held value, then spans
 * the column's min..max vertically and leaves at its last value. (Joining a column's max
 * straight to the next column's x would draw a diagonal whenever a value rose and fell
 * within one pixel column and then held.)
 */
export function stepVertices(d: IDecimated): [number, number][] {
  const out: [number, number][] = [];
  let held = NaN;
  for (let i = 0; i < d.x.length; i++) {
    const x = d.x[i];
    if (i > 0) {
      out.push([x, held]);
    }
    out.push([x, d.min[i]], [x, d.max[i]], [x, d.last[i]]);
    held = d.last[i];
  }
  return out;
}

/** Pack an RGB colour as a little-endian RGBA pixel (opaque). */
export function packPixel(r: number, g: number, b: number): number {
  return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

/** Where the lanes are in a pixel buffer (as copyLaneRows takes them). */
export interface IPixelGrid {
  /** Width and height of the pixel buffer. */
  width: number;
  height: number;
  /** Top (inclusive) and bottom (exclusive) device row of each lane. */
  laneTop: ArrayLike<number>;
  laneBottom: ArrayLike<number>;
}

/**
 * Copy each lane's first row (`laneTop`) to its other rows (to `laneBottom`), whole: the
 * lanes' rows must not hold anything else.
 */
export function copyLaneRows(pixels: Uint32Array, grid: IPixelGrid): void {
  const { width, height, laneTop, laneBottom } = grid;
  for (let lane = 0; lane < laneTop.length; lane++) {
    const y0 = laneTop[lane];
    if (y0 < 0 || y0 >= height) {
      continue;
    }
    const from = y0 * width;
    const y1 = Math.min(height, laneBottom[lane]);
    for (let y = y0 + 1; y < y1; y++) {
      pixels.copyWithin(y * width, from, from + width);
    }
  }
}

/**
 * Where paintLane paints (a pixel buffer, the row of the lane being painted, a palette)
 * and what it counted: the rectangles it filled (`rects`, of which `marked` are of colour
 * index `mark`) and the tasks visited. One is kept by a view and reused frame after
 * frame: a frame allocates nothing.
 */
export class LanePainter {
  pixels: Uint32Array = new Uint32Array(0);
  /** Width of the pixel buffer (device pixels in a row). */
  width = 0;
  /** Device pixels per CSS pixel. */
  dpr = 1;
  /**
   * `palette[group * 4 + level]`: packed colours (packPixel), already blended with the
   * background at the opacities of LEVEL_ALPHA.
   */
  palette: Uint32Array = new Uint32Array(4);
  /** Colour indices of the palette (higher ones get the last). */
  groups = 1;
  /** Index in `pixels` of the first pixel of the row painted. */
  offset = 0;
  /** Rectangles painted (a task at least a pixel wide, or a run of merged columns). */
  rects = 0;
  /** Tasks visited. */
  visited = 0;
  /** The colour index counted in `marked` (-1: none). */
  mark = -1;
  /** Rectangles of colour index `mark`. */
  marked = 0;

  /** Zero the counts (before a frame). */
  reset(): void {
    this.rects = 0;
    this.visited = 0;
    this.marked = 0;
  }

  /**
   * Paint [x0, x1) (CSS pixels) of the row at `offset` in colour `group` at opacity
   * `level`: scaled by `dpr` and rounded to device pixels (at least one), clipped to
   * [0, width). Counted (in `rects`, and in `marked` when of colour `mark`) even when
   * nothing of it is inside the row.
   */
  fill(x0: number, x1: number, group: number, level: number): void {
    this.rects++;
    if (group === this.mark) {
      this.marked++;
    }
    const dpr = this.dpr;
    let a = Math.round(x0 * dpr);
    let b = Math.round(x1 * dpr);
    if (b <= a) {
      b = a + 1;
    }
    if (a < 0) {
      a = 0;
    }
    if (b > this.width) {
      b = this.width;
    }
    if (a >= b) {
      return;
    }
    const groups = this.groups;
    const color =
      this.palette[(group < groups ? group : groups - 1) * 4 + level];
    const pixels = this.pixels;
    const from = this.offset + a;
    const to = this.offset + b;
    if (b - a < 16) {
      for (let x = from; x < to; x++) {
        pixels[x] = color;
      }
    } else {
      pixels.fill(color, from, to);
    }
  }
}

/**
 * Paint lane `lane`'s tasks visible in the time window [v0, v1] drawn `width` CSS pixels
 * wide into the row of `painter`, coloured by `groupOfRow[row]` (null: by the lane's own
 * `groups`), counting the rectangles filled and the tasks visited in `painter`. Tasks at
 * least a pixel wide are filled as they are (snapped to whole pixels, opacity level 3);
 * narrower ones are merged per pixel column (coloured by the widest task in the column,
 * opacity by the covered fraction, coverageLevel), and adjacent columns of the same
 * colour and opacity into one run, filled once. A dense column is summed (prefix sums)
 * rather than visited task by task.
 *
 * The merged columns of sub-pixel tasks are the bulk of a zoomed-out frame (a rectangle
 * for nearly every pixel column of every lane): here each costs a few writes to the row.
 * With hundreds of lanes of sub-pixel tasks the loop runs for every task on screen, up
 * to a million times a frame: its state is in locals, and a column's colour is looked up
 * once, when it is closed (a lane's rows are far apart in the run's group column: a
 * cache miss each).
 */
export function paintLane(
  lane: LaneIndex,
  groupOfRow: ArrayLike<number> | null,
  v0: number,
  v1: number,
  width: number,
  painter: LanePainter
): void {
  if (!(v1 > v0) || width <= 0 || lane.length === 0) {
    return;
  }
  const k = width / (v1 - v0);
  const pixelTime = (v1 - v0) / width;
  const n = lane.length;
  const starts = lane.starts.data;
  const stops = lane.stops.data;
  const rows = lane.rows.data;
  const groups = lane.groups.data;
  const cumulative = lane.cumulative.data;
  const byRow = groupOfRow !== null;
  // the pixel column being merged (-1: none), where it ends, and what it holds so far
  let col = -1;
  let colEnd = 0;
  let cover = 0;
  let best = -1;
  let bestAt = -1;
  // the last run of merged columns, not painted yet (runTo < 0: none): extendable while
  // colour and opacity stay the same
  let runFrom = 0;
  let runTo = -1;
  let runGroup = 0;
  let runLevel = 0;
  let dense = false;
  let visited = 0;
  let i = lane.firstVisible(v0);
  while (i < n) {
    const s = starts[i];
    if (s > v1) {
      break;
    }
    const e = stops[i];
    visited++;
    if (e < v0) {
      i++;
      continue;
    }
    const x0 = (s - v0) * k;
    const x1 = (e - v0) * k;
    if (x1 - x0 >= 1) {
      if (col >= 0) {
        // close the column (into the run), then the run: the wide task is painted next
        const group = byRow ? groupOfRow[rows[bestAt]] : groups[bestAt];
        const level = coverageLevel(cover);
        if (runTo === col && runGroup === group && runLevel === level) {
          runTo = col + 1;
        } else {
          if (runTo >= 0) {
            painter.fill(runFrom, runTo, runGroup, runLevel);
          }
          runFrom = col;
          runTo = col + 1;
          runGroup = group;
          runLevel = level;
        }
        col = -1;
      }
      if (runTo >= 0) {
        painter.fill(runFrom, runTo, runGroup, runLevel);
        runTo = -1;
      }
      // snapped to whole pixels
      const a = Math.max(-1, Math.round(x0));
      const b = Math.max(a + 1, Math.min(width + 1, Math.round(x1)));
      painter.fill(a, b, byRow ? groupOfRow[rows[i]] : groups[i], 3);
      i++;
      continue;
    }
    // floor(x0) clamped to [0, width - 1] (truncation: x0 >= 0 there)
    let c = x0 > 0 ? (x0 < width ? x0 | 0 : width) : 0;
    if (c > width - 1) {
      c = width - 1;
    }
    if (c !== col) {
      if (col >= 0) {
        const group = byRow ? groupOfRow[rows[bestAt]] : groups[bestAt];
        const level = coverageLevel(cover);
        if (runTo === col && runGroup === group && runLevel === level) {
          runTo = col + 1;
        } else {
          if (runTo >= 0) {
            painter.fill(runFrom, runTo, runGroup, runLevel);
          }
          runFrom = col;
          runTo = col + 1;
          runGroup = group;
          runLevel = level;
        }
      }
      col = c;
      colEnd = v0 + (c + 1) * pixelTime;
      cover = 0;
      best = -1;
      // tasks start in order: a column with no DENSE tasks after its first has none
      // after any other of its tasks either (a sparse column is asked once)
      dense = i + DENSE < n && starts[i + DENSE] < colEnd;
    }
    // a dense column: sum its tasks (prefix sums) instead of visiting them one by one,
    // unless one of them is wide enough to be drawn on its own
    if (dense && i + DENSE < n && starts[i + DENSE] < colEnd) {
      const j = lowerBound(starts, n, colEnd, i + DENSE);
      if (lane.maxDurationIn(i, j) * k < 1) {
        cover += (cumulative[j] - cumulative[i]) * k;
        if (best < 0.5) {
          best = 0.5;
          bestAt = (i + j) >>> 1;
        }
        i = j;
        continue;
      }
    }
    const w = x1 - x0;
    cover += w;
    if (w > best) {
      best = w;
      bestAt = i;
    }
    i++;
  }
  if (col >= 0) {
    const group = byRow ? groupOfRow[rows[bestAt]] : groups[bestAt];
    const level = coverageLevel(cover);
    if (runTo === col && runGroup === group && runLevel === level) {
      runTo = col + 1;
    } else {
      if (runTo >= 0) {
        painter.fill(runFrom, runTo, runGroup, runLevel);
      }
      runFrom = col;
      runTo = col + 1;
      runGroup = group;
      runLevel = level;
    }
  }
  if (runTo >= 0) {
    painter.fill(runFrom, runTo, runGroup, runLevel);
  }
  painter.visited += visited;
}
