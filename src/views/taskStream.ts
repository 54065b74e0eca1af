/**
 * The task stream: a lane per worker, a rectangle per task coloured by group, drawn on a
 * canvas with level of detail (lod.ts); wheel zoom, drag pan, shift+drag selects a time
 * range, double-click resets; hovering a task shows its key (fetched on demand), group,
 * worker, duration and wait. The threads of each cluster worker form a group of lanes
 * under its address, with a separator between groups (lanes.ts); local runs are ungrouped.
 * A cluster run's actions (protocol 1.2: transfers red, disk reads and writes orange,
 * deserialization grey, as distributed draws them) are thinner bars along the bottom of
 * their lane, over the tasks; a worker's lanes start and end with it: hatched before it
 * joined (faintly, with a line when it joined) and from when it left.
 * With a span picked (the model's span filter) the tasks of other spans are dimmed; with
 * a finding picked (the model's highlight) the tasks it does not name are dimmed too.
 */

import {
  actionColor,
  actionName,
  actionText,
  joinedText,
  leftText,
  lifeText,
  rerunText
} from '../clusterTables';
import { formatDuration, formatTick, niceTicks } from '../format';
import { parseCssColor, parseHex, RGB } from '../colors';
import {
  copyLaneRows,
  LanePainter,
  LEVEL_ALPHA,
  packPixel,
  paintLane
} from '../lod';
import {
  absences,
  absentAt,
  ILaneGeometry,
  ILaneLayout,
  laneAt,
  laneGeometry,
  LaneLayoutCache,
  ILaneWorker,
  layoutHeight,
  layoutLanes
} from '../lanes';
import { ChangeKind, ProfileModel, RunData } from '../model';
import { IClusterWorker } from '../protocol';
import { groupsInSpan } from '../spans';
import { dimOutside } from '../findings';
import { CanvasView, fitText, fitTextEnd, GUTTER, Tooltip } from './canvas';
import { TimeViewport } from './viewport';

const AXIS = 18;
const MAX_HEIGHT = 320;
/** Height of the band above a group of lanes that holds the worker's address. */
const GROUP_HEADER = 14;
/** Lanes thinner than this get no label. */
const MIN_LABELLED_LANE = 9;
/** Share of a lane's height the action bars take, along its bottom. */
const ACTION_BAND = 0.4;

/** A faint `#rrggbb`: a quarter of the way from the background to `muted`. */
function dimColor(muted: RGB, bg: RGB): string {
  const hex = (i: number) =>
    Math.round(bg[i] + (muted[i] - bg[i]) * 0.25)
      .toString(16)
      .padStart(2, '0');
  return `#${hex(0)}${hex(1)}${hex(2)}`;
}

/** The workers of `run`'s lanes, in order of appearance. */
function laneWorkers(run: RunData): ILaneWorker[] {
  return run.lanes.map(
    id => run.workers.get(id) ?? { id, label: `worker ${id}`, kind: '' }
  );
}

/** Changes of the model the task stream's pixels do not depend on (a key fetched...). */
const UNPAINTED: ReadonlySet<ChangeKind> = new Set<ChangeKind>([
  'keys',
  'stacks',
  'state',
  'error'
]);

/** What a frame's pixels depend on: the same, the same pixels. */
interface IPaintKey {
  /** Changes of the model seen (any change paints anew). */
  version: number;
  run: RunData;
  v0: number;
  v1: number;
  plotW: number;
  /** Size of the pixel buffer and the device pixel ratio. */
  width: number;
  height: number;
  dpr: number;
  layout: ILaneLayout;
  theme: unknown;
  /** The palettes (the same arrays while the colours are the same). */
  taskPalette: Uint32Array;
  actionPalette: Uint32Array;
}

/** Options of the task stream (from the settings registry). */
export interface ITaskStreamOptions {
  /** Tallest a lane gets, in CSS pixels. */
  maxLaneHeight: number;
}

export class TaskStreamView extends CanvasView {
  constructor(model: ProfileModel, viewport: TimeViewport) {
    super('jp-DaskProfile-taskStream', 120);
    this._model = model;
    this._viewport = viewport;
    this._tooltip = new Tooltip(this.node);
    this.legend.className = 'jp-DaskProfile-legend';
    this.canvas.addEventListener('wheel', this._onWheel, { passive: false });
    this.canvas.addEventListener('mousedown', this._onMouseDown);
    this.canvas.addEventListener('mousemove', this._onHover);
    this.canvas.addEventListener('mouseleave', this._onLeave);
    this.canvas.addEventListener('dblclick', this._onDoubleClick);
    model.changed.connect(this._onModel, this);
    viewport.changed.connect(this.schedule, this);
  }

  /** The colour legend (group swatches and names). */
  readonly legend = document.createElement('div');

  options: ITaskStreamOptions = { maxLaneHeight: 18 };

  /** Rectangles in the last frame. */
  get rectCount(): number {
    return this._counts.rects;
  }

