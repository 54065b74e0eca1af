/**
 * Where the panel lives: in a sidebar (the left one, or the right one if the user switched
 * its side), or in the main area split to the right of the notebook it follows, as
 * dask-labextension's panes. Moving reparents the one panel, so its connection, runs and
 * view state go with it. The `placement` setting says where the panel goes; the layout
 * restorer keeps its exact spot in the main area across reloads.
 */

import { ILabShell, JupyterFrontEnd } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';
import { Message, MessageLoop } from '@lumino/messaging';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

/** The values of the `placement` setting. */
export type PanelPlacement = 'sidebar' | 'main';

type Side = 'left' | 'right';

export interface IPlacementOptions {
  shell: JupyterFrontEnd.IShell;
  /** JupyterLab's shell, for the sidebar side the user chose (null in other apps). */
  labShell: ILabShell | null;
  notebooks: INotebookTracker;
  panel: Widget;
  /** The panel's icon and its tab label in the main area. */
  icon: LabIcon;
  label: string;
  /** Rank of the panel among the sidebar's panels. */
  rank: number;
}

export class Placement {
  constructor(options: IPlacementOptions) {
    this._options = options;
    options.notebooks.currentChanged.connect(this._onNotebook, this);
    MessageLoop.installMessageHook(options.panel, this._hook);
  }

  /** Where the panel is now. */
  get current(): PanelPlacement {
    return this._area() === 'main' ? 'main' : 'sidebar';
  }

  /** Emitted after the panel moved. */
  get changed(): ISignal<this, PanelPlacement> {
    return this._changed;
  }

  /** Emitted when the user closes the panel's tab in the main area. */
  get closeRequested(): ISignal<this, void> {
    return this._closeRequested;
  }

  /**
   * Where the panel should be (the setting): moved there without taking the focus. The
   * main area waits for a notebook to sit beside: with none open the panel stays in its
   * sidebar until one is.
   */
  want(placement: PanelPlacement): void {
    this._wanted = placement;
    if (placement !== this.current) {
      this._place(placement, false, false);
    }
  }

  /** Move the panel there now and show it (the commands). */
  moveTo(placement: PanelPlacement): void {
    this._wanted = placement;
    this._place(placement, true, true);
  }

  dispose(): void {
    this._options.notebooks.currentChanged.disconnect(this._onNotebook, this);
    MessageLoop.removeMessageHook(this._options.panel, this._hook);
    Signal.clearData(this);
  }

  private _place(
    placement: PanelPlacement,
    activate: boolean,
    anyway: boolean
  ): void {
    const { panel, shell } = this._options;
    if (placement === 'main') {
      const ref = this._options.notebooks.currentWidget?.id ?? null;
      if (ref === null && !anyway) {
        return;
      }
      this._toMain(ref, activate);
    } else {
      this._toSidebar();
    }
    if (activate) {
      shell.activateById(panel.id);
    }
    this._changed.emit(this.current);
  }

  private _toMain(ref: string | null, activate: boolean): void {
    const { panel, shell, labShell, label } = this._options;
    const area = this._area();
    if (area === 'left' || area === 'right') {
      this._side = area;
    }
    // a side the user chose for the panel ("Switch Sidebar Side") outranks the area asked
    // of `add`: move the panel's entry to the main area first, and back on return
    const chosen = this._userArea();
    if (labShell && (chosen === 'left' || chosen === 'right')) {
      this._chosen = chosen;
      labShell.move(panel, 'main');
    }
    panel.title.label = label;
    panel.title.closable = true;
    shell.add(panel, 'main', { mode: 'split-right', ref, activate });
  }

  private _toSidebar(): void {
    const { panel, shell, labShell, icon, rank } = this._options;
    panel.title.label = '';
    panel.title.closable = false;
    panel.title.icon = icon; // the main area binds its own tab style to the icon
    if (labShell && (this._chosen || this._userArea() === 'main')) {
      // (an entry saved while the panel was in the main area, e.g. by the side switcher)
      labShell.move(panel, this._chosen ?? this._side);
      this._chosen = null;
    } else {
      shell.add(panel, this._side, { rank });
    }
  }

  /** The area of the user's layout entry for the panel ("Switch Sidebar Side"), if any. */
  private _userArea(): string | undefined {
    const { panel, labShell } = this._options;
    return labShell?.userLayout[labShell.mode][panel.id]?.area;
  }

  /** The shell area holding the panel, if any. */
  private _area(): string | null {
    const { panel, shell } = this._options;
    for (const area of ['main', 'left', 'right']) {
      for (const widget of shell.widgets(area)) {
        if (widget === panel) {
          return area;
        }
      }
    }
    return null;
  }

  /** The first notebook opened (or switched to) while the panel waits for one. */
  private _onNotebook(): void {
    if (this._wanted === 'main' && this.current !== 'main') {
      this._place('main', false, false);
    }
  }

  /** Closing the panel's main-area tab sends it back to its sidebar (not away). */
  private _hook = (_: unknown, msg: Message): boolean => {
    if (msg.type === 'close-request' && this.current === 'main') {
      this._closeRequested.emit();
      return false;
    }
    return true;
  };

  private _options: IPlacementOptions;
  private _wanted: PanelPlacement | null = null;
  private _side: Side = 'left';
  private _chosen: Side | null = null;
  private _changed = new Signal<this, PanelPlacement>(this);
  private _closeRequested = new Signal<this, void>(this);
}
