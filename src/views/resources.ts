/**
 * CPU and memory lines, and cache occupancy per group, on the task stream's time axis
 * (same gutter, same viewport). Series are decimated per pixel column (lod.ts). The run's
 * total is drawn bold; each worker process (a `source` of resources, protocol 1.1) as a
 * thin, lighter line of its own colour (CPU solid, memory dashed) named in a legend.
 */

import { formatBytes, formatPercent, niceTicks } from '../format';
import { decimate, DecimatedBuffer, decimateInto, stepVertices } from '../lod';
import { ChangeKind, ProfileModel, ResourceSeries, RunData } from '../model';
import { CanvasView, GUTTER } from './canvas';
import { TimeViewport } from './viewport';

const CPU_COLOR = '#1f77b4';
const MEMORY_COLOR = '#d62728';
/** Opacity of a worker process's lines (lighter than the total's). */
const SOURCE_ALPHA = 0.75;
/** Dashes of a worker process's memory line, and none (its CPU line). */
const DASH = [4, 3];
const SOLID: number[] = [];
/** Most worker processes named in the legend. */
const MAX_LEGEND_SOURCES = 40;

/** Colours of worker processes: categorical, none the total's blue or red. */
const SOURCE_PALETTE = [
  '#ff7f0e',
  '#2ca02c',
  '#9467bd',
  '#17becf',
  '#8c564b',
  '#e377c2',
  '#bcbd22',
  '#7f7f7f'
];

/**
 * The colour of the `index`-th worker process in label order: distinct for up to eight,
 * and the same for a replayed run (the order does not depend on arrival).
 */
export function sourceColor(index: number): string {
  return SOURCE_PALETTE[index % SOURCE_PALETTE.length];
}

/**
 * Draw a decimated series as a line through each column's min/max envelope, at
 * y = `base - v * scale`.
 */
function drawSeries(
  ctx: CanvasRenderingContext2D,
  d: DecimatedBuffer,
  x0: number,
  base: number,
  scale: number
): void {
  ctx.beginPath();
  const { x, min, max, last } = d;
  for (let i = 0; i < d.length; i++) {
    const px = x0 + x[i];
    if (i === 0) {
      ctx.moveTo(px, base - min[i] * scale);
    } else {
      ctx.lineTo(px, base - min[i] * scale);
    }
    if (max[i] !== min[i]) {
      ctx.lineTo(px, base - max[i] * scale);
      ctx.lineTo(px, base - last[i] * scale);
    }
  }
  ctx.stroke();
}

/** A canvas on the task stream's time axis that redraws when its kinds of data change. */
export abstract class TimeSeriesView extends CanvasView {
  constructor(
    className: string,
    height: number,
    model: ProfileModel,
    viewport: TimeViewport
  ) {
    super(className, height);
    this.model = model;
    this.viewport = viewport;
    model.changed.connect(this._onModel, this);
    viewport.changed.connect(this.schedule, this);
  }

  dispose(): void {
    this.model.changed.disconnect(this._onModel, this);
    this.viewport.changed.disconnect(this.schedule, this);
    super.dispose();
  }

  protected abstract readonly kinds: ChangeKind[];

  protected drawGrid(
    ctx: CanvasRenderingContext2D,
    plotW: number,
    height: number
  ): void {
    const { start, end } = this.viewport;
    ctx.fillStyle = this.theme.grid;
    for (const t of niceTicks(
      start,
      end,
      Math.max(2, Math.floor(plotW / 90))
    )) {
      ctx.fillRect(
        Math.round(GUTTER + ((t - start) / (end - start)) * plotW),
        0,
        1,
        height
      );
    }
    ctx.fillRect(GUTTER, height - 1, plotW, 1);
  }

  protected drawSelection(
    ctx: CanvasRenderingContext2D,
    plotW: number,
    height: number
  ): void {
    const sel = this.viewport.selection;
    if (!sel) {
      return;
    }
    const { start, end } = this.viewport;
    const k = plotW / (end - start);
    ctx.fillStyle = this.theme.selection;
    ctx.fillRect(
      GUTTER + (sel[0] - start) * k,
      0,
      (sel[1] - sel[0]) * k,
      height
    );
  }

  protected readonly model: ProfileModel;
  protected readonly viewport: TimeViewport;

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (
      changes.has('current') ||
      changes.has('runs') ||
      this.kinds.some(k => changes.has(k))
    ) {
      this.schedule();
    }
  }
}

