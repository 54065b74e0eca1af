/**
 * The flame graph of the stack samples (flame.ts lays it out): click a frame to zoom on
 * it and open its function's source (the `frameClicked` signal: the panel shows the
 * source view), click an ancestor (or double-click) to zoom out, search highlights
 * matching frames, a group filter keeps one task group, and the task stream's selected
 * time range restricts the samples to the sampler cycles overlapping it. Hover shows a
 * frame's samples and estimated seconds (sourceLines.sampleScale). A picked finding that
 * names one group (the model's highlight) picks that group in the filter while it lasts.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { hashString, hslToRgb, mix, toHex } from '../colors';
import {
  combineGroups,
  countNodes,
  IFlameLayout,
  IFlameNode,
  IFlameRect,
  layoutFlame
} from '../flame';
import { singleGroup } from '../findings';
import { formatCount, formatDuration } from '../format';
import { ChangeKind, ProfileModel, RunData, stacksInRange } from '../model';
import { ISampleScale, NO_SCALE, runSampleScale } from '../sourceLines';
import { CanvasView, fitText, Tooltip } from './canvas';
import { TimeViewport } from './viewport';

const MIN_HEIGHT = 60;
const MAX_ROWS = 40;

function frameColor(node: IFlameNode, dark: boolean): string {
  const h = hashString(node.filename || node.name);
  const hue = 10 + (h % 50); // warm: red .. yellow
  return toHex(hslToRgb(hue, 0.7, dark ? 0.42 : 0.62 + ((h >> 8) % 10) / 100));
}

/** True for nodes of a function (not the root, not a task group's node). */
export function isFunctionNode(node: IFlameNode): boolean {
  return node.identifier !== 'root' && !node.identifier.startsWith('group:');
}

export class FlameGraphView extends CanvasView {
  constructor(model: ProfileModel, viewport: TimeViewport) {
    super('jp-DaskProfile-flame', MIN_HEIGHT);
    this._model = model;
    this._viewport = viewport;
    this._tooltip = new Tooltip(this.node);
    this._buildToolbar();
    this.canvas.addEventListener('mousemove', this._onHover);
    this.canvas.addEventListener('mouseleave', this._onLeave);
    this.canvas.addEventListener('click', this._onClick);
    this.canvas.addEventListener('dblclick', this._onDoubleClick);
    model.changed.connect(this._onModel, this);
    viewport.changed.connect(this._onViewport, this);
  }

  /** Search box, group filter, zoom reset, selected range: placed above the canvas. */
  readonly toolbar = document.createElement('div');

  /** Row height in CSS pixels (a change resizes the canvas and redraws). */
  get rowHeight(): number {
    return this._rowHeight;
  }

  set rowHeight(value: number) {
    if (value !== this._rowHeight) {
      this._rowHeight = value;
      this._relayout();
    }
  }

  /** Nodes in the tree shown (all groups or the filtered one, in the time range). */
  get nodeCount(): number {
    return this._nodeCount;
  }

  /** Samples in the tree shown. */
  get samples(): number {
    return this._root?.count ?? 0;
  }

  /** Emitted when the tree shown changes (new samples, group filter, range, search). */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Emitted with the node of a function frame the user clicked. */
  get frameClicked(): ISignal<this, IFlameNode> {
    return this._frameClicked;
  }

  /** The tree shown (all groups or the filtered one, in the time range), or null. */
  get root(): IFlameNode | null {
    return this._root;
  }

  /** Seconds per sample of the current run's groups (kept until its rows change). */
  get scale(): ISampleScale {
    const run = this._model.current;
    if (!run) {
      return NO_SCALE;
    }
    const key = `${String(run.id)}:${run.taskCount}:${run.stackSamples}`;
    if (this._scale?.run !== run || this._scale.key !== key) {
      this._scale = { run, key, scale: runSampleScale(run) };
    }
    return this._scale.scale;
  }

