/**
 * A canvas that follows its element's size and the device pixel ratio, and draws at most
 * once per animation frame. Views subclass it and implement `draw`.
 */

import { ITheme, readTheme } from './theme';

/** Width of the label gutter left of every time axis, so the views line up. */
export const GUTTER = 72;

export abstract class CanvasView {
  constructor(className: string, height: number) {
    this.node.className = className;
    this.node.style.position = 'relative';
    this.canvas.style.display = 'block';
    this.canvas.style.width = '100%';
    this.canvas.style.height = `${height}px`;
    this.node.append(this.canvas);
    const ctx = this.canvas.getContext('2d', { alpha: false });
    if (!ctx) {
      throw new Error('daskprofile: no 2D canvas context');
    }
    this.ctx = ctx;
    this._height = height;
    if (typeof ResizeObserver !== 'undefined') {
      this._observer = new ResizeObserver(entries => {
        // the width comes from the observer, so drawing never forces a layout
        this._observedWidth = entries[entries.length - 1].contentRect.width;
        this.schedule();
      });
      this._observer.observe(this.node);
    }
  }

  readonly node = document.createElement('div');
  readonly canvas = document.createElement('canvas');
  protected readonly ctx: CanvasRenderingContext2D;

  /** Size in CSS pixels. */
  get width(): number {
    return this._width;
  }

  get height(): number {
    return this._height;
  }

  /** Time the last frame took to draw, in milliseconds. */
  get lastFrameMs(): number {
    return this._lastFrameMs;
  }

  get theme(): ITheme {
    if (!this._theme) {
      this._theme = readTheme(this.node);
    }
    return this._theme;
  }

  /** Re-read the theme (after a theme change) and redraw. */
  refreshTheme(): void {
    this._theme = null;
    this.schedule();
  }

  /** Change the height in CSS pixels. */
  setHeight(height: number): void {
    if (height !== this._height) {
      this._height = height;
      this.canvas.style.height = `${height}px`;
      this.schedule();
    }
  }

  /** Draw on the next animation frame (coalesced). */
  schedule(): void {
    if (this._frame !== 0 || this._disposed) {
      return;
    }
    this._frame = requestAnimationFrame(() => {
      this._frame = 0;
      this.render();
    });
  }

  /** Draw now (resizing the backing store if needed). */
  render(): void {
    if (this._disposed) {
      return;
    }
    const t = performance.now();
    const width =
      this._observedWidth >= 0 ? this._observedWidth : this.node.clientWidth;
    if (width <= 0) {
      return;
    }
    const dpr = window.devicePixelRatio || 1;
    const w = Math.round(width * dpr);
    const h = Math.round(this._height * dpr);
    if (this.canvas.width !== w || this.canvas.height !== h) {
      this.canvas.width = w;
      this.canvas.height = h;
    }
    this._width = width;
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.ctx.fillStyle = this.theme.background;
    this.ctx.fillRect(0, 0, width, this._height);
    this.ctx.font = this.theme.font;
    this.draw(this.ctx, width, this._height);
    this._lastFrameMs = performance.now() - t;
    this.canvas.dataset.frameMs = this._lastFrameMs.toFixed(2);
  }

  dispose(): void {
    this._disposed = true;
    if (this._frame) {
      cancelAnimationFrame(this._frame);
    }
    this._observer?.disconnect();
    this.node.remove();
  }

  protected abstract draw(
    ctx: CanvasRenderingContext2D,
    width: number,
    height: number
  ): void;

  private _width = 0;
  private _observedWidth = -1;
  private _height: number;
  private _frame = 0;
  private _lastFrameMs = 0;
  private _theme: ITheme | null = null;
  private _observer: ResizeObserver | null = null;
  private _disposed = false;
}

/** Text cut with an ellipsis to fit `max` pixels (canvas text: never parsed as HTML). */
export function fitText(
  ctx: CanvasRenderingContext2D,
  text: string,
  max: number
): string {
  if (max <= 8) {
    return '';
  }
  if (ctx.measureText(text).width <= max) {
    return text;
  }
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + '…').width <= max) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo > 0 ? text.slice(0, lo) + '…' : '';
}

/**
 * Text cut at its start to fit `max` pixels (`…0.1:40123`): for labels whose end tells
 * them apart, such as worker addresses.
 */
export function fitTextEnd(
  ctx: CanvasRenderingContext2D,
  text: string,
  max: number
): string {
  if (max <= 8) {
    return '';
  }
  if (ctx.measureText(text).width <= max) {
    return text;
  }
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText('…' + text.slice(text.length - mid)).width <= max) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo > 0 ? '…' + text.slice(text.length - lo) : '';
}

/** A tooltip: a floating box of text lines (set with textContent). */
export class Tooltip {
  constructor(parent: HTMLElement) {
    this.node.className = 'jp-DaskProfile-tooltip';
    this.node.hidden = true;
    parent.append(this.node);
  }

  readonly node = document.createElement('div');

  show(lines: [string, string][], x: number, y: number): void {
    const rows = lines.map(([label, value]) => {
      const row = document.createElement('div');
      if (label) {
        const b = document.createElement('b');
        b.textContent = `${label}: `;
        row.append(b);
      }
      row.append(document.createTextNode(value));
      return row;
    });
    this.node.replaceChildren(...rows);
    this.node.hidden = false;
    const parent = this.node.parentElement;
    const pw = parent ? parent.clientWidth : 300;
    const w = this.node.offsetWidth;
    this.node.style.left = `${Math.max(0, Math.min(x + 12, pw - w - 4))}px`;
    this.node.style.top = `${y + 14}px`;
  }

  hide(): void {
    this.node.hidden = true;
  }
}
