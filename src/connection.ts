import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import {
  BOOTSTRAP_CODE,
  checkHello,
  COMM_TARGET,
  IHelloMessage,
  PROTOCOL_METADATA_KEY,
  PROTOCOL_VERSION
} from './protocol';

/** Where a connection stands. */
export type ConnectionStatus =
  'connecting' | 'connected' | 'missing' | 'incompatible' | 'error' | 'closed';

/** A message from the kernel side: its JSON data and binary buffers. */
export interface IIncoming {
  data: Record<string, unknown>;
  buffers: DataView[];
}

/**
 * Speaks the daskprofile protocol to one kernel: registers the comm target with silent
 * code (no user code needed), opens the comm, checks the peer's protocol version, and
 * emits typed signals. Views never hold a connection; the model listens to it.
 */
export class Connection {
  constructor(kernel: Kernel.IKernelConnection) {
    this.kernel = kernel;
    // a reloaded or closed page never says goodbye: close the comm so the kernel stops
    // streaming to a panel that is gone
    window.addEventListener('pagehide', this._onPageHide);
  }

  readonly kernel: Kernel.IKernelConnection;

  get status(): ConnectionStatus {
    return this._status;
  }

  /** Human-readable detail for the current status (an error, the peer's versions). */
  get detail(): string {
    return this._detail;
  }

  get hello(): IHelloMessage | null {
    return this._hello;
  }

  get statusChanged(): ISignal<this, ConnectionStatus> {
    return this._statusChanged;
  }

  get message(): ISignal<this, IIncoming> {
    return this._message;
  }

  /** Register the target in the kernel and open the comm. Never throws. */
  async connect(): Promise<void> {
    this._setStatus('connecting', '');
    try {
      const missing = await this._bootstrap();
      if (missing !== null) {
        this._setStatus('missing', missing);
        return;
      }
      this._open();
    } catch (reason) {
      this._setStatus('error', String(reason));
    }
  }

  /** Send a request to the kernel side; ignored unless connected. */
  send(data: Record<string, unknown>): void {
    if (this._comm && !this._comm.isDisposed && this._status === 'connected') {
      this._comm.send(data as KernelMessage.ICommMsgMsg['content']['data']);
    }
  }

  dispose(): void {
    window.removeEventListener('pagehide', this._onPageHide);
    if (this._comm && !this._comm.isDisposed) {
      try {
        this._comm.close();
      } catch {
        // the kernel may already be gone
      }
    }
    this._comm = null;
    this._setStatus('closed', '');
    Signal.clearData(this);
  }

  private _onPageHide = (): void => {
    this.dispose();
  };

  /** Returns null on success, or why daskprofile cannot be imported in the kernel. */
  private async _bootstrap(): Promise<string | null> {
    const future = this.kernel.requestExecute(
      {
        code: BOOTSTRAP_CODE,
        silent: true,
        store_history: false,
        allow_stdin: false,
        stop_on_error: false
      },
      true
    );
    const reply = await future.done;
    const content = reply.content;
    if (content.status === 'ok') {
      return null;
    }
    if (content.status === 'error') {
      return `${content.ename}: ${content.evalue}`;
    }
    return 'the kernel did not run the registration code';
  }

  private _open(): void {
    const comm = this.kernel.createComm(COMM_TARGET);
    this._comm = comm;
    comm.onMsg = msg => this._onMsg(msg);
    comm.onClose = () => {
      if (this._status === 'connected' || this._status === 'connecting') {
        this._setStatus('closed', 'the kernel closed the connection');
      }
    };
    comm.open(
      { type: 'hello', client: 'jupyterlab', protocol: PROTOCOL_VERSION },
      {
        [PROTOCOL_METADATA_KEY]: PROTOCOL_VERSION
      }
    );
  }

  private _onMsg(msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as Record<string, unknown>;
    const buffers = (msg.buffers ?? []).map(b =>
      b instanceof DataView ? b : new DataView(b as ArrayBuffer)
    );
    if (this._status === 'connecting') {
      this._onHello(data);
      return;
    }
    if (this._status !== 'connected') {
      return;
    }
    this._message.emit({ data, buffers });
  }

  private _onHello(data: Record<string, unknown>): void {
    const outcome = checkHello(data);
    if (outcome.status === 'connected') {
      this._hello = outcome.hello;
      this._setStatus('connected', '');
      return;
    }
    if (outcome.status === 'error') {
      console.error(
        'daskprofile: malformed hello from kernel',
        outcome.detail,
        data
      );
    }
    this._setStatus(outcome.status, outcome.detail);
  }

  private _setStatus(status: ConnectionStatus, detail: string): void {
    this._status = status;
    this._detail = detail;
    this._statusChanged.emit(status);
  }

  private _comm: Kernel.IComm | null = null;
  private _status: ConnectionStatus = 'connecting';
  private _detail = '';
  private _hello: IHelloMessage | null = null;
  private _statusChanged = new Signal<this, ConnectionStatus>(this);
  private _message = new Signal<this, IIncoming>(this);
}
