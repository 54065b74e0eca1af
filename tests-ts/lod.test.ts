import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  copyLaneRows,
  decimate,
  DecimatedBuffer,
  decimateInto,
  LaneIndex,
  LanePainter,
  lowerBound,
  packPixel,
  paintLane,
  stepVertices
} from '../src/lod';

/** A lane of tasks (row i: tasks[i]), of colour index groups[i] (default 0). */
function lane(tasks: [number, number][], groups: number[] = []): LaneIndex {
  const l = new LaneIndex();
  tasks.forEach(([s, e], row) => l.push(row, s, e, groups[row] ?? 0));
  return l;
}

/** The tests' packed colour of colour index `group` at opacity level `level`. */
function color(group: number, level: number): number {
  return 10 * (group + 1) + level;
}

/**
 * A painter over `rows` rows of `width` pixels, all 0 (the background), painting row 0,
 * with the palette `color` of `groups` colour indices.
 */
function painter(width: number, rows = 1, groups = 10, dpr = 1): LanePainter {
  const p = new LanePainter();
  p.pixels = new Uint32Array(width * rows);
  p.width = width;
  p.dpr = dpr;
  p.groups = groups;
  p.palette = Uint32Array.from({ length: groups * 4 }, (_, i) =>
    color(i >> 2, i & 3)
  );
  return p;
}

/** Row `r` of a painter's pixels. */
function pixelRow(p: LanePainter, r = 0): number[] {
  return Array.from(p.pixels.subarray(r * p.width, (r + 1) * p.width));
}