  dispose(): void {
    this._model.changed.disconnect(this._onModel, this);
    this._viewport.changed.disconnect(this.schedule, this);
    window.removeEventListener('mousemove', this._onDrag);
    window.removeEventListener('mouseup', this._onMouseUp);
    super.dispose();
  }

  /** Re-read the run's extent, size and legend, then redraw. */
  update(): void {
    const run = this._model.current;
    if (run) {
      const [lo, hi] = run.extent();
      this._viewport.setExtent(lo, hi);
      const content = layoutHeight(
        this._layouts.get(laneWorkers(run)),
        this.options.maxLaneHeight,
        GROUP_HEADER
      );
      this.setHeight(AXIS + Math.min(MAX_HEIGHT, Math.max(40, content)));
    }
    this._updateLegend(run);
    this.schedule();
  }

  protected draw(
    ctx: CanvasRenderingContext2D,
    width: number,
    height: number
  ): void {
    const run = this._model.current;
    const theme = this.theme;
    const plotW = width - GUTTER;
    const counts = this._counts;
    if (!run || plotW <= 0) {
      counts.rects = counts.dimmed = counts.actions = counts.visited = 0;
      this._painted = null;
      this._layout = layoutLanes([]);
      this._geometry = laneGeometry(this._layout, 0, 0);
      ctx.fillStyle = theme.muted;
      ctx.fillText(
        run ? '' : 'No run yet: compute something with Dask.',
        8,
        20
      );
      this.canvas.dataset.rects = '0';
      return;
    }
    const v0 = this._viewport.start;
    const v1 = this._viewport.end;
    const layout = this._layouts.get(laneWorkers(run));
    const geometry = laneGeometry(layout, height - AXIS, GROUP_HEADER);
    this._layout = layout;
    this._geometry = geometry;
    this._drawAxis(ctx, v0, v1, plotW, height);

    this._paint(ctx, run, layout, v0, v1, plotW, geometry);
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, AXIS, plotW, height - AXIS);
    ctx.clip();
    const absent = this._drawAbsent(ctx, run, layout, geometry, v0, v1, plotW);
    const reruns = this._drawReruns(ctx, run, v0, v1, plotW);
    this._drawHover(ctx, run, v0, v1, plotW);
    this._drawSelection(ctx, v0, v1, plotW, height);
    ctx.restore();
    this._drawLaneLabels(ctx, layout, geometry);
    this._drawGroups(ctx, run, layout, geometry, width);
    this.canvas.dataset.rects = String(counts.rects);
    this._countDimmed(run);
    this.canvas.dataset.actions = String(counts.actions);
    this.canvas.dataset.left = String(absent.left);
    this.canvas.dataset.joined = String(absent.joined.length);
    this.canvas.dataset.joinedWorkers = absent.joined.join(' ');
    this.canvas.dataset.reruns = String(reruns);
    this.canvas.dataset.lanes = String(layout.order.length);
    this.canvas.dataset.groups = String(layout.groups.length);
    this.canvas.dataset.visited = String(counts.visited);
    this.canvas.dataset.painted = String(this._paints);
    this.canvas.dataset.view = `${v0},${v1}`;
  }

  /**
   * The plot area as pixels: background, grid lines, then the tasks of each lane on
   * screen and its actions along the lane's bottom, painted straight into an ImageData
   * (lod.paintLane: no rectangle in between, no allocation) put on the canvas in one call.
   */
  private _paint(
    ctx: CanvasRenderingContext2D,
    run: RunData,
    layout: ILaneLayout,
    v0: number,
    v1: number,
    plotW: number,
    geometry: ILaneGeometry
  ): void {
    const dpr = window.devicePixelRatio || 1;
    const px = Math.round(GUTTER * dpr);
    const py = Math.round(AXIS * dpr);
    const width = Math.max(1, this.canvas.width - px);
    const h = Math.max(1, this.canvas.height - py);
    if (
      !this._image ||
      this._image.width !== width ||
      this._image.height !== h
    ) {
      this._image = ctx.createImageData(width, h);
      this._pixels = new Uint32Array(this._image.data.buffer);
    }
    const pixels = this._pixels!;
    const theme = this.theme;
    const bg = this._rgb(theme.background) ?? [255, 255, 255];
    const dims = this._dims(run);
    const dim = Math.max(1, run.groups.length); // the colour of other spans' tasks
    const groups = dim + (dims ? 1 : 0);
    const taskPalette = this._taskPalette(run, groups, dim, bg);
    const actions = run.tables.actions;
    const kinds = Math.max(1, actions.counts.length);
    const actionPalette = this._cachedPalette(
      this._actionPalette,
      kinds,
      actionColor,
      bg
    );
    // the same frame as the last one painted, but for what is drawn over it (hover,
    // selection): its pixels again, as they are
    const key: IPaintKey = {
      version: this._modelVersion,
      run,
      v0,
      v1,
      plotW,
      width,
      height: h,
      dpr,
      layout,
      theme,
      taskPalette,
      actionPalette
    };
    const last = this._painted;
    if (
      last !== null &&
      (Object.keys(key) as (keyof IPaintKey)[]).every(k => key[k] === last[k])
    ) {
      ctx.putImageData(this._image, px, py);
      return;
    }
    this._painted = key;
    this._paints++;
    const gridRgb = this._rgb(theme.grid) ?? bg;
    pixels.fill(packPixel(bg[0], bg[1], bg[2]));
    const gridPixel = packPixel(gridRgb[0], gridRgb[1], gridRgb[2]);
    for (const t of niceTicks(v0, v1, Math.max(2, Math.floor(plotW / 90)))) {
      const x = Math.round(((t - v0) / (v1 - v0)) * plotW * dpr);
      if (x >= 0 && x < width) {
        for (let y = 0; y < h; y++) {
          pixels[y * width + x] = gridPixel;
        }
      }
    }
    const { tops, laneHeight: laneH } = geometry;
    const lanes = tops.length;
    const gap = laneH > 6 ? 1 : 0;
    if (this._laneTop.length !== lanes) {
      this._laneTop = new Int32Array(lanes);
      this._laneBottom = new Int32Array(lanes);
      this._bandTop = new Int32Array(lanes);
    }
    const laneTop = this._laneTop;
    const laneBottom = this._laneBottom;
    const bandTop = this._bandTop;
    for (let l = 0; l < lanes; l++) {
      laneTop[l] = Math.round(tops[l] * dpr);
      laneBottom[l] = Math.max(
        laneTop[l] + 1,
        Math.round((tops[l] + laneH - gap) * dpr)
      );
      // the action band, along the bottom of the lane
      const band = Math.max(
        1,
        Math.round((laneBottom[l] - laneTop[l]) * ACTION_BAND)
      );
      bandTop[l] = Math.max(laneTop[l], laneBottom[l] - band);
    }
    const painter = this._painter;
    painter.pixels = pixels;
    painter.width = width;
    painter.dpr = dpr;
    painter.palette = taskPalette;
    painter.groups = groups;
    painter.mark = dims ? dim : -1;
    painter.reset();
    const groupOf = this._groupsShown(run);
    const order = layout.order;
    for (let l = 0; l < lanes; l++) {
      const lane = run.laneIndex.get(order[l]);
      // a lane off the buffer is not painted, nor its tasks visited
      if (lane && laneTop[l] >= 0 && laneTop[l] < h) {
        painter.offset = laneTop[l] * width;
        paintLane(lane, groupOf, v0, v1, plotW, painter);
      }
    }
    const grid = { dpr, width, height: h, laneTop, laneBottom };
    copyLaneRows(pixels, grid);
    const counts = this._counts;
    counts.rects = painter.rects;
    counts.dimmed = painter.marked;
    counts.visited = painter.visited;
    counts.actions = 0;
    if (actions.lanes.size > 0) {
      // over the tasks (band rows are copied whole: they already hold the task pixels)
      painter.palette = actionPalette;
      painter.groups = kinds;
      painter.mark = -1;
      painter.reset();
      for (let l = 0; l < lanes; l++) {
        const lane = actions.lanes.get(order[l]);
        if (lane && bandTop[l] >= 0 && bandTop[l] < h) {
          painter.offset = bandTop[l] * width;
          paintLane(lane, null, v0, v1, plotW, painter);
        }
      }
      counts.actions = painter.rects;
      copyLaneRows(pixels, { ...grid, laneTop: bandTop });
    }
    ctx.putImageData(this._image, px, py);
  }

  /** A theme colour as RGB, parsed once per theme. */
  private _rgb(color: string): RGB | null {
    if (this._rgbFor !== this.theme) {
      this._rgbFor = this.theme;
      this._rgbCache.clear();
    }
    let rgb = this._rgbCache.get(color);
    if (rgb === undefined) {
      rgb = parseCssColor(color);
      this._rgbCache.set(color, rgb);
    }
    return rgb;
  }

  /** The groups' colours, then the faint colour of the dimmed tasks (index `dim`). */
  private _taskPalette(
    run: RunData,
    groups: number,
    dim: number,
    bg: RGB
  ): Uint32Array {
    const faint = dimColor(this._rgb(this.theme.muted) ?? [128, 128, 128], bg);
    return this._cachedPalette(
      this._groupPalette,
      groups,
      g => (g === dim ? faint : run.group(g).color),
      bg
    );
  }

  /** Whether some rows are dimmed (a span or a finding is picked). */
  private _dims(run: RunData): boolean {
    return (
      this._model.spanMask(run) !== null ||
      this._model.highlightMask(run) !== null
    );
  }

  /**
   * Each row's group, or the dim colour's index for rows outside the picked span or not
   * named by the picked finding; null when nothing is dimmed (the lanes hold the groups).
   */
  private _groupsShown(run: RunData): ArrayLike<number> | null {
    const mask = this._model.spanMask(run);
    const highlight = this._model.highlightMask(run);
    if (!mask && !highlight) {
      return null;
    }
    const n = run.taskCount;
    const key = this._inSpanKey;
    if (
      key.run !== run ||
      key.mask !== mask ||
      key.highlight !== highlight ||
      key.n !== n
    ) {
      const dim = Math.max(1, run.groups.length);
      let shown: ArrayLike<number> = run.taskGroup.data;
      if (mask) {
        const data = [run.taskGroup.data, run.taskSpan.data] as const;
        this._inSpan = groupsInSpan(...data, mask, n, dim, this._inSpan);
        shown = this._inSpan;
      }
      if (highlight) {
        this._inSpan = dimOutside(shown, highlight, n, dim, this._inSpan);
      }
      this._inSpanKey = { run, mask, highlight, n };
    }
    return this._inSpan;
  }

  /**
   * Rectangles of the tasks shown and of the others (dimmed), in data-*; `highlight`:
   * the kind of the finding picked ('' when none).
   */
  private _countDimmed(run: RunData): void {
    const { rects, dimmed } = this._counts;
    this.canvas.dataset.highlight = this._model.highlightMask(run)
      ? (this._model.highlight?.kind ?? '')
      : '';
    this.canvas.dataset.shown = String(rects - dimmed);
    this.canvas.dataset.dimmed = String(dimmed);
  }

  /**
   * The palette of `count` colours (`color(i)`) blended with `bg`, from `cache` while
   * the colours and the background are the same (a frame then builds none).
   */
  private _cachedPalette(
    cache: { key: string; palette: Uint32Array },
    count: number,
    color: (i: number) => string,
    bg: RGB
  ): Uint32Array {
    let key = `${bg[0]},${bg[1]},${bg[2]}`;
    for (let g = 0; g < count; g++) {
      key += `|${color(g)}`;
    }
    if (cache.key !== key) {
      cache.key = key;
      cache.palette = this._palette(count, color, bg);
    }
    return cache.palette;
  }

  /** Packed colours per (colour index, opacity level), blended with the background. */
  private _palette(
    count: number,
    color: (i: number) => string,
    bg: RGB
  ): Uint32Array {
    const palette = new Uint32Array(count * 4);
    for (let g = 0; g < count; g++) {
      const rgb = parseHex(color(g)) ?? [128, 128, 128];
      for (let level = 0; level < 4; level++) {
        const a = LEVEL_ALPHA[level];
        const mixc = (i: number) => Math.round(bg[i] + (rgb[i] - bg[i]) * a);
        palette[g * 4 + level] = packPixel(mixc(0), mixc(1), mixc(2));
      }
    }
    return palette;
  }

  /**
   * The lanes of each cluster worker where it was not there: before it joined (a faint
   * hatch, a line in the accent colour when it joined) and from when it left (hatched in
   * the warning colour, a line when it left). Returns how many workers are marked left
   * and the addresses of those marked joined.
   */
  private _drawAbsent(
    ctx: CanvasRenderingContext2D,
    run: RunData,
    layout: ILaneLayout,
    geometry: ILaneGeometry,
    v0: number,
    v1: number,
    plotW: number
  ): { left: number; joined: string[] } {
    const marked = { left: 0, joined: [] as string[] };
    const { tops, laneHeight } = geometry;
    const k = plotW / (v1 - v0);
    const x = (t: number) => GUTTER + (t - v0) * k;
    for (const group of layout.groups) {
      const worker = group.local ? undefined : run.tables.worker(group.label);
      if (!worker) {
        continue;
      }
      const y0 = AXIS + tops[group.first];
      const y1 = AXIS + tops[group.first + group.count - 1] + laneHeight;
      for (const gap of absences(worker.joined, worker.left, v0, v1)) {
        const joined = gap.why === 'joined';
        if (joined) {
          marked.joined.push(worker.address);
        } else {
          marked.left++;
        }
        ctx.fillStyle = this._hatch(ctx, joined);
        ctx.fillRect(x(gap.from), y0, x(gap.to) - x(gap.from), y1 - y0);
        if (gap.at >= v0 && gap.at <= v1) {
          ctx.fillStyle = joined ? this.theme.accent : this.theme.warn;
          ctx.fillRect(Math.round(x(gap.at)) - 1, y0, 2, y1 - y0);
        }
      }
    }
    return marked;
  }

  /**
   * Task rows a worker that left took with it (`reruns`): hatched and outlined with a
   * dashed line in the warning colour. Returns how many are drawn.
   */
  private _drawReruns(
    ctx: CanvasRenderingContext2D,
    run: RunData,
    v0: number,
    v1: number,
    plotW: number
  ): number {
    let drawn = 0;
    const { tops, laneHeight } = this._geometry;
    const k = plotW / (v1 - v0);
    ctx.save();
    ctx.strokeStyle = this.theme.warn;
    ctx.lineWidth = 1.5;
    ctx.setLineDash([3, 2]);
    for (const row of run.tables.reruns.rows.keys()) {
      if (row >= run.taskCount) {
        continue; // its batch has not come (or was dropped)
      }
      const lane = this._layout.index.get(run.taskWorker.data[row]);
      const start = run.taskStart.data[row];
      const stop = run.taskStop.data[row];
      if (lane === undefined || stop < v0 || start > v1) {
        continue;
      }
      const x0 = GUTTER + (start - v0) * k;
      const w = Math.max(2, (stop - start) * k);
      const y = AXIS + tops[lane];
      const h = Math.max(2, laneHeight - 1);
      ctx.fillStyle = this._hatch(ctx);
      ctx.fillRect(x0, y, w, h);
      ctx.strokeRect(x0, y + 0.75, w, h - 1.5);
      drawn++;
    }
    ctx.restore();
    return drawn;
  }

  /** Diagonal hatching in the theme's warning colour (`faint`: muted, for not yet joined). */
  private _hatch(
    ctx: CanvasRenderingContext2D,
    faint = false
  ): CanvasPattern | string {
    const theme = this.theme;
    if (faint) {
      if (this._faintFor !== theme) {
        this._faintFor = theme;
        this._faintPattern = this._hatchTile(ctx, theme.muted, 0.35);
      }
      return this._faintPattern ?? 'rgba(128, 128, 128, 0.1)';
    }
    if (this._hatchFor !== theme) {
      this._hatchFor = theme;
      this._hatchPattern = this._hatchTile(ctx, theme.warn, 0.55);
    }
    return this._hatchPattern ?? 'rgba(128, 128, 128, 0.2)';
  }

  /** An 8 px tile of diagonal lines in `color`, as a repeating pattern. */
  private _hatchTile(
    ctx: CanvasRenderingContext2D,
    color: string,
    alpha: number
  ): CanvasPattern | null {
    const tile = document.createElement('canvas');
    tile.width = tile.height = 8;
    const t = tile.getContext('2d');
    if (t) {
      t.strokeStyle = color;
      t.globalAlpha = alpha;
      t.lineWidth = 1;
      t.beginPath();
      t.moveTo(0, 8);
      t.lineTo(8, 0);
      t.moveTo(-4, 4);
      t.lineTo(4, -4);
      t.moveTo(4, 12);
      t.lineTo(12, 4);
      t.stroke();
    }
    return ctx.createPattern(tile, 'repeat');
  }

  private _drawAxis(
    ctx: CanvasRenderingContext2D,
    v0: number,
    v1: number,
    plotW: number,
    height: number
  ): void {
    const theme = this.theme;
    const ticks = niceTicks(v0, v1, Math.max(2, Math.floor(plotW / 90)));
    const step = ticks.length > 1 ? ticks[1] - ticks[0] : v1 - v0;
    ctx.fillStyle = theme.grid;
    ctx.fillRect(GUTTER, AXIS - 1, plotW, 1);
    ctx.textBaseline = 'middle';
    for (const t of ticks) {
      const x = GUTTER + ((t - v0) / (v1 - v0)) * plotW;
      ctx.fillStyle = theme.grid;
      ctx.fillRect(Math.round(x), AXIS, 1, height - AXIS);
      ctx.fillStyle = theme.muted;
      const label = formatTick(t, step);
      const w = ctx.measureText(label).width;
      // a label that would run past the plot's right edge goes left of its tick
      ctx.fillText(
        label,
        x + 3 + w > GUTTER + plotW ? x - 3 - w : x + 3,
        AXIS / 2
      );
    }
  }

  /**
   * Lane labels in the gutter. Without group bands (too many groups for the height), a
   * group's first lane shows its address instead (its end: the port tells workers apart).
   */
  private _drawLaneLabels(
    ctx: CanvasRenderingContext2D,
    layout: ILaneLayout,
    geometry: ILaneGeometry
  ): void {
    const theme = this.theme;
    const { tops, laneHeight: laneH, header } = geometry;
    const { groups } = layout;
    ctx.fillStyle = theme.background;
    ctx.fillRect(0, AXIS, GUTTER, this.height - AXIS);
    ctx.fillStyle = theme.muted;
    if (laneH < MIN_LABELLED_LANE) {
      if (header === 0) {
        const lanes = layout.order.length;
        const text =
          groups.length > 0
            ? `${groups.length} groups, ${lanes} lanes`
            : `${lanes} workers`;
        ctx.textBaseline = 'alphabetic';
        ctx.fillText(fitText(ctx, text, GUTTER - 8), 4, AXIS + 8);
      }
      return;
    }
    const labels = layout.labels.slice();
    if (header === 0) {
      for (const g of groups.filter(g => !g.local)) {
        labels[g.first] = fitTextEnd(ctx, g.label, GUTTER - 8);
      }
    }
    ctx.textBaseline = 'middle';
    labels.forEach((label, i) => {
      ctx.fillText(
        fitText(ctx, label, GUTTER - 8),
        4,
        AXIS + tops[i] + laneH / 2
      );
    });
  }

  /**
   * A separator above every group but the first, and each group's label in its band
   * (with when its worker left, if it did).
   */
  private _drawGroups(
    ctx: CanvasRenderingContext2D,
    run: RunData,
    layout: ILaneLayout,
    geometry: ILaneGeometry,
    width: number
  ): void {
    const { groupTops, header, laneHeight } = geometry;
    const theme = this.theme;
    ctx.textBaseline = 'middle';
    layout.groups.forEach((group, g) => {
      const top = AXIS + groupTops[g];
      if (g > 0 && header + group.count * laneHeight >= 4) {
        // in the gap under the previous lane when there is no band
        const y = Math.round(top) - (header > 0 ? 0 : 1);
        ctx.fillStyle = theme.border;
        ctx.fillRect(0, y, width, 1);
      }
      if (header > 0) {
        const worker = group.local ? undefined : run.tables.worker(group.label);
        const life = worker ? lifeText(worker) : '';
        ctx.fillStyle = worker && leftText(worker) ? theme.warn : theme.muted;
        ctx.fillText(
          fitText(
            ctx,
            life ? `${group.label} · ${life}` : group.label,
            width - 8
          ),
          4,
          top + header / 2 + 0.5
        );
      }
    });
  }

  private _drawHover(
    ctx: CanvasRenderingContext2D,
    run: RunData,
    v0: number,
    v1: number,
    plotW: number
  ): void {
    const row = this._hoverRow;
    const action = this._hoverAction;
    const actions = run.tables.actions;
    let worker: number;
    let start: number;
    let stop: number;
    let band = 1;
    if (row >= 0 && row < run.taskCount) {
      worker = run.taskWorker.data[row];
      start = run.taskStart.data[row];
      stop = run.taskStop.data[row];
    } else if (action >= 0 && action < actions.length) {
      worker = actions.worker.data[action];
      start = actions.start.data[action];
      stop = actions.stop.data[action];
      band = ACTION_BAND;
    } else {
      return;
    }
    const lane = this._layout.index.get(worker);
    if (lane === undefined) {
      return;
    }
    const { tops, laneHeight } = this._geometry;
    const k = plotW / (v1 - v0);
    const x0 = GUTTER + (start - v0) * k;
    const x1 = GUTTER + (stop - v0) * k;
    const h = Math.max(2, laneHeight * band);
    ctx.strokeStyle = this.theme.foreground;
    ctx.lineWidth = 1.5;
    ctx.strokeRect(
      x0,
      AXIS + tops[lane] + laneHeight - h,
      Math.max(1, x1 - x0),
      h - 1
    );
  }

  private _drawSelection(
    ctx: CanvasRenderingContext2D,
    v0: number,
    v1: number,
    plotW: number,
    height: number
  ): void {
    const sel = this._viewport.selection;
    if (!sel) {
      return;
    }
    const k = plotW / (v1 - v0);
    const x0 = GUTTER + (sel[0] - v0) * k;
    const x1 = GUTTER + (sel[1] - v0) * k;
    ctx.fillStyle = this.theme.selection;
    ctx.fillRect(x0, AXIS, x1 - x0, height - AXIS);
    ctx.fillStyle = this.theme.accent;
    ctx.fillRect(x0, AXIS, 1, height - AXIS);
    ctx.fillRect(x1 - 1, AXIS, 1, height - AXIS);
  }

  private _updateLegend(run: RunData | null): void {
    const count = run ? run.groupsByName.size : 0;
    const kinds = run ? run.tables.actions.kinds() : [];
    const key = kinds.join(',');
    if (
      run === this._legendRun &&
      count === this._legendCount &&
      key === this._legendKinds
    ) {
      return;
    }
    this._legendRun = run;
    this._legendCount = count;
    this._legendKinds = key;
    const items: HTMLElement[] = [];
    const groups = run ? [...run.groupsByName.values()] : [];
    for (const g of groups.slice(0, 40)) {
      const item = document.createElement('span');
      item.className = 'jp-DaskProfile-legendItem';
      const swatch = document.createElement('span');
      swatch.className = 'jp-DaskProfile-swatch';
      swatch.style.background = g.color;
      const name = document.createElement('span');
      name.textContent = g.name;
      item.append(swatch, name);
      items.push(item);
    }
    if (groups.length > 40) {
      const more = document.createElement('span');
      more.textContent = `+${groups.length - 40} more`;
      items.push(more);
    }
    for (const code of kinds) {
      const item = document.createElement('span');
      item.className = 'jp-DaskProfile-legendItem';
      item.dataset.action = actionName(code);
      item.title = 'Drawn along the bottom of its lane';
      const swatch = document.createElement('span');
      swatch.className = 'jp-DaskProfile-swatch';
      swatch.style.background = actionColor(code);
      swatch.style.height = '4px';
      const name = document.createElement('span');
      name.textContent = actionName(code);
      item.append(swatch, name);
      items.push(item);
    }
    this.legend.replaceChildren(...items);
  }

  // ------------------------------------------------------------------ events

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if ([...changes].some(c => !UNPAINTED.has(c))) {
      this._modelVersion++; // the next frame is painted anew
    }
    if (changes.has('current')) {
      this._hoverRow = -1;
      this._hoverAction = -1;
      this._hoverLeft = null;
      this._tooltip.hide();
      this._viewport.reset();
      this._viewport.select(null);
    }
    if (changes.has('keys') && this._hoverRow >= 0) {
      this._showTooltip();
    }
    if (
      changes.has('tasks') ||
      changes.has('current') ||
      changes.has('runs') ||
      changes.has('resources') ||
      changes.has('actions') ||
      changes.has('clusterWorkers') ||
      changes.has('filter') ||
      changes.has('highlight') ||
      changes.has('summary')
    ) {
      this.update();
    }
  }

  private _timeAt(x: number): number {
    const plotW = this.width - GUTTER;
    const { start, end } = this._viewport;
    return start + ((x - GUTTER) / Math.max(1, plotW)) * (end - start);
  }

  private _local(e: MouseEvent): [number, number] {
    const r = this.canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  }

  private _onWheel = (e: WheelEvent): void => {
    const [x] = this._local(e);
    if (x < GUTTER) {
      return;
    }
    e.preventDefault();
    const plotW = Math.max(1, this.width - GUTTER);
    const { start, end } = this._viewport;
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      this._viewport.pan((e.deltaX / plotW) * (end - start));
      return;
    }
    const delta = e.deltaMode === 1 ? e.deltaY * 20 : e.deltaY;
    this._viewport.zoom(this._timeAt(x), Math.exp(delta * 0.0015));
  };

  private _onMouseDown = (e: MouseEvent): void => {
    if (e.button !== 0) {
      return;
    }
    const [x] = this._local(e);
    if (x < GUTTER) {
      return;
    }
    e.preventDefault();
    this._drag = { x, lastX: x, select: e.shiftKey, moved: false };
    this._tooltip.hide();
    window.addEventListener('mousemove', this._onDrag);
    window.addEventListener('mouseup', this._onMouseUp);
  };

  private _onDrag = (e: MouseEvent): void => {
    const drag = this._drag;
    if (!drag) {
      return;
    }
    const [x] = this._local(e);
    if (Math.abs(x - drag.x) > 2) {
      drag.moved = true;
    }
    if (drag.select) {
      const a = this._timeAt(drag.x);
      const b = this._timeAt(x);
      this._viewport.select([Math.min(a, b), Math.max(a, b)]);
    } else {
      const plotW = Math.max(1, this.width - GUTTER);
      const { start, end } = this._viewport;
      this._viewport.pan(-((x - drag.lastX) / plotW) * (end - start));
    }
    drag.lastX = x;
  };

  private _onMouseUp = (): void => {
    const drag = this._drag;
    this._drag = null;
    window.removeEventListener('mousemove', this._onDrag);
    window.removeEventListener('mouseup', this._onMouseUp);
    if (drag?.select && !drag.moved) {
      this._viewport.select(null);
    }
  };

  private _onDoubleClick = (): void => {
    this._viewport.reset();
  };

  private _onHover = (e: MouseEvent): void => {
    if (this._drag) {
      return;
    }
    const run = this._model.current;
    const [x, y] = this._local(e);
    this._mouse = [x, y];
    const hit =
      run && x >= GUTTER && y >= AXIS
        ? this._hitTest(run, this._timeAt(x), y - AXIS)
        : { row: -1, action: -1, left: null };
    if (hit.row !== this._hoverRow || hit.action !== this._hoverAction) {
      this._hoverRow = hit.row;
      this._hoverAction = hit.action;
      this.schedule();
      if (run && hit.row >= 0) {
        this._model.requestKeys(run, [hit.row]);
      }
    }
    this._hoverLeft = hit.left;
    this._showTooltip();
  };

  /**
   * What is under time `t`, `y` pixels below the axis, in the layout of the frame on
   * screen (y -> lane -> worker): a task, else an action (preferred along the lane's
   * bottom band, where actions are drawn), else the hatched lanes of a worker not there
   * then (before it joined or after it left: `left` holds that worker).
   */
  private _hitTest(
    run: RunData,
    t: number,
    y: number
  ): { row: number; action: number; left: IClusterWorker | null } {
    const none = { row: -1, action: -1, left: null };
    const laneNo = laneAt(this._geometry, y);
    const worker = this._layout.order[laneNo];
    if (worker === undefined) {
      return none;
    }
    const tolerance =
      (3 / Math.max(1, this.width - GUTTER)) *
      (this._viewport.end - this._viewport.start);
    const tasks = run.laneIndex.get(worker);
    const row = tasks ? tasks.hitTest(t, tolerance) : -1;
    const actions = run.tables.actions.lanes.get(worker);
    const action = actions ? actions.hitTest(t, tolerance) : -1;
    const { tops, laneHeight } = this._geometry;
    const inBand = y >= tops[laneNo] + laneHeight * (1 - ACTION_BAND);
    if (action >= 0 && (inBand || row < 0)) {
      return { row: -1, action, left: null };
    }
    if (row >= 0) {
      return { row, action: -1, left: null };
    }
    const group = this._layout.groups.find(
      g => laneNo >= g.first && laneNo < g.first + g.count && !g.local
    );
    const gone = group ? run.tables.worker(group.label) : undefined;
    return gone && absentAt(gone.joined, gone.left, t) !== null
      ? { row: -1, action: -1, left: gone }
      : none;
  }

  private _onLeave = (): void => {
    this._tooltip.hide();
    this._hoverLeft = null;
    if (this._hoverRow >= 0 || this._hoverAction >= 0) {
      this._hoverRow = -1;
      this._hoverAction = -1;
      this.schedule();
    }
  };

  private _showTooltip(): void {
    const run = this._model.current;
    const row = this._hoverRow;
    if (run && this._hoverAction >= 0) {
      this._showAction(run, this._hoverAction);
      return;
    }
    if (run && row < 0 && this._hoverLeft) {
      const w = this._hoverLeft;
      const t = this._timeAt(this._mouse[0]);
      const why = absentAt(w.joined, w.left, t);
      this._tooltip.show(
        [
          ['worker', w.address],
          ['', why === 'joined' ? joinedText(w) : leftText(w)]
        ],
        this._mouse[0],
        this._mouse[1]
      );
      this._tooltip.node.dataset.row = '';
      this._tooltip.node.dataset.action = '';
      return;
    }
    if (!run || row < 0 || row >= run.taskCount) {
      this._tooltip.hide();
      return;
    }
    const key = this._model.keyOf(run, row);
    const start = run.taskStart.data[row];
    const stop = run.taskStop.data[row];
    const submit = run.taskSubmit.data[row];
    const worker = run.workers.get(run.taskWorker.data[row]);
    const lines: [string, string][] = [
      ['key', key ?? (this._model.connected ? 'loading…' : 'unavailable')],
      ['group', run.group(run.taskGroup.data[row]).name],
      ['worker', worker?.label ?? String(run.taskWorker.data[row])],
      ['duration', formatDuration(stop - start)],
      ['wait', formatDuration(start - submit)],
      ['start', formatDuration(start)]
    ];
    if (run.taskStatus.data[row] !== 0) {
      lines.push(['status', 'error']);
    }
    const rerun = run.tables.reruns.get(row);
    if (rerun) {
      lines.push(['re-run', rerunText(rerun)]);
    }
    this._tooltip.show(lines, this._mouse[0], this._mouse[1]);
    this._tooltip.node.dataset.row = String(row);
    this._tooltip.node.dataset.action = '';
  }

  /** `transfer 12.3 MiB in 4.1 ms (group x)`, the worker and when it started. */
  private _showAction(run: RunData, row: number): void {
    const a = run.tables.actions;
    const start = a.start.data[row];
    const worker = run.workers.get(a.worker.data[row]);
    this._tooltip.show(
      [
        [
          '',
          actionText(
            a.action.data[row],
            a.bytes.data[row],
            a.stop.data[row] - start,
            run.group(a.group.data[row]).name
          )
        ],
        ['worker', worker?.label ?? String(a.worker.data[row])],
        ['start', formatDuration(start)]
      ],
      this._mouse[0],
      this._mouse[1]
    );
    this._tooltip.node.dataset.row = '';
    this._tooltip.node.dataset.action = String(row);
  }

  private _model: ProfileModel;
  private _viewport: TimeViewport;
  private _tooltip: Tooltip;
  private _painter = new LanePainter();
  /** What the pixels in `_image` were painted for (null: nothing yet). */
  private _painted: IPaintKey | null = null;
  /** Frames painted (the others put the last one's pixels again). */
  private _paints = 0;
  /** Changes of the model seen. */
  private _modelVersion = 0;
  private _counts = { rects: 0, dimmed: 0, actions: 0, visited: 0 };
  private _laneTop = new Int32Array(0);
  private _laneBottom = new Int32Array(0);
  private _bandTop = new Int32Array(0);
  private _groupPalette = { key: '', palette: new Uint32Array(0) };
  private _actionPalette = { key: '', palette: new Uint32Array(0) };
  private _rgbFor: unknown = null;
  private _rgbCache = new Map<string, RGB | null>();
  private _image: ImageData | null = null;
  private _pixels: Uint32Array | null = null;
  private _layout: ILaneLayout = layoutLanes([]);
  private _layouts = new LaneLayoutCache();
  private _geometry: ILaneGeometry = laneGeometry(this._layout, 0, 0);
  private _hoverRow = -1;
  private _hoverAction = -1;
  private _hoverLeft: IClusterWorker | null = null;
  private _hatchFor: unknown = null;
  private _hatchPattern: CanvasPattern | null = null;
  private _faintFor: unknown = null;
  private _faintPattern: CanvasPattern | null = null;
  private _mouse: [number, number] = [0, 0];
  private _drag: {
    x: number;
    lastX: number;
    select: boolean;
    moved: boolean;
  } | null = null;
  private _legendRun: RunData | null = null;
  private _legendCount = -1;
  private _legendKinds = '';
  private _inSpan = new Uint16Array(0);
  private _inSpanKey: {
    run: RunData | null;
    mask: Uint8Array | null;
    highlight: Uint8Array | null;
    n: number;
  } = { run: null, mask: null, highlight: null, n: -1 };
}
