/**
 * A cluster's memory (protocol 1.2 `memory`) on the task stream's time axis: managed,
 * unmanaged and spilled bytes stacked (distributed's colours), summed over the workers or
 * for the one picked, with the memory limit as a dashed line (named instead when far
 * above the memory used); and the bandwidth of the workers' incoming transfers (bytes/s,
 * ~50 bins over the window) as a red step line on a scale of its own. Under it, side by
 * side, tables of the bytes moved per (source → destination) pair of workers and per type
 * of data moved (protocol 1.3; none from older kernels), as distributed's Bandwidth tabs.
 * Addresses and type names are data: set as text. Hidden for runs that have neither
 * memory nor transfers (local runs, 1.1 kernels).
 */

import {
  bandwidth,
  ClusterTables,
  IMemoryStack,
  IMoved,
  memoryStack,
  pairBandwidth,
  typeBandwidth
} from '../clusterTables';
import { formatBytes, formatCount } from '../format';
import { decimate, stepVertices } from '../lod';
import { ChangeKind, ProfileModel, RunData } from '../model';
import { GUTTER } from './canvas';
import { TimeSeriesView } from './resources';
import { TimeViewport } from './viewport';

/** Layers bottom to top: name and colour (distributed's memory by state). */
export const MEMORY_LAYERS: readonly [string, string][] = [
  ['managed', '#1f77b4'],
  ['unmanaged', '#8fbbe0'],
  ['spilled', '#a6a6a6']
];
/** Colour of the bandwidth line: a transfer's. */
const BANDWIDTH_COLOR = '#d62728';
/** Bins of the bandwidth line over the visible window. */
const BANDWIDTH_BINS = 50;
/** Value of the worker picker that sums over the workers. */
const ALL = '';
/**
 * The limit sets the scale only while the memory peaks above 1/LIMIT_SCALE of it: a
 * LocalCluster's default limit (the host's RAM) would squash a few hundred MB to a line.
 */
const LIMIT_SCALE = 3;
/** Pairs of workers listed under the chart (the others counted in a last row). */
export const PAIR_ROWS = 8;
/** Types of data listed under the chart (the others counted in a last row). */
export const TYPE_ROWS = 8;

/** A table row of `cells` (text): the first left-aligned, the others right-aligned. */
function tableRow(cells: string[], tag: 'td' | 'th' = 'td'): HTMLElement {
  const tr = document.createElement('tr');
  cells.forEach((text, i) => {
    const cell = document.createElement(tag);
    cell.textContent = text;
    cell.style.padding = '0 8px 0 0';
    cell.style.textAlign = i === 0 ? 'left' : 'right';
    tr.append(cell);
  });
  return tr;
}

/**
 * Fill `table` with a header row and the first `max` `entries` (named by `name`: text),
 * then a row counting the others (`… 3 more pairs`); hidden when there are none.
 */
function fillMoved<T extends IMoved>(
  table: HTMLTableElement,
  title: string,
  entries: T[],
  name: (entry: T) => string,
  max: number,
  more: string
): void {
  table.style.display = entries.length > 0 ? '' : 'none';
  const rows = entries
    .slice(0, max)
    .map(e =>
      tableRow([
        name(e),
        formatBytes(e.bytes),
        formatCount(e.transfers),
        `${formatBytes(e.bandwidth)}/s`
      ])
    );
  if (entries.length > max) {
    rows.push(tableRow([`… ${formatCount(entries.length - max)} ${more}`]));
  }
  const head = tableRow([title, 'bytes', 'transfers', 'bytes/s'], 'th');
  table.replaceChildren(...(entries.length > 0 ? [head, ...rows] : []));
}

/** Managed, managed + unmanaged and the total at each time: the stack's upper edges. */
function cumulative(stack: IMemoryStack): Float64Array[] {
  const edges = [0, 1, 2].map(() => new Float64Array(stack.n));
  for (let i = 0; i < stack.n; i++) {
    edges[0][i] = stack.managed[i];
    edges[1][i] = edges[0][i] + stack.unmanaged[i];
    edges[2][i] = edges[1][i] + stack.spilled[i];
  }
  return edges;
}

export class MemoryView extends TimeSeriesView {
  constructor(model: ProfileModel, viewport: TimeViewport) {
    super('jp-DaskProfile-memory', 90, model, viewport);
    this.toolbar.className = 'jp-DaskProfile-memoryBar';
    Object.assign(this.toolbar.style, {
      display: 'flex',
      flexWrap: 'wrap',
      alignItems: 'center',
      gap: '2px 10px',
      margin: '2px 0'
    });
    this.picker.className = 'jp-DaskProfile-memoryWorker';
    this.picker.title = 'Memory of one worker, or summed over the workers';
    this.picker.addEventListener('change', () => {
      this._selected = this.picker.value;
      this.schedule();
    });
    this.toolbar.append(this.picker, ...this._legend());
    this.node.prepend(this.toolbar);
    this.pairs.className = 'jp-DaskProfile-bandwidthPairs';
    this.types.className = 'jp-DaskProfile-bandwidthTypes';
    for (const table of [this.pairs, this.types]) {
      Object.assign(table.style, {
        fontSize: 'var(--jp-ui-font-size0)',
        borderCollapse: 'collapse',
        margin: '2px 0 2px 4px',
        alignSelf: 'flex-start'
      });
    }
    this.bandwidthTables.className = 'jp-DaskProfile-bandwidthTables';
    Object.assign(this.bandwidthTables.style, {
      display: 'flex',
      flexWrap: 'wrap',
      gap: '0 24px'
    });
    this.bandwidthTables.append(this.pairs, this.types);
    this.node.append(this.bandwidthTables);
    model.changed.connect(this._sync, this);
    this._sync();
  }