  /** Search the frames whose function or file name contains `query`. */
  search(query: string): void {
    this._query = query;
    this._search.value = query;
    this._relayout();
  }

  dispose(): void {
    Signal.clearData(this);
    this._model.changed.disconnect(this._onModel, this);
    this._viewport.changed.disconnect(this._onViewport, this);
    super.dispose();
  }

  protected draw(
    ctx: CanvasRenderingContext2D,
    width: number,
    height: number
  ): void {
    const theme = this.theme;
    if (width !== this._layoutWidth) {
      this._layoutWidth = width;
      this._layout = null;
    }
    const layout = this._ensureLayout();
    if (!layout || layout.rects.length === 0 || layout.total === 0) {
      ctx.fillStyle = theme.muted;
      ctx.textBaseline = 'middle';
      ctx.fillText(this._emptyText(), 8, 16);
      this.canvas.dataset.rects = '0';
      return;
    }
    const rh = this.rowHeight;
    const searching = this._query.trim().length > 0;
    ctx.textBaseline = 'middle';
    let drawn = 0;
    for (const r of layout.rects) {
      const x = r.x0 * width;
      const w = (r.x1 - r.x0) * width;
      const y = r.depth * rh;
      if (y > height) {
        continue;
      }
      let color = frameColor(r.node, theme.dark);
      if (r.ancestor) {
        color = mix(color, theme.dark ? '#000000' : '#ffffff', 0.45);
      }
      if (searching) {
        color = r.matched
          ? '#e040fb'
          : mix(color, theme.dark ? '#000000' : '#ffffff', 0.6);
      }
      ctx.fillStyle = color;
      ctx.fillRect(x, y, Math.max(0.5, w - 0.5), rh - 1);
      drawn++;
      if (w > 24) {
        ctx.fillStyle = theme.dark ? '#ffffff' : '#000000';
        ctx.fillText(
          fitText(ctx, r.node.name || r.node.identifier, w - 6),
          x + 3,
          y + rh / 2
        );
      }
    }
    if (this._hover) {
      const r = this._hover;
      ctx.strokeStyle = theme.foreground;
      ctx.lineWidth = 1;
      ctx.strokeRect(
        r.x0 * width + 0.5,
        r.depth * rh + 0.5,
        (r.x1 - r.x0) * width - 1,
        rh - 2
      );
    }
    this.canvas.dataset.rects = String(drawn);
  }

  // ------------------------------------------------------------------ data

  private _emptyText(): string {
    const run = this._model.current;
    if (!run) {
      return 'Flame graph: no run yet.';
    }
    if (run.stackSamples === 0) {
      return 'Flame graph: no stack samples yet.';
    }
    return 'Flame graph: no samples in this selection.';
  }

  /** Rebuild the merged tree (after new samples, a group filter or a range change). */
  private _rebuild(): void {
    const run = this._model.current;
    if (!run) {
      this._root = null;
      this._nodeCount = 0;
    } else {
      const trees = stacksInRange(run, this._viewport.selection);
      const groups = this._group ? new Set([this._group]) : undefined;
      this._root = combineGroups(trees, groups);
      this._nodeCount = this._root.count > 0 ? countNodes(this._root) : 0;
    }
    this._updateGroups(run);
    this._updateRange();
    this._relayout();
  }

  private _relayout(): void {
    this._layout = null;
    this._hover = null;
    const layout = this._ensureLayout();
    const rows = layout ? Math.min(MAX_ROWS, layout.depth) : 0;
    this.setHeight(Math.max(MIN_HEIGHT, rows * this.rowHeight + 4));
    this._matchLabel.textContent =
      this._query.trim() && layout
        ? `${(layout.matchedFraction * 100).toFixed(1)} % match`
        : '';
    this.node.dataset.flameNodes = String(this._nodeCount);
    this.node.dataset.group = this._group;
    this._changed.emit();
    this.schedule();
  }