/** CPU (% of one core, left scale) and memory (bytes) over time. */
export class ResourcesView extends TimeSeriesView {
  constructor(model: ProfileModel, viewport: TimeViewport) {
    super('jp-DaskProfile-resources', 90, model, viewport);
    // its own class: `.jp-DaskProfile-legend` names the task groups' legend
    this.legend.className = 'jp-DaskProfile-sourceLegend';
    Object.assign(this.legend.style, {
      display: 'none',
      flexWrap: 'wrap',
      gap: '2px 10px',
      margin: '2px 0 4px'
    });
    this.node.append(this.legend);
  }

  protected readonly kinds: ChangeKind[] = ['resources'];

  /** Names and colours of the worker processes (empty and hidden when there are none). */
  readonly legend = document.createElement('div');

  /** Points drawn in the last frame (after decimation). */
  points = 0;

  protected draw(
    ctx: CanvasRenderingContext2D,
    width: number,
    height: number
  ): void {
    const run = this.model.current;
    const plotW = width - GUTTER;
    if (plotW <= 0) {
      return;
    }
    this.drawGrid(ctx, plotW, height);
    this.drawSelection(ctx, plotW, height);
    const theme = this.theme;
    const sources = this._sources(run);
    this._updateLegend(sources);
    const n = run?.resourceCount ?? 0;
    if (!run || (n === 0 && sources.length === 0)) {
      ctx.fillStyle = theme.muted;
      ctx.fillText('CPU, memory: no samples yet', 4, 14);
      this.points = 0;
      this.canvas.dataset.points = '0';
      this.canvas.dataset.sources = '0';
      return;
    }
    const { maxCpu, maxMem } = this._maxima(run);
    const top = 4;
    const h = height - top - 2;
    // y = base - v * scale: top + h at 0, top at the scale's maximum
    const base = top + h;
    const cpu = h / maxCpu;
    const mem = h / maxMem;
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, plotW, height);
    ctx.clip();
    let points = 0;
    // each worker process under the total: thin, lighter, its own colour
    ctx.lineWidth = 1;
    ctx.globalAlpha = SOURCE_ALPHA;
    for (let i = 0; i < sources.length; i++) {
      const series = sources[i][1];
      ctx.strokeStyle = sourceColor(i);
      ctx.setLineDash(SOLID);
      points += this._line(ctx, series, series.cpu.data, plotW, base, cpu);
      ctx.setLineDash(DASH);
      points += this._line(ctx, series, series.memory.data, plotW, base, mem);
    }
    ctx.setLineDash([]);
    ctx.globalAlpha = 1;
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = theme.dark ? '#6baed6' : CPU_COLOR;
    points += this._line(ctx, run.resources, run.resCpu.data, plotW, base, cpu);
    ctx.strokeStyle = theme.dark ? '#fc8d59' : MEMORY_COLOR;
    points += this._line(
      ctx,
      run.resources,
      run.resMemory.data,
      plotW,
      base,
      mem
    );
    ctx.restore();
    ctx.textBaseline = 'top';
    ctx.fillStyle = theme.dark ? '#6baed6' : CPU_COLOR;
    ctx.fillText('CPU', 4, 4);
    ctx.fillText(formatPercent(maxCpu), 4, 17);
    ctx.fillStyle = theme.dark ? '#fc8d59' : MEMORY_COLOR;
    ctx.fillText('Memory', 4, 36);
    ctx.fillText(formatBytes(maxMem), 4, 49);
    this.points = points;
    this.canvas.dataset.points = String(this.points);
    this.canvas.dataset.sources = String(sources.length);
  }

  /**
   * Stroke one column of `series` decimated to the plot's width (into arrays kept from
   * frame to frame); returns the points.
   */
  private _line(
    ctx: CanvasRenderingContext2D,
    series: ResourceSeries,
    values: ArrayLike<number>,
    plotW: number,
    base: number,
    scale: number
  ): number {
    const n = series.length;
    if (n === 0) {
      return 0;
    }
    const { start, end } = this.viewport;
    const d = decimateInto(
      series.time.data,
      values,
      n,
      start,
      end,
      plotW,
      this._decimated
    );
    drawSeries(ctx, d, GUTTER, base, scale);
    return d.length;
  }

  /** The worker processes in label order (sorted again only when one is added). */
  private _sources(run: RunData | null): [string, ResourceSeries][] {
    if (!run) {
      return [];
    }
    if (
      run !== this._sourcesRun ||
      run.resourceSources.size !== this._sourcesList.length
    ) {
      this._sourcesRun = run;
      this._sourcesList = run.sources();
    }
    return this._sourcesList;
  }

  /** Scales: the total's maxima, or a worker process's when larger. */
  private _maxima(run: RunData): { maxCpu: number; maxMem: number } {
    let maxCpu = Math.max(100, run.resources.maxCpu);
    let maxMem = Math.max(1, run.resources.maxMemory);
    for (const series of run.resourceSources.values()) {
      maxCpu = Math.max(maxCpu, series.maxCpu);
      maxMem = Math.max(maxMem, series.maxMemory);
    }
    return { maxCpu: Math.ceil(maxCpu / 100) * 100, maxMem: maxMem * 1.05 };
  }

  /** One item per worker process: a swatch of its colour and its label (as text). */
  private _updateLegend(sources: [string, ResourceSeries][]): void {
    const names = sources.map(([source]) => source);
    const key = names.join('\n');
    if (key === this._legendKey) {
      return;
    }
    this._legendKey = key;
    this.legend.style.display = names.length === 0 ? 'none' : 'flex';
    if (names.length === 0) {
      this.legend.replaceChildren();
      return;
    }
    const note = document.createElement('span');
    note.className = 'jp-DaskProfile-legendItem';
    note.textContent = 'Per process (CPU solid, memory dashed):';
    const items: HTMLElement[] = [note];
    for (const [i, source] of names.slice(0, MAX_LEGEND_SOURCES).entries()) {
      const item = document.createElement('span');
      item.className = 'jp-DaskProfile-legendItem';
      item.title = source;
      const swatch = document.createElement('span');
      swatch.className = 'jp-DaskProfile-swatch';
      swatch.style.background = sourceColor(i);
      swatch.style.height = '3px';
      swatch.style.opacity = String(SOURCE_ALPHA);
      const name = document.createElement('span');
      name.textContent = source;
      item.append(swatch, name);
      items.push(item);
    }
    if (names.length > MAX_LEGEND_SOURCES) {
      const more = document.createElement('span');
      more.textContent = `+${names.length - MAX_LEGEND_SOURCES} more`;
      items.push(more);
    }
    this.legend.replaceChildren(...items);
  }

  private _legendKey = '';
  private _decimated = new DecimatedBuffer();
  private _sourcesRun: RunData | null = null;
  private _sourcesList: [string, ResourceSeries][] = [];
}

