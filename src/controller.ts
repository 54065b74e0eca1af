import { ISignal, Signal } from '@lumino/signaling';

import { Connection, ConnectionStatus, IIncoming } from './connection';
import { ProfileModel } from './model';
import { ITarget, KernelTracker } from './tracker';

/**
 * Ties the kernel tracker to connections and the model: one connection to the active
 * notebook's kernel at a time, made only while the panel is shown (and dropped on kernel
 * change). Messages from the connection feed the model; the model's requests go to the
 * connection. Views read the model and never hold a connection.
 */
export class Controller {
  constructor(
    tracker: KernelTracker,
    model: ProfileModel = new ProfileModel()
  ) {
    this._tracker = tracker;
    this._target = tracker.target;
    this.model = model;
    tracker.changed.connect(this._onTarget, this);
  }

  /** The runs received from the followed kernel. */
  readonly model: ProfileModel;

  get target(): ITarget {
    return this._target;
  }

  get connection(): Connection | null {
    return this._connection;
  }

  /** A notice for the user (e.g. the kernel restarted), or ''. */
  get notice(): string {
    return this._notice;
  }

  /** Emitted when the target or its connection (or the connection's status) changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Whether to connect as soon as the panel is shown (the `autoConnect` setting). */
  autoConnect = true;

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
    this._sync(true);
  }

  dispose(): void {
    this._tracker.changed.disconnect(this._onTarget, this);
    this._drop();
    this.model.dispose();
    Signal.clearData(this);
  }

  private _onTarget(_: KernelTracker, target: ITarget): void {
    this._notice = '';
    this._target = target;
    this._drop();
    this.model.reset();
    this._sync();
  }

  private _sync(force = false): void {
    const kernel = this._target.kernel;
    if (
      this._active &&
      (this.autoConnect || force) &&
      kernel &&
      !this._connection
    ) {
      const connection = new Connection(kernel);
      connection.statusChanged.connect(this._onStatus, this);
      connection.message.connect(this._onMessage, this);
      this._connection = connection;
      void connection.connect();
    }
    this._changed.emit();
  }

  private _onStatus(connection: Connection, status: ConnectionStatus): void {
    if (status === 'connected') {
      // a kernel id answering from another process: the kernel restarted
      const pid = connection.hello?.pid ?? -1;
      const before = this._pids.get(connection.kernel.id);
      if (before !== undefined && before !== pid) {
        this._notice =
          'The kernel restarted: its earlier runs are gone. Waiting for the next run.';
      }
      this._pids.set(connection.kernel.id, pid);
      // the kernel replays its kept runs after the hello: start from a clean model
      this.model.reset(connection.hello);
      this.model.sender = data => connection.send(data);
    } else {
      this.model.sender = null;
    }
    this._changed.emit();
  }

  private _onMessage(_: Connection, msg: IIncoming): void {
    if (msg.data.type === 'run_start' && this._notice) {
      this._notice = '';
      this._changed.emit();
    }
    this.model.handle(msg.data, msg.buffers);
  }

  private _drop(): void {
    if (this._connection) {
      this._connection.statusChanged.disconnect(this._onStatus, this);
      this._connection.message.disconnect(this._onMessage, this);
      this._connection.dispose();
      this._connection = null;
    }
    this.model.sender = null;
  }

  private _tracker: KernelTracker;
  private _target: ITarget;
  private _connection: Connection | null = null;
  private _active = false;
  private _notice = '';
  private _pids = new Map<string, number>();
  private _changed = new Signal<this, void>(this);
}