  private _ensureLayout(): IFlameLayout | null {
    if (!this._root) {
      return null;
    }
    if (!this._layout) {
      const width = Math.max(
        1,
        this._layoutWidth || this.node.clientWidth || 300
      );
      this._layout = layoutFlame(this._root, {
        focus: this._focus,
        query: this._query,
        minFraction: 0.5 / width
      });
    }
    return this._layout;
  }

  // ------------------------------------------------------------------ toolbar

  private _buildToolbar(): void {
    this.toolbar.className = 'jp-DaskProfile-toolbar';
    this._search.type = 'search';
    this._search.placeholder = 'Search functions';
    this._search.className = 'jp-DaskProfile-search';
    this._search.addEventListener('input', () => {
      this._query = this._search.value;
      this._relayout();
    });
    this._groupSelect.className = 'jp-DaskProfile-groupFilter';
    this._groupSelect.title = 'Task group';
    this._groupSelect.addEventListener('change', () => {
      this._group = this._groupSelect.value;
      this._focus = [];
      this._rebuild();
    });
    const reset = document.createElement('button');
    reset.className = 'jp-DaskProfile-button';
    reset.textContent = 'Reset zoom';
    reset.addEventListener('click', () => this._zoom([]));
    this._rangeLabel.className = 'jp-DaskProfile-range';
    this._clearRange.className = 'jp-DaskProfile-button';
    this._clearRange.textContent = 'Clear range';
    this._clearRange.addEventListener('click', () =>
      this._viewport.select(null)
    );
    this._matchLabel.className = 'jp-DaskProfile-match';
    this.toolbar.append(
      this._search,
      this._groupSelect,
      reset,
      this._rangeLabel,
      this._clearRange,
      this._matchLabel
    );
    this._updateRange();
  }

  private _updateGroups(run: RunData | null): void {
    const names = run ? [...run.stacks.keys()].sort() : [];
    const key = names.join('\u0000');
    if (key === this._groupsKey) {
      this._groupSelect.value = this._group; // e.g. picked by a finding
      return;
    }
    this._groupsKey = key;
    const all = document.createElement('option');
    all.value = '';
    all.textContent = 'All groups';
    const options = [all];
    for (const name of names) {
      const o = document.createElement('option');
      o.value = name;
      o.textContent = name;
      options.push(o);
    }
    this._groupSelect.replaceChildren(...options);
    if (this._group && !names.includes(this._group)) {
      this._group = '';
    }
    this._groupSelect.value = this._group;
  }

  private _updateRange(): void {
    const sel = this._viewport.selection;
    this._rangeLabel.textContent = sel
      ? `${formatDuration(sel[0])} – ${formatDuration(sel[1])}`
      : '';
    this._clearRange.hidden = sel === null;
  }

  private _zoom(path: string[]): void {
    this._focus = path;
    this._relayout();
  }