/** Cache occupancy per task group, as step lines coloured by group. */
export class CacheView extends TimeSeriesView {
  constructor(model: ProfileModel, viewport: TimeViewport) {
    super('jp-DaskProfile-cache', 60, model, viewport);
  }

  protected readonly kinds: ChangeKind[] = ['cache'];

  protected draw(
    ctx: CanvasRenderingContext2D,
    width: number,
    height: number
  ): void {
    const run = this.model.current;
    const plotW = width - GUTTER;
    if (plotW <= 0) {
      return;
    }
    this.drawGrid(ctx, plotW, height);
    this.drawSelection(ctx, plotW, height);
    const theme = this.theme;
    ctx.textBaseline = 'top';
    ctx.fillStyle = theme.muted;
    if (!run || run.cache.size === 0) {
      ctx.fillText('Cache: no data', 4, 4);
      this.canvas.dataset.series = '0';
      return;
    }
    ctx.fillText('Cache', 4, 4);
    const { start, end } = this.viewport;
    const max = run.cacheMax > 0 ? run.cacheMax : 1;
    const top = 4;
    const h = height - top - 2;
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, plotW, height);
    ctx.clip();
    ctx.lineWidth = 1.25;
    for (const [group, series] of run.cache) {
      const n = series.time.length;
      const d = decimate(
        series.time.data,
        series.metric.data,
        n,
        start,
        end,
        plotW
      );
      ctx.strokeStyle = run.group(group).color;
      ctx.beginPath();
      const points = stepVertices(d);
      points.forEach(([x, v], i) => {
        const y = top + h - (v / max) * h;
        if (i === 0) {
          ctx.moveTo(GUTTER + x, y);
        } else {
          ctx.lineTo(GUTTER + x, y);
        }
      });
      if (points.length > 0) {
        const last = points[points.length - 1][1];
        ctx.lineTo(GUTTER + plotW, top + h - (last / max) * h);
      }
      ctx.stroke();
    }
    ctx.restore();
    this.canvas.dataset.series = String(run.cache.size);
  }
}