describe('lod', () => {
  it('finds the first element not below a value', () => {
    const a = [1, 2, 2, 5, 9];
    assert.equal(lowerBound(a, 5, 0), 0);
    assert.equal(lowerBound(a, 5, 2), 1);
    assert.equal(lowerBound(a, 5, 3), 3);
    assert.equal(lowerBound(a, 5, 10), 5);
  });

  it('draws wide tasks as they are and skips those outside the window', () => {
    const l = lane([
      [0, 1],
      [2, 3],
      [10, 11]
    ]);
    // 2 px a second: [0, 1] is pixels 0-1, [2, 3] pixels 4-5, [10, 11] after the view
    const p = painter(8);
    paintLane(l, [4, 5, 6], 0, 4, 8, p);
    const [a, b] = [color(4, 3), color(5, 3)];
    assert.deepEqual(pixelRow(p), [a, a, 0, 0, b, b, 0, 0]);
    assert.deepEqual([p.rects, p.visited], [2, 2]);
    // snapped to whole pixels: [0.6, 2.4) is pixel 1, [4.4, 6.8) pixels 4 to 6
    const snapped = painter(8);
    const l2 = lane([
      [0.3, 1.2],
      [2.2, 3.4]
    ]);
    paintLane(l2, null, 0, 4, 8, snapped);
    const c = color(0, 3);
    assert.deepEqual(pixelRow(snapped), [0, c, 0, 0, c, c, c, 0]);
  });

  it('finds a long task that starts before the window', () => {
    const l = lane([
      [0, 100],
      [101, 102]
    ]);
    const p = painter(10);
    paintLane(l, [0, 1], 50, 60, 10, p);
    // the whole row is the first task's (clipped at both edges), none the second's
    assert.deepEqual(pixelRow(p), new Array(10).fill(color(0, 3)));
    assert.deepEqual([p.rects, p.visited], [1, 1]);
    assert.equal(l.maxDurationIn(0, 2), 100);
  });

  it('merges sub-pixel tasks into per-column runs', () => {
    // 10,000 tasks of 1 ms back to back over 10 s, drawn 100 px wide: 100 tasks per px
    const tasks: [number, number][] = [];
    for (let i = 0; i < 10000; i++) {
      tasks.push([i * 0.001, i * 0.001 + 0.001]);
    }
    const l = lane(tasks);
    // the lane's row is the fourth of the buffer
    const p = painter(100, 4);
    p.offset = 3 * 100;
    paintLane(l, new Uint16Array(10000), 0, 10, 100, p);
    // dense columns are summed, not visited task by task
    assert.ok(p.visited < 1000, String(p.visited));
    // one group, fully covered: a single run across the width, at full opacity
    assert.equal(p.rects, 1);
    for (const r of [0, 1, 2]) {
      assert.deepEqual(pixelRow(p, r), new Array(100).fill(0));
    }
    assert.deepEqual(pixelRow(p, 3), new Array(100).fill(color(0, 3)));
  });

  it('keeps sparse sub-pixel tasks visible with a lower opacity', () => {
    const l = lane([
      [0.0, 0.001],
      [5.0, 5.001]
    ]);
    // 1 px a second: each task covers a thousandth of its column (level 0)
    const p = painter(10);
    paintLane(l, [1, 2], 0, 10, 10, p);
    const [a, b] = [color(1, 0), color(2, 0)];
    assert.deepEqual(pixelRow(p), [a, 0, 0, 0, 0, b, 0, 0, 0, 0]);
    assert.equal(p.rects, 2);
  });

  it('gives a merged column the opacity of its coverage and the widest colour', () => {
    // 1 px a second; the lane's own groups colour the tasks
    const l = lane(
      [
        [0, 0.1], // covers 0.1 of column 0: level 0
        [1, 1.3], // 0.3: level 1
        [2, 2.6], // 0.6: level 2
        [3, 3.95], // 0.95: level 3
        [4, 4.2], // column 4: 0.2 + 0.4 = 0.6 (level 2), coloured by the wider task
        [4.3, 4.7],
        [5, 5.6], // same colour and level as column 4: the same run
        [6, 6.55] // same level, another colour: a run of its own
      ],
      [0, 0, 0, 0, 1, 2, 2, 1]
    );
    const p = painter(8);
    paintLane(l, null, 0, 8, 8, p);
    assert.deepEqual(pixelRow(p), [
      color(0, 0),
      color(0, 1),
      color(0, 2),
      color(0, 3),
      color(2, 2),
      color(2, 2),
      color(1, 2),
      0
    ]);
    // columns 0, 1, 2 and 3 on their own, 4-5 in one run, 6 on its own
    assert.deepEqual([p.rects, p.visited], [6, 8]);
  });

  it('sorts out-of-order appends and hit-tests by time', () => {
    const l = new LaneIndex();
    l.push(0, 5, 6);
    l.push(1, 1, 2);
    l.push(2, 3, 4);
    assert.equal(l.hitTest(1.5, 0), 1);
    assert.equal(l.hitTest(5.5, 0), 0);
    assert.equal(l.hitTest(4.05, 0.1), 2);
    assert.equal(l.hitTest(4.5, 0.1), -1);
    assert.deepEqual(Array.from(l.starts.view()), [1, 3, 5]);
  });

  it('stays fast on a million tasks', () => {
    const n = 1_000_000;
    const l = new LaneIndex();
    for (let i = 0; i < n; i++) {
      l.push(i, i * 1e-4, i * 1e-4 + 9e-5);
    }
    const groups = new Uint16Array(n).map((_, i) => i % 7);
    const p = painter(1000, 1, 7);
    const t = performance.now();
    paintLane(l, groups, 0, 100, 1000, p);
    const full = performance.now() - t;
    // 1000 tasks a column, 0.9 of it covered: every column painted, opacity 2 or 3
    // (0.9 is where 2 turns to 3: rounding decides)
    const level = (v: number) => v % 10;
    const group = (v: number) => Math.floor(v / 10) - 1;
    const row = pixelRow(p);
    assert.ok(
      row.every(v => v > 0 && group(v) < 7 && level(v) >= 2),
      row.join(' ')
    );
    assert.ok(p.visited < 3000, String(p.visited));
    assert.ok(p.rects <= 1000);
    const zoomed = painter(1000, 1, 7);
    paintLane(l, groups, 40, 40.5, 1000, zoomed);
    assert.equal(zoomed.visited < 6000, true);
    assert.equal(zoomed.rects <= 1000, true);
    // 5 tasks of 0.18 px a column (4 to 6 where rounding moves one across)
    const zrow = pixelRow(zoomed);
    assert.ok(
      zrow.every(v => v > 0 && group(v) < 7 && level(v) >= 2),
      zrow.join(' ')
    );
    // not a timing assertion: a sanity bound far above the expected few milliseconds
    assert.equal(full < 2000, true);
  });
});