  // ------------------------------------------------------------------ events

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (changes.has('current')) {
      this._focus = [];
      this._group = '';
      this._groupOfFinding = '';
    }
    const picked =
      (changes.has('highlight') || changes.has('current')) &&
      this._followHighlight();
    if (
      picked ||
      changes.has('stacks') ||
      changes.has('current') ||
      changes.has('runs')
    ) {
      this._rebuild();
    }
  }

  /**
   * Pick the group of the highlighted finding (one group, with samples), or put back
   * 'All groups' when the group it picked is cleared; whether the filter changed.
   */
  private _followHighlight(): boolean {
    const name = singleGroup(this._model.highlight);
    const run = this._model.current;
    if (name !== null && run?.stacks.has(name)) {
      const changed = this._group !== name;
      this._group = name;
      this._groupOfFinding = name;
      this._focus = changed ? [] : this._focus;
      return changed;
    }
    const restore =
      this._groupOfFinding !== '' && this._group === this._groupOfFinding;
    this._groupOfFinding = '';
    if (restore) {
      this._group = '';
      this._focus = [];
    }
    return restore;
  }

  private _onViewport(): void {
    const sel = this._viewport.selection;
    const key = sel ? `${sel[0]}:${sel[1]}` : '';
    if (key !== this._selectionKey) {
      this._selectionKey = key;
      this._rebuild();
    }
  }

  private _rectAt(e: MouseEvent): IFlameRect | null {
    const layout = this._layout;
    if (!layout) {
      return null;
    }
    const box = this.canvas.getBoundingClientRect();
    const fx = (e.clientX - box.left) / Math.max(1, box.width);
    const depth = Math.floor((e.clientY - box.top) / this.rowHeight);
    for (const r of layout.rects) {
      if (r.depth === depth && fx >= r.x0 && fx < r.x1) {
        return r;
      }
    }
    return null;
  }

  private _onHover = (e: MouseEvent): void => {
    const r = this._rectAt(e);
    if (r !== this._hover) {
      this._hover = r;
      this.schedule();
    }
    if (!r || !this._layout) {
      this._tooltip.hide();
      return;
    }
    const box = this.canvas.getBoundingClientRect();
    const total = this._root?.count ?? 0;
    const node = r.node;
    const lines: [string, string][] = [['', node.name || node.identifier]];
    if (node.filename) {
      lines.push(['file', `${node.filename}:${node.line}`]);
    }
    const share = total > 0 ? ((node.count / total) * 100).toFixed(1) : '0';
    lines.push(['samples', `${formatCount(node.count)} (${share} %)`]);
    const seconds = this._seconds(r);
    if (seconds !== null) {
      lines.push(['time', `~${formatDuration(seconds)}`]);
    }
    if (isFunctionNode(node)) {
      lines.push(['', 'click: zoom + source']);
    }
    this._tooltip.show(lines, e.clientX - box.left, e.clientY - box.top);
  };

  private _onLeave = (): void => {
    this._tooltip.hide();
    if (this._hover) {
      this._hover = null;
      this.schedule();
    }
  };

  /** Estimated seconds of a rectangle's samples (by the group it is under). */
  private _seconds(r: IFlameRect): number | null {
    const scale = this.scale;
    const group = r.path.find(id => id.startsWith('group:'));
    const name = group ? group.slice('group:'.length) : null;
    if (name === null && r.node.identifier === 'root') {
      let sum = 0;
      for (const g of r.node.children) {
        const k = scale.groups.get(g.name) ?? scale.fallback;
        if (k === null) {
          return null;
        }
        sum += g.count * k;
      }
      return sum;
    }
    const k = (name === null ? null : scale.groups.get(name)) ?? scale.fallback;
    return k === null ? null : r.node.count * k;
  }

  private _onClick = (e: MouseEvent): void => {
    const r = this._rectAt(e);
    if (r) {
      this._zoom(r.path);
      if (isFunctionNode(r.node)) {
        this._frameClicked.emit(r.node);
      }
    }
  };

  private _onDoubleClick = (): void => {
    this._zoom([]);
  };

  private _changed = new Signal<this, void>(this);
  private _frameClicked = new Signal<this, IFlameNode>(this);
  private _scale: { run: RunData; key: string; scale: ISampleScale } | null =
    null;
  private _rowHeight = 16;
  private _model: ProfileModel;
  private _viewport: TimeViewport;
  private _tooltip: Tooltip;
  private _root: IFlameNode | null = null;
  private _nodeCount = 0;
  private _layout: IFlameLayout | null = null;
  private _layoutWidth = 0;
  private _focus: string[] = [];
  private _query = '';
  private _group = '';
  /** The group the highlighted finding picked ('' when it picked none). */
  private _groupOfFinding = '';
  private _groupsKey = '\u0001';
  private _selectionKey = '';
  private _hover: IFlameRect | null = null;
  private _search = document.createElement('input');
  private _groupSelect = document.createElement('select');
  private _rangeLabel = document.createElement('span');
  private _clearRange = document.createElement('button');
  private _matchLabel = document.createElement('span');
}
