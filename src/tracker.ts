import { ISessionContext } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

/** What the panel follows: the active notebook and its kernel, if any. */
export interface ITarget {
  /** The notebook's path, or null when no notebook is open. */
  path: string | null;
  /** The kernel connection, or null when the notebook has no kernel. */
  kernel: Kernel.IKernelConnection | null;
  /** Display name of the kernel (e.g. "Python 3 (ipykernel)"), or null. */
  kernelName: string | null;
}

/**
 * Follows the active notebook's kernel, as jupyter-resource-usage does: emits `changed`
 * when the current notebook changes, or when its kernel is started, restarted or replaced.
 */
export class KernelTracker {
  constructor(notebooks: INotebookTracker) {
    this._notebooks = notebooks;
    notebooks.currentChanged.connect(this._onCurrentChanged, this);
    this._onCurrentChanged();
  }

  /** Emitted with the new target whenever it changes. */
  get changed(): ISignal<this, ITarget> {
    return this._changed;
  }

  /** The current target. */
  get target(): ITarget {
    const panel = this._notebooks.currentWidget;
    const session = panel?.sessionContext;
    const kernel = session?.session?.kernel ?? null;
    return {
      path: panel ? panel.context.path : null,
      kernel,
      kernelName: kernel ? (session?.kernelDisplayName ?? kernel.name) : null
    };
  }

  dispose(): void {
    this._notebooks.currentChanged.disconnect(this._onCurrentChanged, this);
    this._watch(null);
    Signal.clearData(this);
  }

  private _onCurrentChanged(): void {
    this._watch(this._notebooks.currentWidget);
    this._changed.emit(this.target);
  }

  private _watch(panel: NotebookPanel | null): void {
    if (this._session) {
      this._session.kernelChanged.disconnect(this._onKernelChanged, this);
      this._session.statusChanged.disconnect(this._onStatusChanged, this);
    }
    this._session = panel?.sessionContext ?? null;
    if (this._session) {
      this._session.kernelChanged.connect(this._onKernelChanged, this);
      this._session.statusChanged.connect(this._onStatusChanged, this);
    }
  }

  private _onKernelChanged(): void {
    this._changed.emit(this.target);
  }

  private _onStatusChanged(_: ISessionContext, status: Kernel.Status): void {
    // A restart keeps the kernel connection object but loses the comm target.
    if (status === 'restarting' || status === 'autorestarting') {
      this._restarting = true;
    } else if (this._restarting && status === 'idle') {
      this._restarting = false;
      this._changed.emit(this.target);
    }
  }

  private _notebooks: INotebookTracker;
  private _session: ISessionContext | null = null;
  private _restarting = false;
  private _changed = new Signal<this, ITarget>(this);
}