describe('decimate', () => {
  it('keeps one min/max/last per pixel column and a point beyond each edge', () => {
    const n = 1000;
    const time = Float64Array.from({ length: n }, (_, i) => i * 0.01);
    const values = Float64Array.from({ length: n }, (_, i) => (i % 10) * 1.0);
    const d = decimate(time, values, n, 1, 2, 10);
    // columns 0..9 plus the points before 1.0 and at/after 2.0
    assert.equal(d.x.length, 12);
    assert.ok(d.x[0] < 0);
    assert.equal(d.min[1], 0);
    assert.equal(d.max[1], 9);
    assert.equal(d.last[1], 9);
    assert.deepEqual(decimate(time, values, 0, 0, 1, 10).x, []);
  });
});

describe('stepVertices', () => {
  it('holds a value across columns: no diagonal after a rise and fall in one column', () => {
    // cache occupancy: 0, up to 5 and back to 0 within column 10, held until column 90
    const time = Float64Array.from([0, 1.0, 1.001, 1.002, 9.0]);
    const values = Float64Array.from([0, 3, 5, 0, 2]);
    const d = decimate(time, values, 5, 0, 10, 100);
    const v = stepVertices(d);
    for (let i = 1; i < v.length; i++) {
      const [x0, y0] = v[i - 1];
      const [x1, y1] = v[i];
      assert.ok(
        x0 === x1 || y0 === y1,
        `segment ${i} is diagonal: ${v[i - 1]} -> ${v[i]}`
      );
    }
    assert.deepEqual(v[v.length - 1], [90, 2]);
    assert.ok(v.some(([x, y]) => x === 10 && y === 5)); // the spike is drawn
    assert.ok(v.some(([x, y]) => x === 90 && y === 0)); // 0 held until the next change
    assert.deepEqual(stepVertices(decimate(time, values, 0, 0, 1, 10)), []);
  });
});

describe('lod: dense columns', () => {
  it('keeps a wide task among dense ones and sums coverage', () => {
    const l = new LaneIndex();
    // 100 tiny tasks in [0, 0.1), then one long task [0.1, 5), then tiny ones again
    for (let i = 0; i < 100; i++) {
      l.push(i, i * 0.001, i * 0.001 + 0.0005);
    }
    l.push(100, 0.1, 5);
    for (let i = 0; i < 100; i++) {
      l.push(101 + i, 5 + i * 0.001, 5 + i * 0.001 + 0.001);
    }
    const groups = new Uint16Array(201).map((_, r) => (r === 100 ? 9 : 1));
    // 10 px a second
    const p = painter(100);
    paintLane(l, groups, 0, 10, 100, p);
    const want = new Array(100).fill(0);
    // column 0: 100 tasks x 0.5 ms = 50 ms of a 100 ms column: half covered (level 2)
    want[0] = color(1, 2);
    // the long task on its own, [1, 50)
    want.fill(color(9, 3), 1, 50);
    // column 50: 100 tasks x 1 ms, the whole column (level 3)
    want[50] = color(1, 3);
    assert.deepEqual(pixelRow(p), want);
    assert.equal(p.rects, 3);
    assert.ok(Math.abs(l.cumulative.data[201] - (0.05 + 4.9 + 0.1)) < 1e-9);
  });

  it('sums the tasks of a dense column instead of visiting them', () => {
    // 1 px a second: 100 tasks of 3 ms in column 0 (0.3 of it covered: level 1), 100
    // of 7 ms in column 1 (0.7: level 2)
    const tasks: [number, number][] = [];
    for (let i = 0; i < 100; i++) {
      tasks.push([i * 0.01, i * 0.01 + 0.003]);
    }
    for (let i = 0; i < 100; i++) {
      tasks.push([1 + i * 0.01, 1 + i * 0.01 + 0.007]);
    }
    const p = painter(10);
    paintLane(lane(tasks, new Array(200).fill(3)), null, 0, 10, 10, p);
    assert.deepEqual(pixelRow(p), [
      color(3, 1),
      color(3, 2),
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0
    ]);
    // one rectangle a column (their levels differ); one task visited a column
    assert.deepEqual([p.rects, p.visited], [2, 2]);
  });
});

