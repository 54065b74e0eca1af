/**
 * CPU and memory lines, and cache occupancy per group, on the task stream's time axis
 * (same gutter, same viewport). Series are decimated per pixel column (lod.ts).
 */

import { formatBytes, formatPercent, niceTicks } from '../format';
import { decimate, IDecimated, stepVertices } from '../lod';
import { ChangeKind, ProfileModel, RunData } from '../model';
import { CanvasView, GUTTER } from './canvas';
import { TimeViewport } from './viewport';

const CPU_COLOR = '#1f77b4';
const MEMORY_COLOR = '#d62728';

/** Draw a decimated series as a line through each column's min/max envelope. */
function drawSeries(
  ctx: CanvasRenderingContext2D,
  d: IDecimated,
  x0: number,
  y: (v: number) => number
): void {
  ctx.beginPath();
  for (let i = 0; i < d.x.length; i++) {
    const x = x0 + d.x[i];
    if (i === 0) {
      ctx.moveTo(x, y(d.min[i]));
    } else {
      ctx.lineTo(x, y(d.min[i]));
    }
    if (d.max[i] !== d.min[i]) {
      ctx.lineTo(x, y(d.max[i]));
      ctx.lineTo(x, y(d.last[i]));
    }
  }
  ctx.stroke();
}

abstract class TimeSeriesView extends CanvasView {
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
  }

  protected readonly kinds: ChangeKind[] = ['resources'];

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
    const n = run?.resourceCount ?? 0;
    if (!run || n === 0) {
      ctx.fillStyle = theme.muted;
      ctx.fillText('CPU, memory: no samples yet', 4, 14);
      this.points = 0;
      this.canvas.dataset.points = '0';
      return;
    }
    const { start, end } = this.viewport;
    const cpu = decimate(
      run.resTime.data,
      run.resCpu.data,
      n,
      start,
      end,
      plotW
    );
    const mem = decimate(
      run.resTime.data,
      run.resMemory.data,
      n,
      start,
      end,
      plotW
    );
    const { maxCpu, maxMem } = this._maxima(run);
    const top = 4;
    const h = height - top - 2;
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, plotW, height);
    ctx.clip();
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = theme.dark ? '#6baed6' : CPU_COLOR;
    drawSeries(ctx, cpu, GUTTER, v => top + h - (v / maxCpu) * h);
    ctx.strokeStyle = theme.dark ? '#fc8d59' : MEMORY_COLOR;
    drawSeries(ctx, mem, GUTTER, v => top + h - (v / maxMem) * h);
    ctx.restore();
    ctx.textBaseline = 'top';
    ctx.fillStyle = theme.dark ? '#6baed6' : CPU_COLOR;
    ctx.fillText('CPU', 4, 4);
    ctx.fillText(formatPercent(maxCpu), 4, 17);
    ctx.fillStyle = theme.dark ? '#fc8d59' : MEMORY_COLOR;
    ctx.fillText('Memory', 4, 36);
    ctx.fillText(formatBytes(maxMem), 4, 49);
    this.points = cpu.x.length + mem.x.length;
    this.canvas.dataset.points = String(this.points);
  }

  private _maxima(run: RunData): { maxCpu: number; maxMem: number } {
    let maxCpu = 100;
    let maxMem = 1;
    for (let i = 0; i < run.resourceCount; i++) {
      maxCpu = Math.max(maxCpu, run.resCpu.data[i]);
      maxMem = Math.max(maxMem, run.resMemory.data[i]);
    }
    return { maxCpu: Math.ceil(maxCpu / 100) * 100, maxMem: maxMem * 1.05 };
  }
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
