import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  copyLaneRows,
  decimate,
  DecimatedBuffer,
  decimateInto,
  drawOrder,
  LaneIndex,
  LanePainter,
  laneRects,
  lowerBound,
  packPixel,
  paintLane,
  paintRects,
  RectBuffer,
  stepVertices
} from '../src/lod';

function lane(tasks: [number, number][]): LaneIndex {
  const l = new LaneIndex();
  tasks.forEach(([s, e], row) => l.push(row, s, e));
  return l;
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
    const out = new RectBuffer();
    laneRects(l, 0, [4, 5, 6], 0, 4, 400, out);
    assert.equal(out.length, 2);
    assert.deepEqual(
      [out.x0[0], out.x1[0], out.group[0], out.row[0]],
      [0, 100, 4, 0]
    );
    assert.deepEqual(
      [out.x0[1], out.x1[1], out.group[1], out.row[1]],
      [200, 300, 5, 1]
    );
  });

  it('finds a long task that starts before the window', () => {
    const l = lane([
      [0, 100],
      [101, 102]
    ]);
    const out = new RectBuffer();
    laneRects(l, 0, [0, 1], 50, 60, 100, out);
    assert.equal(out.length, 1);
    assert.equal(out.row[0], 0);
    assert.equal(out.x0[0], -1);
    assert.equal(out.x1[0], 101);
    assert.equal(l.maxDurationIn(0, 2), 100);
  });

  it('merges sub-pixel tasks into per-column runs', () => {
    // 10,000 tasks of 1 ms back to back over 10 s, drawn 100 px wide: 100 tasks per px
    const tasks: [number, number][] = [];
    for (let i = 0; i < 10000; i++) {
      tasks.push([i * 0.001, i * 0.001 + 0.001]);
    }
    const l = lane(tasks);
    const out = new RectBuffer();
    laneRects(l, 3, new Uint16Array(10000), 0, 10, 100, out);
    // dense columns are summed, not visited task by task
    assert.ok(out.visited < 1000, String(out.visited));
    // one group, fully covered: a single run across the width
    assert.equal(out.length, 1);
    assert.equal(out.x0[0], 0);
    assert.equal(out.x1[0], 100);
    assert.equal(out.level[0], 3);
    assert.equal(out.row[0], -1);
    assert.equal(out.lane[0], 3);
  });

  it('keeps sparse sub-pixel tasks visible with a lower opacity', () => {
    const l = lane([
      [0.0, 0.001],
      [5.0, 5.001]
    ]);
    const out = new RectBuffer();
    laneRects(l, 0, [1, 2], 0, 10, 100, out);
    assert.equal(out.length, 2);
    assert.deepEqual(
      [out.x0[0], out.x1[0], out.level[0], out.row[0]],
      [0, 1, 0, 0]
    );
    assert.deepEqual(
      [out.x0[1], out.x1[1], out.group[1], out.row[1]],
      [50, 51, 2, 1]
    );
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

  it('orders rectangles by group and opacity for batched fills', () => {
    const out = new RectBuffer();
    out.push(0, 1, 0, 2, 3, 0);
    out.push(1, 2, 0, 0, 3, 1);
    out.push(2, 3, 0, 2, 0, 2);
    out.push(3, 4, 0, 0, 3, 3);
    const order = drawOrder(out, 3);
    assert.deepEqual(Array.from(order.subarray(0, 4)), [1, 3, 2, 0]);
  });

  it('stays fast on a million tasks', () => {
    const n = 1_000_000;
    const l = new LaneIndex();
    for (let i = 0; i < n; i++) {
      l.push(i, i * 1e-4, i * 1e-4 + 9e-5);
    }
    const groups = new Uint16Array(n).map((_, i) => i % 7);
    const out = new RectBuffer();
    const t = performance.now();
    laneRects(l, 0, groups, 0, 100, 1000, out);
    const full = performance.now() - t;
    out.clear();
    laneRects(l, 0, groups, 40, 40.5, 1000, out);
    assert.equal(out.visited < 6000, true);
    assert.equal(out.length <= 1000, true);
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
    const out = new RectBuffer();
    laneRects(l, 0, groups, 0, 10, 100, out);
    const wide = Array.from({ length: out.length }, (_, i) => i).filter(
      i => out.group[i] === 9
    );
    assert.equal(wide.length, 1);
    assert.deepEqual([out.x0[wide[0]], out.x1[wide[0]]], [1, 50]);
    // column 0: 100 tasks x 0.5 ms = 50 ms of a 100 ms column: half covered (level 2)
    assert.equal(out.x0[0], 0);
    assert.equal(out.level[0], 2);
    assert.ok(Math.abs(l.cumulative.data[201] - (0.05 + 4.9 + 0.1)) < 1e-9);
  });
});