describe('lod: pixels', () => {
  it('paints lanes into a pixel buffer, clipped to it, and copies their rows', () => {
    const a = lane(
      [
        [-1, 2], // clipped on the left
        [4, 7] // clipped on the right
      ],
      [0, 0]
    );
    const b = lane(
      [
        [-3, -2], // before the view (visited: the lane's longest task is 4 s)
        [3, 3.1], // thinner than a pixel: one pixel, level 0
        [6, 10] // after the view (not visited)
      ],
      [1, 1, 1]
    );
    const palette = new Uint32Array(8);
    palette[0 * 4 + 3] = 7;
    palette[1 * 4 + 0] = 9;
    // lanes of two rows, at rows 0 and 2 of 4, painted 5 CSS pixels wide
    const grid = { width: 5, height: 4, laneTop: [0, 2], laneBottom: [2, 4] };
    for (const [dpr, want] of [
      [1, [7, 7, 0, 0, 7, 0, 0, 0, 9, 0]],
      // twice the device pixels: [-1, 2) is [0, 4), [4, 6) is [8, 10), [3, 4) [6, 8)
      [2, [7, 7, 7, 7, 0, 0, 0, 0, 7, 7, 0, 0, 0, 0, 0, 0, 9, 9, 0, 0]]
    ] as [number, number[]][]) {
      const width = 5 * dpr;
      const p = new LanePainter();
      p.pixels = new Uint32Array(width * 4);
      p.width = width;
      p.dpr = dpr;
      p.palette = palette;
      p.groups = 2;
      [a, b].forEach((l, i) => {
        p.offset = grid.laneTop[i] * width;
        paintLane(l, null, 0, 5, 5, p);
      });
      const [rowA, rowB] = [want.slice(0, width), want.slice(width)];
      // each lane's first row painted, nothing past its ends (in the rows below)
      const empty = new Array(width).fill(0);
      assert.deepEqual(
        [0, 1, 2, 3].map(r => pixelRow(p, r)),
        [rowA, empty, rowB, empty]
      );
      copyLaneRows(p.pixels, { ...grid, width });
      assert.deepEqual(Array.from(p.pixels), [
        ...rowA,
        ...rowA,
        ...rowB,
        ...rowB
      ]);
      assert.deepEqual([p.rects, p.visited], [3, 4]);
    }
    assert.equal(packPixel(1, 2, 3), 0xff030201);
  });
});

describe("lod: the lane's own groups", () => {
  /** A deterministic lane: sub-pixel, dense and wide tasks, pushed partly out of order. */
  function mixed(): { lane: LaneIndex; groups: Uint16Array } {
    const n = 5000;
    const groups = new Uint16Array(n);
    const tasks: [number, number][] = [];
    let seed = 7;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    let t = 0;
    for (let r = 0; r < n; r++) {
      const d = r % 500 === 0 ? 2 : rand() < 0.3 ? 0.0001 : 0.02 * rand();
      tasks.push([t, t + d]);
      groups[r] = Math.floor(rand() * 9);
      t += rand() < 0.1 ? 0 : 0.01 * rand();
    }
    const lane = new LaneIndex();
    // later rows first for a while: the lane sorts itself (and their groups) again
    const order = Array.from({ length: n }, (_, r) => r);
    order.splice(100, 200, ...order.slice(100, 300).reverse());
    for (const r of order) {
      lane.push(r, tasks[r][0], tasks[r][1], groups[r]);
    }
    return { lane, groups };
  }

  it("colours by the groups the lane holds as by the run's group column", () => {
    const { lane, groups } = mixed();
    const [lo, hi] = [lane.starts.data[0], lane.stops.data[lane.length - 1]];
    for (const [a, b, width] of [
      [lo, hi, 300],
      [lo, hi, 1000],
      [lo + (hi - lo) * 0.4, lo + (hi - lo) * 0.45, 800],
      [lo + 1, lo + 1.2, 50]
    ]) {
      const own = painter(width, 1, 9);
      const byRow = painter(width, 1, 9);
      paintLane(lane, null, a, b, width, own);
      paintLane(lane, groups, a, b, width, byRow);
      assert.ok(own.rects > 0);
      // something of several colours is painted, and the same everywhere
      const colours = new Set(pixelRow(own).filter(v => v > 0));
      assert.ok(colours.size > 1, `[${a}, ${b}] ${width}`);
      assert.deepEqual(pixelRow(own), pixelRow(byRow));
      assert.deepEqual([own.rects, own.visited], [byRow.rects, byRow.visited]);
    }
    // the re-sorted lane keeps each task's group beside it
    for (let i = 0; i < lane.length; i++) {
      assert.equal(lane.groups.data[i], groups[lane.rows.data[i]]);
    }
  });
});

