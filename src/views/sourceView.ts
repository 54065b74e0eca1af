/**
 * The source view of one function: a header (function, file, samples, estimated seconds,
 * a close button) and one row per line (line number, a heat bar proportional to the
 * line's samples, samples, seconds, the line's text). Plain DOM with no JupyterLab or
 * Lumino import, so the standalone inline view can use it too. Source text, names and
 * file names are data: set with textContent only, never as HTML.
 */

import { IFlameNode } from '../flame';
import { formatCount, formatDuration } from '../format';
import { ISourceInfo } from '../protocol';
import {
  collectLines,
  ISampleScale,
  ISourceRow,
  ISourceTable,
  NO_SCALE,
  sourceTable
} from '../sourceLines';

/** Sources by node identifier: a Map (the panel's model) or a plain object (JSON). */
export type SourceMap =
  | ReadonlyMap<string, ISourceInfo>
  | { readonly [identifier: string]: ISourceInfo };

/** Options of a source view. */
export interface ISourceViewOptions {
  /** Called after the user closed the view (close button or Escape). */
  onClose?: () => void;
}

function lookup(
  sources: SourceMap,
  identifier: string
): ISourceInfo | undefined {
  if (sources instanceof Map) {
    return sources.get(identifier);
  }
  const obj = sources as { readonly [identifier: string]: ISourceInfo };
  return Object.prototype.hasOwnProperty.call(obj, identifier)
    ? obj[identifier]
    : undefined;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function seconds(value: number | null): string {
  return value === null ? '' : formatDuration(value);
}

/** One function's source with a heat bar per line; hidden until `show`. */
export class SourceView {
  constructor(options: ISourceViewOptions = {}) {
    this._onClose = options.onClose;
    this.node.className = 'jp-DaskProfile-source';
    this.node.tabIndex = -1;
    this.node.hidden = true;
    this.node.addEventListener('keydown', this._onKey);
    this._close.className = 'jp-DaskProfile-button jp-DaskProfile-sourceClose';
    this._close.textContent = '×';
    this._close.title = 'Close the source view (Escape)';
    this._close.setAttribute('aria-label', 'Close the source view');
    this._close.addEventListener('click', () => this.close());
    this._header.className = 'jp-DaskProfile-sourceHeader';
    this._note.className = 'jp-DaskProfile-sourceNote';
    this._rows.className = 'jp-DaskProfile-sourceRows';
    this.node.append(this._header, this._note, this._rows);
  }

  /** The view's root element (place it anywhere). */
  readonly node = document.createElement('div');

  /** Identifier of the function shown, or null while closed. */
  get identifier(): string | null {
    return this._identifier;
  }

  /** What is shown (null while closed): for tests and callers. */
  get table(): ISourceTable | null {
    return this._table;
  }

  /**
   * Show function `identifier`: the samples at its lines summed over every node with that
   * identifier in `tree`, its text from `sources` (when known), seconds by `scale`.
   */
  show(
    identifier: string,
    tree: IFlameNode,
    sources: SourceMap,
    scale: ISampleScale = NO_SCALE
  ): void {
    const opening = this._identifier !== identifier;
    this._identifier = identifier;
    const fn = collectLines(tree, identifier, scale);
    this._table = sourceTable(fn, lookup(sources, identifier));
    this._render(this._table);
    this.node.hidden = false;
    this.node.dataset.identifier = identifier;
    if (opening) {
      this._scrollToHottest();
    }
  }

  /** Hide the view (nothing happens if it is closed already). */
  close(): void {
    if (this._identifier === null) {
      return;
    }
    this._identifier = null;
    this._table = null;
    this.node.hidden = true;
    delete this.node.dataset.identifier;
    this._rows.replaceChildren();
    this._onClose?.();
  }

  dispose(): void {
    this.node.removeEventListener('keydown', this._onKey);
    this.node.remove();
  }

  /** Move the keyboard focus to the view (so Escape closes it) without scrolling. */
  focus(): void {
    this.node.focus({ preventScroll: true });
  }

  private _render(table: ISourceTable): void {
    const title = el('span', 'jp-DaskProfile-sourceName', table.name || '?');
    const file = el('span', 'jp-DaskProfile-sourceFile', table.file);
    const total = el(
      'span',
      'jp-DaskProfile-sourceTotal',
      `${formatCount(table.samples)} samples` +
        (table.seconds === null ? '' : ` · ~${seconds(table.seconds)}`)
    );
    this._header.replaceChildren(title, file, total, this._close);
    this._note.textContent = table.hasSource
      ? ''
      : 'Source not available: the lines with samples only.';
    this._note.hidden = table.hasSource;
    this.node.dataset.hasSource = String(table.hasSource);
    const rows = table.rows.map(r => this._row(r, table.maxSamples));
    this._rows.replaceChildren(...rows);
    this.node.dataset.rows = String(rows.length);
  }

  private _row(r: ISourceRow, max: number): HTMLElement {
    const row = el('div', 'jp-DaskProfile-sourceRow');
    row.dataset.line = String(r.line);
    row.dataset.samples = String(r.samples);
    if (r.samples > 0 && r.samples === max) {
      row.classList.add('jp-DaskProfile-sourceHot');
    }
    const heat = el('span', 'jp-DaskProfile-sourceHeat');
    const bar = el('span', 'jp-DaskProfile-sourceBar');
    bar.style.width = `${max > 0 ? (100 * r.samples) / max : 0}%`;
    heat.append(bar);
    heat.title =
      r.samples > 0 ? `${(r.share * 100).toFixed(1)} % of the function` : '';
    row.append(
      el('span', 'jp-DaskProfile-sourceLine', String(r.line)),
      heat,
      el(
        'span',
        'jp-DaskProfile-sourceSamples',
        r.samples > 0 ? formatCount(r.samples) : ''
      ),
      el(
        'span',
        'jp-DaskProfile-sourceSeconds',
        r.samples > 0 ? seconds(r.seconds) : ''
      ),
      el(
        'span',
        r.text === null
          ? 'jp-DaskProfile-sourceText jp-DaskProfile-muted'
          : 'jp-DaskProfile-sourceText',
        r.text ?? '(source not available)'
      )
    );
    return row;
  }

  /** Bring the hottest line into the rows' scrolled area. */
  private _scrollToHottest(): void {
    const hot = this._rows.querySelector<HTMLElement>(
      '.jp-DaskProfile-sourceHot'
    );
    if (hot && this._rows.clientHeight > 0) {
      this._rows.scrollTop = Math.max(
        0,
        hot.offsetTop - this._rows.offsetTop - this._rows.clientHeight / 3
      );
    }
  }

  private _onKey = (e: KeyboardEvent): void => {
    if (e.key === 'Escape' && this._identifier !== null) {
      e.preventDefault();
      e.stopPropagation();
      this.close();
    }
  };

  private _onClose?: () => void;
  private _identifier: string | null = null;
  private _table: ISourceTable | null = null;
  private _header = document.createElement('div');
  private _note = document.createElement('div');
  private _rows = document.createElement('div');
  private _close = document.createElement('button');
}
