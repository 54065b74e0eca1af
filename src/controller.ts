import { ISignal, Signal } from '@lumino/signaling';

import { Connection } from './connection';
import { ITarget, KernelTracker } from './tracker';

/**
 * Ties the kernel tracker to connections: one connection to the active notebook's
 * kernel at a time, made only while the panel is shown (and dropped on kernel change).
 */
export class Controller {
  constructor(tracker: KernelTracker) {
    this._tracker = tracker;
    this._target = tracker.target;
    tracker.changed.connect(this._onTarget, this);
  }

  get target(): ITarget {
    return this._target;
  }

  get connection(): Connection | null {
    return this._connection;
  }

  /** Emitted when the target or its connection (or the connection's status) changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Whether to keep a connection open (the panel is visible and auto-connect is on). */
  set active(value: boolean) {
    if (value === this._active) {
      return;
    }
    this._active = value;
    this._sync();
  }

  /** Drop the connection and make a new one (e.g. after installing daskprofile). */
  reconnect(): void {
    this._drop();
    this._sync();
  }

  dispose(): void {
    this._tracker.changed.disconnect(this._onTarget, this);
    this._drop();
    Signal.clearData(this);
  }

  private _onTarget(_: KernelTracker, target: ITarget): void {
    this._target = target;
    this._drop();
    this._sync();
  }

  private _sync(): void {
    const kernel = this._target.kernel;
    if (this._active && kernel && !this._connection) {
      const connection = new Connection(kernel);
      connection.statusChanged.connect(() => this._changed.emit(), this);
      this._connection = connection;
      void connection.connect();
    }
    this._changed.emit();
  }

  private _drop(): void {
    if (this._connection) {
      this._connection.dispose();
      this._connection = null;
    }
  }

  private _tracker: KernelTracker;
  private _target: ITarget;
  private _connection: Connection | null = null;
  private _active = false;
  private _changed = new Signal<this, void>(this);
}