describe('lod: paintLane', () => {
  /** A seeded generator of numbers in [0, 1). */
  function random(seed: number): () => number {
    return () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
  }

  /**
   * Lanes of sub-pixel tasks (sparse and dense runs of them), tasks a few pixels wide and
   * long ones, some in the same columns, then a sparse lane over the same time (tasks
   * far apart at any zoom); the rows' groups in a run-wide column.
   */
  function lanes(count: number, seed: number) {
    const rand = random(seed);
    const out: LaneIndex[] = [];
    const groupOfRow: number[] = [];
    let row = 0;
    for (let l = 0; l < count; l++) {
      const lane = new LaneIndex();
      let t = rand();
      for (let i = 0; i < 3000; i++) {
        const r = rand();
        const d = r < 0.01 ? 1 + 3 * rand() : r < 0.2 ? 0.05 * rand() : 0.002;
        const group = Math.floor(rand() * 7);
        groupOfRow.push((group + 3) % 7);
        lane.push(row++, t, t + d, group);
        // bursts of back-to-back tiny tasks (dense columns), gaps now and then
        t +=
          rand() < 0.2 ? 0.0002 : rand() < 0.05 ? 0.5 * rand() : 0.004 * rand();
      }
      out.push(lane);
    }
    // tasks of 0.01 ms to 1 s, 1 ms to 3 s apart: at each zoom, some a few pixels from
    // any other
    const sparse = new LaneIndex();
    const end = out[0].stops.data[out[0].length - 1];
    for (let t = rand(); t < end;) {
      const d = 1e-5 * 1e5 ** rand();
      const group = Math.floor(rand() * 7);
      groupOfRow.push((group + 3) % 7);
      sparse.push(row++, t, t + d, group);
      t += d + 1e-3 * 3000 ** rand();
    }
    out.push(sparse);
    return { lanes: out, groupOfRow: Uint16Array.from(groupOfRow) };
  }

  /** The colour index and opacity level of a pixel painted with `painter`'s palette. */
  const groupOf = (v: number) => Math.floor(v / 10) - 1;
  const levelOf = (v: number) => v % 10;

  /** The opacity level of a merged column `coverage` covered (LEVEL_ALPHA's four). */
  const coverageLevel = (coverage: number) =>
    coverage >= 0.9 ? 3 : coverage >= 0.5 ? 2 : coverage >= 0.2 ? 1 : 0;

  /**
   * Check the row `row` of device pixels painted for `lane` over [v0, v1] drawn `plotW`
   * CSS pixels wide at `dpr`, against bounds computed from the tasks alone:
   * - a task can only paint within its reach: from a CSS pixel before its start to two
   *   after its end (or after its start plus one), and a device pixel more each side
   *   (snapping and merging move a task less than that);
   * - so a painted pixel has the colour of a task that reaches it, at a level 0..3, and
   *   a pixel no task reaches is background;
   * - a task inside the view (but for the last CSS pixel, which rounding at a
   *   fractional width may leave out) paints something within its reach;
   * - a task whose reach no other task's overlaps, inside the row, is painted exactly:
   *   a task at least a pixel wide from round(x0) to round(x1) CSS pixels at level 3, a
   *   narrower one over the CSS pixel floor(x0) at the level of its width; each device
   *   edge rounded, at least one device pixel; the rest of its reach background.
   * Returns counts of the tasks for checks of the whole frame.
   */
  function checkLane(
    lane: LaneIndex,
    groupOfRow: ArrayLike<number> | null,
    v0: number,
    v1: number,
    plotW: number,
    dpr: number,
    row: number[],
    label: string
  ) {
    const width = row.length;
    const k = plotW / (v1 - v0);
    const groupAt = (i: number) =>
      groupOfRow === null ? lane.groups.data[i] : groupOfRow[lane.rows.data[i]];
    // per colour index, and for all, how many tasks reach each pixel (differences)
    const reach = Array.from({ length: 7 }, () => new Int32Array(width + 1));
    const all = new Int32Array(width + 1);
    const tasks: {
      i: number;
      x0: number;
      x1: number;
      lo: number;
      hi: number;
    }[] = [];
    const counts = {
      visible: 0, // tasks in the view
      wide: 0, // of which at least a pixel wide
      candidates: 0, // tasks from the longest task's length before v0 to v1
      isolatedWide: 0,
      isolatedNarrow: 0,
      isolatedMarked: 0 // isolated tasks of colour index 2
    };
    for (let i = 0; i < lane.length; i++) {
      const s = lane.starts.data[i];
      const e = lane.stops.data[i];
      if (s >= v0 - lane.maxDuration && s <= v1) {
        counts.candidates++;
      }
      const x0 = (s - v0) * k;
      const x1 = (e - v0) * k;
      // tasks ending more than a pixel before the view are not painted (nor after it)
      if (s > v1 || x1 < -1.5) {
        continue;
      }
      if (e >= v0) {
        counts.visible++;
        counts.wide += x1 - x0 >= 1 ? 1 : 0;
      }
      const lo = Math.floor((x0 - 1) * dpr) - 1;
      const hi = Math.ceil((Math.max(x1, x0 + 1) + 1) * dpr) + 2;
      const [a, b] = [Math.max(0, lo), Math.min(width, hi)];
      if (a < b) {
        reach[groupAt(i)][a]++;
        reach[groupAt(i)][b]--;
        all[a]++;
        all[b]--;
      }
      tasks.push({ i, x0, x1, lo, hi });
    }
    for (const d of [...reach, all]) {
      for (let x = 1; x <= width; x++) {
        d[x] += d[x - 1];
      }
    }
    row.forEach((v, x) => {
      if (all[x] === 0) {
        assert.equal(v, 0, `${label}: pixel ${x} reached by no task`);
      } else if (v !== 0) {
        const g = groupOf(v);
        assert.ok(g >= 0 && g < 7 && levelOf(v) <= 3, `${label}: ${v} at ${x}`);
        assert.ok(reach[g][x] > 0, `${label}: colour ${g} at ${x}`);
      }
    });
    for (const { i, x0, x1, lo, hi } of tasks) {
      const g = groupAt(i);
      if (x0 >= 0 && x1 <= plotW - 1) {
        const [a, b] = [Math.max(0, lo), Math.min(width, hi)];
        assert.ok(
          row.slice(a, b).some(v => v !== 0),
          `${label}: task ${i} at ${x0}..${x1} not painted`
        );
      }
      if (lo < 0 || hi > width) {
        continue;
      }
      let alone = true;
      for (let x = lo; x < hi && alone; x++) {
        alone = all[x] === 1;
      }
      if (!alone) {
        continue;
      }
      let want: number[];
      if (x1 - x0 >= 1) {
        counts.isolatedWide++;
        want = [Math.round(x0), Math.round(x1), color(g, 3)];
      } else {
        counts.isolatedNarrow++;
        const c = Math.floor(x0);
        want = [c, c + 1, color(g, coverageLevel(x1 - x0))];
      }
      counts.isolatedMarked += g === 2 ? 1 : 0;
      const from = Math.round(want[0] * dpr);
      const to = Math.max(from + 1, Math.round(want[1] * dpr));
      const expected = row
        .slice(lo, hi)
        .map((_, j) => (lo + j >= from && lo + j < to ? want[2] : 0));
      assert.deepEqual(
        row.slice(lo, hi),
        expected,
        `${label}: task ${i} alone at ${x0}..${x1}`
      );
    }
    return counts;
  }

  it('paints each lane in its row: every task in the view, its colours, no more', () => {
    const { lanes: ls, groupOfRow } = lanes(4, 11);
    const groups = 7;
    const lo = ls[0].starts.data[0];
    const hi = ls[0].stops.data[ls[0].length - 1];
    const totals = { dense: 0, wide: 0, isolatedWide: 0, isolatedNarrow: 0 };
    for (const [a, b, plotW, dpr] of [
      [lo, hi, 300, 1], // many tasks per column, dense ones summed
      [lo, hi, 927.5, 1.25], // a fractional width and pixel ratio
      [lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.32, 800, 2],
      [lo + 1, lo + 1.05, 500, 1], // wide tasks among sub-pixel ones
      [lo - 5, lo + 0.5, 640, 0.75], // the run starts inside the window
      [hi - 0.2, hi + 3, 200, 1]
    ]) {
      const width = Math.round(plotW * dpr);
      // lane i in row 2i + 1: rows 0, 2, ... are never painted (a fill past either
      // edge of a row would land in one)
      const rows = 2 * ls.length + 1;
      const painted: LanePainter[] = [];
      for (const byRow of [null, groupOfRow]) {
        const label = `[${a}, ${b}] ${plotW} x ${dpr}${byRow ? ' by row' : ''}`;
        const p = painter(width, rows, groups, dpr);
        p.mark = 2;
        ls.forEach((lane, i) => {
          p.offset = (2 * i + 1) * width;
          paintLane(lane, byRow, a, b, plotW, p);
        });
        for (let r = 0; r < rows; r += 2) {
          assert.ok(
            pixelRow(p, r).every(v => v === 0),
            `${label}: row ${r}`
          );
        }
        let visible = 0;
        let wide = 0;
        let candidates = 0;
        let isolated = 0;
        let isolatedMarked = 0;
        ls.forEach((lane, i) => {
          const c = checkLane(
            lane,
            byRow,
            a,
            b,
            plotW,
            dpr,
            pixelRow(p, 2 * i + 1),
            `${label}, lane ${i}`
          );
          visible += c.visible;
          wide += c.wide;
          candidates += c.candidates;
          isolated += c.isolatedWide + c.isolatedNarrow;
          isolatedMarked += c.isolatedMarked;
          totals.isolatedWide += c.isolatedWide;
          totals.isolatedNarrow += c.isolatedNarrow;
        });
        // a rectangle holds at least a task, a task alone is a rectangle of its own
        assert.ok(isolated <= p.rects && p.rects <= visible, label);
        assert.ok(isolatedMarked <= p.marked && p.marked <= p.rects, label);
        // tasks at least a pixel wide are visited one by one; no task before the
        // longest task's length before the view, nor after it
        assert.ok(wide <= p.visited && p.visited <= candidates, label);
        totals.dense += p.visited < visible ? 1 : 0;
        totals.wide += wide > 0 ? 1 : 0;
        painted.push(p);
      }
      // the run's groups are (g + 3) % 7 of the lanes': the same picture, recoloured
      const [own, byRow] = painted;
      const recoloured = Array.from(own.pixels, v =>
        v === 0 ? 0 : color((groupOf(v) + 3) % 7, levelOf(v))
      );
      assert.deepEqual(Array.from(byRow.pixels), recoloured);
      assert.deepEqual([byRow.rects, byRow.visited], [own.rects, own.visited]);
    }
    // the cases exercise summed columns (tasks not visited), tasks drawn on their own
    // and tasks checked pixel by pixel, wide and narrow
    assert.ok(
      Object.values(totals).every(n => n > 0),
      JSON.stringify(totals)
    );
  });

  it('paints nothing where there are no tasks', () => {
    const l = lane(
      [
        [1, 2],
        [2.5, 2.5001],
        [6, 7]
      ],
      [1, 2, 3]
    );
    for (const [v0, v1, width] of [
      [3, 5.5, 10], // between tasks (wide and narrow ones nearby)
      [-5, 0.5, 10], // before the first
      [7.5, 20, 10], // after the last
      [0, 10, 0], // no width
      [5, 5, 10], // an empty window
      [5, 4, 10] // a reversed one
    ]) {
      const p = painter(Math.max(1, width), 3);
      p.offset = p.width;
      paintLane(l, null, v0, v1, width, p);
      assert.ok(
        p.pixels.every(v => v === 0),
        `[${v0}, ${v1}] ${width}`
      );
      assert.equal(p.rects, 0);
    }
    const p = painter(10);
    paintLane(new LaneIndex(), null, 0, 10, 10, p);
    assert.ok(p.pixels.every(v => v === 0));
    assert.deepEqual([p.rects, p.visited], [0, 0]);
  });

  it('counts the rectangles of the marked colour; indices past the palette get its last', () => {
    const l = lane(
      [
        [0, 1],
        [2, 3],
        [4, 4.5], // half a column: level 2
        [5, 6]
      ],
      [0, 2, 6, 2]
    );
    const p = painter(6, 1, 3); // colours 0, 1 and 2: 6 is painted as 2
    p.mark = 2;
    paintLane(l, null, 0, 6, 6, p);
    const c = color(2, 3);
    assert.deepEqual(pixelRow(p), [color(0, 3), 0, c, 0, color(2, 2), c]);
    // the marked index is the task's own (6 is not 2, though painted as 2)
    assert.deepEqual([p.rects, p.marked, p.visited], [4, 2, 4]);
  });

  it('fills clipped to its row and counts the rectangles of one colour', () => {
    const p = new LanePainter();
    p.pixels = new Uint32Array(2 * 6);
    p.width = 6;
    p.palette = Uint32Array.from({ length: 8 }, (_, i) => 10 + i);
    p.groups = 2;
    p.mark = 1;
    p.offset = 6; // the second row
    p.fill(-1, 2, 0, 3); // clipped on the left
    p.fill(3, 3.2, 1, 0); // thinner than a pixel: one pixel
    p.fill(5, 9, 5, 1); // clipped on the right; group 5 gets the last colour
    p.fill(7, 8, 0, 0); // outside: counted, not painted
    assert.deepEqual(
      Array.from(p.pixels),
      [0, 0, 0, 0, 0, 0, 13, 13, 0, 14, 0, 15]
    );
    assert.deepEqual([p.rects, p.marked], [4, 1]);
    p.reset();
    assert.deepEqual([p.rects, p.marked, p.visited], [0, 0, 0]);
  });

  it("copies each lane's first row to its other rows", () => {
    const pixels = Uint32Array.from([1, 2, 0, 0, 0, 0, 3, 4, 0, 0]);
    copyLaneRows(pixels, {
      width: 2,
      height: 5,
      laneTop: [0, 3, 9],
      laneBottom: [3, 9, 10]
    });
    assert.deepEqual(Array.from(pixels), [1, 2, 1, 2, 1, 2, 3, 4, 3, 4]);
  });
});

describe('decimateInto', () => {
  it('keeps the points decimate keeps, in arrays reused from call to call', () => {
    const n = 5000;
    let seed = 3;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    let t = 0;
    const time = Float64Array.from({ length: n }, () => (t += rand() * 0.01));
    const values = Float64Array.from({ length: n }, () => rand() * 100);
    const out = new DecimatedBuffer();
    for (const [v0, v1, width] of [
      [0, t, 900],
      [t * 0.2, t * 0.21, 900],
      [-1, t + 1, 100],
      [t * 0.5, t * 0.9, 3000],
      [t + 1, t + 2, 100],
      [0, t, 0]
    ]) {
      const want = decimate(time, values, n, v0, v1, width);
      const got = decimateInto(time, values, n, v0, v1, width, out);
      assert.equal(got, out);
      const view = (a: Float64Array) => Array.from(a.subarray(0, out.length));
      assert.deepEqual(
        [view(out.x), view(out.min), view(out.max), view(out.last)],
        [want.x, want.min, want.max, want.last]
      );
    }
    const arrays = out.x;
    decimateInto(time, values, n, 0, t, 200, out);
    assert.equal(out.x, arrays); // no new arrays for fewer points
  });
});