describe('lod: pixels', () => {
  it('paints rectangles into a pixel buffer, clipped to it', () => {
    const out = new RectBuffer();
    out.push(-1, 2, 0, 0, 3, 0); // clipped on the left
    out.push(3, 3.2, 1, 1, 0, 1); // thinner than a pixel: one pixel
    const pixels = new Uint32Array(5 * 4);
    const palette = new Uint32Array(8);
    palette[0 * 4 + 3] = 7;
    palette[1 * 4 + 0] = 9;
    paintRects(
      out,
      pixels,
      { dpr: 1, width: 5, height: 4, laneTop: [0, 2], laneBottom: [2, 4] },
      palette,
      2
    );
    assert.deepEqual(
      Array.from(pixels),
      [7, 7, 0, 0, 0, 7, 7, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 9, 0]
    );
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

  function rects(out: RectBuffer): number[][] {
    return Array.from({ length: out.length }, (_, i) => [
      out.x0[i],
      out.x1[i],
      out.lane[i],
      out.group[i],
      out.level[i],
      out.row[i]
    ]);
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
      const own = new RectBuffer();
      const byRow = new RectBuffer();
      laneRects(lane, 2, null, a, b, width, own);
      laneRects(lane, 2, groups, a, b, width, byRow);
      assert.ok(own.length > 0);
      assert.deepEqual(rects(own), rects(byRow));
      assert.equal(own.visited, byRow.visited);
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
   * long ones, some in the same columns; the rows' groups in a run-wide column.
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
    return { lanes: out, groupOfRow: Uint16Array.from(groupOfRow) };
  }

  /** laneRects then paintRects, as the task stream drew before paintLane. */
  function reference(
    ls: LaneIndex[],
    groupOfRow: ArrayLike<number> | null,
    v0: number,
    v1: number,
    plotW: number,
    grid: { dpr: number; width: number; height: number; laneTop: Int32Array },
    palette: Uint32Array,
    groups: number
  ): { pixels: Uint32Array; out: RectBuffer } {
    const out = new RectBuffer();
    ls.forEach((lane, i) => laneRects(lane, i, groupOfRow, v0, v1, plotW, out));
    const pixels = new Uint32Array(grid.width * grid.height);
    const laneBottom = grid.laneTop.map(y => y + 1);
    paintRects(out, pixels, { ...grid, laneBottom }, palette, groups);
    return { pixels, out };
  }

  it('paints the pixels laneRects and paintRects paint, and counts their rectangles', () => {
    const { lanes: ls, groupOfRow } = lanes(4, 11);
    const groups = 6; // group 6 is clamped to the last colour, as paintRects does
    const palette = Uint32Array.from({ length: groups * 4 }, (_, i) => i + 1);
    const lo = ls[0].starts.data[0];
    const hi = ls[0].stops.data[ls[0].length - 1];
    const painter = new LanePainter();
    let dense = 0;
    let wide = 0;
    for (const [a, b, plotW, dpr] of [
      [lo, hi, 300, 1], // many tasks per column, dense ones summed
      [lo, hi, 927.5, 1.25], // a fractional width and pixel ratio
      [lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.32, 800, 2],
      [lo + 1, lo + 1.05, 500, 1], // wide tasks among sub-pixel ones
      [lo - 5, lo + 0.5, 640, 0.75], // the run starts inside the window
      [hi - 0.2, hi + 3, 200, 1]
    ]) {
      const width = Math.round(plotW * dpr);
      const grid = {
        dpr,
        width,
        height: ls.length,
        laneTop: Int32Array.from(ls, (_, i) => i)
      };
      for (const byRow of [null, groupOfRow]) {
        const want = reference(ls, byRow, a, b, plotW, grid, palette, groups);
        painter.pixels = new Uint32Array(width * ls.length);
        painter.width = width;
        painter.dpr = dpr;
        painter.palette = palette;
        painter.groups = groups;
        painter.mark = 2;
        painter.reset();
        ls.forEach((lane, i) => {
          painter.offset = i * width;
          paintLane(lane, byRow, a, b, plotW, painter);
        });
        assert.deepEqual(painter.pixels, want.pixels, `[${a}, ${b}] ${plotW}`);
        assert.equal(painter.rects, want.out.length);
        assert.equal(painter.visited, want.out.visited);
        const groupsOf = want.out.group.subarray(0, want.out.length);
        assert.equal(painter.marked, groupsOf.filter(g => g === 2).length);
        // the cases exercise summed columns (tasks not visited) and tasks drawn on
        // their own (opacity level 3)
        const shown = ls.reduce(
          (sum, lane) =>
            sum +
            lane.starts
              .view()
              .filter((s, i) => s <= b && lane.stops.data[i] >= a).length,
          0
        );
        dense += want.out.visited < shown ? 1 : 0;
        wide += want.out.level.subarray(0, want.out.length).includes(3) ? 1 : 0;
      }
    }
    assert.ok(dense > 0 && wide > 0);
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
      dpr: 1,
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