  protected readonly kinds: ChangeKind[] = [
    'memory',
    'transfers',
    'clusterWorkers'
  ];

  /** The worker picker and the legend, above the canvas. */
  readonly toolbar = document.createElement('div');
  readonly picker = document.createElement('select');
  /** Bytes moved per pair of workers and per type of data, side by side under the chart. */
  readonly bandwidthTables = document.createElement('div');
  readonly pairs = document.createElement('table');
  readonly types = document.createElement('table');

  dispose(): void {
    this.model.changed.disconnect(this._sync, this);
    super.dispose();
  }

  protected draw(
    ctx: CanvasRenderingContext2D,
    width: number,
    height: number
  ): void {
    const run = this.model.current;
    const plotW = width - GUTTER;
    if (plotW <= 0 || !run) {
      return;
    }
    this.drawGrid(ctx, plotW, height);
    this.drawSelection(ctx, plotW, height);
    const tables = run.tables;
    const stack = this._stack(run);
    const limit =
      this._selected === ALL
        ? tables.summedLimit()
        : (tables.memory.get(this._selected)?.limit ?? 0);
    const top = 4;
    const h = height - top - 2;
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, plotW, height);
    ctx.clip();
    const onScale = limit > 0 && limit <= LIMIT_SCALE * this._max;
    const max = Math.max(1, this._max, onScale ? limit : 0) * 1.05;
    const y = (v: number) => top + h - (v / max) * h;
    const points = this._drawStack(ctx, stack, plotW, y);
    if (onScale) {
      ctx.strokeStyle = this.theme.foreground;
      ctx.globalAlpha = 0.7;
      ctx.setLineDash([5, 4]);
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(GUTTER, Math.round(y(limit)) + 0.5);
      ctx.lineTo(GUTTER + plotW, Math.round(y(limit)) + 0.5);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.globalAlpha = 1;
    }
    const rate = this._drawBandwidth(ctx, tables, plotW, top, h);
    if (limit > 0 && !onScale) {
      const text = `limit ${formatBytes(limit)} (above)`;
      ctx.fillStyle = this.theme.muted;
      ctx.textBaseline = 'top';
      ctx.fillText(text, GUTTER + plotW - ctx.measureText(text).width - 4, top);
    }
    ctx.restore();
    this._labels(ctx, max / 1.05, rate, tables.transfers.length > 0);
    const d = this.canvas.dataset;
    d.points = String(points);
    d.workers = String(tables.memory.size);
    d.selected = this._selected;
    d.limit = String(limit);
    d.limitOnScale = String(onScale);
    d.bandwidth = String(Math.round(rate));
  }

  /** The stack of the picked worker, or the workers' sum (cached until rows arrive). */
  private _stack(run: RunData): IMemoryStack {
    const tables = run.tables;
    const key = `${this._selected}|${tables.memoryVersion}`;
    if (this._cacheRun === run && this._cacheKey === key && this._cache) {
      return this._cache.stack;
    }
    const one = tables.memory.get(this._selected);
    const stack =
      this._selected !== ALL && one ? memoryStack(one) : tables.summedMemory();
    const edges = cumulative(stack);
    let max = 0;
    for (let i = 0; i < stack.n; i++) {
      max = Math.max(max, edges[2][i]);
    }
    this._cache = { stack, edges };
    this._cacheRun = run;
    this._cacheKey = key;
    this._max = max;
    return stack;
  }

  /** Fill the layers top edge first, each from the baseline: painted over, they stack. */
  private _drawStack(
    ctx: CanvasRenderingContext2D,
    stack: IMemoryStack,
    plotW: number,
    y: (v: number) => number
  ): number {
    if (!this._cache || stack.n === 0) {
      return 0;
    }
    const { start, end } = this.viewport;
    const base = y(0);
    let points = 0;
    for (let layer = 2; layer >= 0; layer--) {
      const d = decimate(
        stack.time,
        this._cache.edges[layer],
        stack.n,
        start,
        end,
        plotW
      );
      const vertices = stepVertices(d);
      if (vertices.length === 0) {
        continue;
      }
      points += d.x.length;
      ctx.fillStyle = MEMORY_LAYERS[layer][1];
      ctx.beginPath();
      ctx.moveTo(GUTTER + vertices[0][0], base);
      for (const [x, v] of vertices) {
        ctx.lineTo(GUTTER + x, y(v));
      }
      ctx.lineTo(GUTTER + vertices[vertices.length - 1][0], base);
      ctx.closePath();
      ctx.fill();
    }
    return points;
  }

  /** The bandwidth step line on its own scale; returns its largest rate (bytes/s). */
  private _drawBandwidth(
    ctx: CanvasRenderingContext2D,
    tables: ClusterTables,
    plotW: number,
    top: number,
    h: number
  ): number {
    if (tables.transfers.length === 0) {
      return 0;
    }
    const { start, end } = this.viewport;
    const rates = bandwidth(tables.transfers, start, end, BANDWIDTH_BINS);
    const max = Math.max(...rates);
    if (!(max > 0)) {
      return 0;
    }
    const step = plotW / BANDWIDTH_BINS;
    const y = (v: number) => top + h - (v / (max * 1.05)) * h;
    ctx.strokeStyle = BANDWIDTH_COLOR;
    ctx.globalAlpha = 0.85;
    ctx.lineWidth = 1.25;
    ctx.beginPath();
    rates.forEach((r, k) => {
      const x = GUTTER + k * step;
      if (k === 0) {
        ctx.moveTo(x, y(r));
      } else {
        ctx.lineTo(x, y(r));
      }
      ctx.lineTo(x + step, y(r));
    });
    ctx.stroke();
    ctx.globalAlpha = 1;
    return max;
  }

  /** The gutter: what is drawn and each scale's top. */
  private _labels(
    ctx: CanvasRenderingContext2D,
    max: number,
    rate: number,
    transfers: boolean
  ): void {
    const theme = this.theme;
    ctx.textBaseline = 'top';
    ctx.fillStyle = theme.muted;
    ctx.fillText('Memory', 4, 4);
    ctx.fillText(formatBytes(max), 4, 17);
    if (transfers) {
      ctx.fillStyle = BANDWIDTH_COLOR;
      ctx.fillText('Transfers', 4, 36);
      ctx.fillText(`${formatBytes(rate)}/s`, 4, 49);
    }
  }

  /** Legend items: the layers, the limit and the bandwidth line (static text). */
  private _legend(): HTMLElement[] {
    const item = (text: string, style: Partial<CSSStyleDeclaration>) => {
      const node = document.createElement('span');
      node.className = 'jp-DaskProfile-legendItem';
      const swatch = document.createElement('span');
      swatch.className = 'jp-DaskProfile-swatch';
      Object.assign(swatch.style, style);
      const name = document.createElement('span');
      name.textContent = text;
      node.append(swatch, name);
      return node;
    };
    return [
      ...MEMORY_LAYERS.map(([name, color]) =>
        item(name, { background: color })
      ),
      item('limit', {
        height: '0',
        borderTop: '2px dashed var(--jp-ui-font-color1)'
      }),
      item('transfers (bytes/s)', {
        height: '2px',
        background: BANDWIDTH_COLOR
      })
    ];
  }

  /** Show the view only for runs with memory or transfers; list the workers to pick. */
  private _sync(): void {
    const run = this.model.current;
    const tables = run?.tables;
    const shown =
      !!tables && (tables.memory.size > 0 || tables.transfers.length > 0);
    this.node.style.display = shown ? '' : 'none';
    const sources = tables ? [...tables.memory.keys()] : [];
    const key = sources.join('\n');
    if (key !== this._pickerKey) {
      this._pickerKey = key;
      const all = document.createElement('option');
      all.value = ALL;
      all.textContent = `All workers (${sources.length}, summed)`;
      const options = sources.map(source => {
        const o = document.createElement('option');
        o.value = source;
        o.textContent = source;
        return o;
      });
      this.picker.replaceChildren(all, ...options);
      if (!sources.includes(this._selected)) {
        this._selected = ALL;
      }
      this.picker.value = this._selected;
    }
    this._syncPairs(tables);
  }

  /** The pair and type tables, rebuilt when transfers came (or the run changed). */
  private _syncPairs(tables: ClusterTables | undefined): void {
    const n = tables?.transfers.length ?? 0;
    if (tables === this._pairsFor && n === this._pairsRows) {
      return;
    }
    this._pairsFor = tables;
    this._pairsRows = n;
    const pairs = tables && n > 0 ? pairBandwidth(tables.transfers) : [];
    const types = tables && n > 0 ? typeBandwidth(tables.transfers) : [];
    this.pairs.dataset.pairs = String(pairs.length);
    this.types.dataset.types = String(types.length);
    fillMoved(
      this.pairs,
      'Bandwidth by worker pair',
      pairs,
      p => `${p.source} → ${p.destination}`,
      PAIR_ROWS,
      'more pairs'
    );
    fillMoved(
      this.types,
      'Bandwidth by type',
      types,
      t => t.type,
      TYPE_ROWS,
      'more types'
    );
  }

  private _selected = ALL;
  private _pairsFor: ClusterTables | undefined = undefined;
  private _pairsRows = -1;
  private _pickerKey: string | null = null;
  private _cache: { stack: IMemoryStack; edges: Float64Array[] } | null = null;
  private _cacheRun: RunData | null = null;
  private _cacheKey = '';
  private _max = 0;
}
