/** The time window the task stream and the resource lines share, and the selected range. */

import { ISignal, Signal } from '@lumino/signaling';

export class TimeViewport {
  /** Emitted when the window or the selection changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get start(): number {
    return this._start;
  }

  get end(): number {
    return this._end;
  }

  /** Whether the window follows the run's extent (until the user zooms or pans). */
  get auto(): boolean {
    return this._auto;
  }

  /** The selected time range (restricts the flame graph), or null. */
  get selection(): [number, number] | null {
    return this._selection;
  }

  /** The run's time extent; the window follows it while `auto`. */
  setExtent(lo: number, hi: number): void {
    this._lo = lo;
    this._hi = hi > lo ? hi : lo + 1;
    if (this._auto) {
      this._set(this._lo, this._hi);
    }
  }

  /** Zoom by `factor` (< 1 zooms in) around time `center`. */
  zoom(center: number, factor: number): void {
    const span = this._end - this._start;
    const next = Math.min(
      Math.max(span * factor, 1e-7),
      (this._hi - this._lo) * 4
    );
    const f = span > 0 ? (center - this._start) / span : 0.5;
    this._auto = false;
    this._set(center - f * next, center - f * next + next);
  }

  /** Move the window by `dt` seconds. */
  pan(dt: number): void {
    this._auto = false;
    this._set(this._start + dt, this._end + dt);
  }

  /** Back to the whole run, following it as it grows. */
  reset(): void {
    this._auto = true;
    this._set(this._lo, this._hi);
  }

  select(range: [number, number] | null): void {
    if (range && !(range[1] > range[0])) {
      range = null;
    }
    this._selection = range;
    this._changed.emit();
  }

  private _set(start: number, end: number): void {
    if (start === this._start && end === this._end) {
      return;
    }
    this._start = start;
    this._end = end;
    this._changed.emit();
  }

  private _lo = 0;
  private _hi = 1;
  private _start = 0;
  private _end = 1;
  private _auto = true;
  private _selection: [number, number] | null = null;
  private _changed = new Signal<this, void>(this);
}
