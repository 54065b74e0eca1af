import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { Controller } from '../controller';
import { INSTALL_HINT } from '../protocol';

/** The left-sidebar "Dask Profile" panel: header with the followed kernel, then views. */
export class ProfilePanel extends Widget {
  constructor(controller: Controller) {
    super();
    this.addClass('jp-DaskProfile');
    this._controller = controller;

    const header = document.createElement('div');
    header.className = 'jp-DaskProfile-header';
    const title = document.createElement('div');
    title.className = 'jp-DaskProfile-title';
    title.textContent = 'Dask Profile';
    this._kernel.className = 'jp-DaskProfile-kernel';
    this._status.className = 'jp-DaskProfile-status';
    header.append(title, this._kernel, this._status);

    this.body.className = 'jp-DaskProfile-body';
    this.node.append(header, this.body);

    controller.changed.connect(this._render, this);
    this._render();
  }

  /** Where the views go. */
  readonly body = document.createElement('div');

  dispose(): void {
    this._controller.changed.disconnect(this._render, this);
    super.dispose();
  }

  protected onAfterShow(_msg: Message): void {
    this._controller.active = true;
  }

  protected onAfterHide(_msg: Message): void {
    this._controller.active = false;
  }

  private _render(): void {
    const { target, connection } = this._controller;
    const kernelText = target.kernelName
      ? `Kernel: ${target.kernelName}`
      : target.path
        ? 'No kernel'
        : 'No notebook open';
    this._kernel.textContent = kernelText;
    this._kernel.title = target.path ?? '';
    this.node.dataset.kernel = target.kernelName ?? '';
    this.node.dataset.path = target.path ?? '';

    const status = target.kernel ? (connection?.status ?? 'idle') : 'no-kernel';
    this._status.dataset.status = status;
    this.node.dataset.status = status;
    this._status.replaceChildren(
      ...this._statusContent(status, connection?.detail ?? '')
    );
  }

  private _statusContent(status: string, detail: string): Node[] {
    const text = (s: string) => document.createTextNode(s);
    switch (status) {
      case 'no-kernel':
        return [text('Open a notebook with a Python kernel to profile Dask.')];
      case 'idle':
        return [text('Not connected.')];
      case 'connecting':
        return [text('Connecting to the kernel…')];
      case 'connected': {
        const hello = this._controller.connection?.hello;
        const dask = hello?.versions.dask ?? '?';
        return [
          text(
            `Connected: daskprofile ${hello?.versions.daskprofile ?? '?'}, dask ${dask}`
          )
        ];
      }
      case 'missing': {
        const code = document.createElement('code');
        code.textContent = INSTALL_HINT;
        return [
          text('daskprofile is not installed in this kernel. Run '),
          code,
          text(' in a cell, then restart the kernel.')
        ];
      }
      default:
        return [text(detail ? `${status}: ${detail}` : status)];
    }
  }

  private _controller: Controller;
  private _kernel = document.createElement('div');
  private _status = document.createElement('div');
}
