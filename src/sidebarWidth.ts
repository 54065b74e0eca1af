/**
 * Opens the panel at a readable width when it shows in a sidebar (`widths.ts`): the
 * handle between the sidebar and the main area moves as if dragged (public Lumino API:
 * `SplitLayout.moveHandle`, which leaves a collapsed sidebar's width alone; JupyterLab
 * saves the new sizes with the layout). A width the user chose is kept: once they drag
 * the sidebar narrower while the panel shows, the panel leaves it alone, also after a
 * reload (remembered in the workspace's state).
 */

import { IStateDB } from '@jupyterlab/statedb';
import { Message, MessageLoop } from '@lumino/messaging';
import { SplitLayout, SplitPanel, Widget } from '@lumino/widgets';

import { keepsUserWidth, readableWidth, widening } from './widths';

const STATE_KEY = 'daskprofile:sidebar-width';

/** The shell's horizontal split holding a widget: the child it is in, the main area's. */
interface ISlot {
  split: SplitPanel;
  index: number;
  donor: number;
}

/**
 * The nearest split panel above `widget`, if it is horizontal and `widget` is in a child
 * next to its stretching child (the main area): a sidebar.
 */
function slotOf(widget: Widget): ISlot | null {
  let child = widget;
  let parent = widget.parent;
  while (parent && !(parent instanceof SplitPanel)) {
    child = parent;
    parent = parent.parent;
  }
  if (!parent || parent.orientation !== 'horizontal') {
    return null;
  }
  const stretch = parent.widgets.map(w => SplitPanel.getStretch(w));
  const donor = stretch.indexOf(Math.max(...stretch));
  const index = parent.widgets.indexOf(child);
  // (a sidebar next to the main area, as in JupyterLab's shell)
  return Math.abs(index - donor) === 1 ? { split: parent, index, donor } : null;
}

export class SidebarWidth {
  constructor(panel: Widget, state: IStateDB | null = null) {
    this._panel = panel;
    this._state = state;
    this._loaded = this._load();
    MessageLoop.installMessageHook(panel, this._hook);
  }

  /** Widen the sidebar holding the panel to a readable width, unless the user chose. */
  async fit(): Promise<void> {
    await this._loaded;
    const slot = this._slot();
    if (!slot || this._keep || !this._panel.isVisible) {
      return;
    }
    const { split, index, donor } = slot;
    const grow = widening(
      split.widgets[index].node.offsetWidth,
      split.widgets[donor].node.offsetWidth,
      readableWidth(window.innerWidth)
    );
    if (grow > 0 && split.layout instanceof SplitLayout) {
      // the handle between the sidebar and the main area, towards the main area
      const handle = index < donor ? index : index - 1;
      const offset = split.handles[handle].offsetLeft;
      split.layout.moveHandle(handle, offset + (index < donor ? grow : -grow));
    }
  }

  dispose(): void {
    MessageLoop.removeMessageHook(this._panel, this._hook);
    this._split?.handleMoved.disconnect(this._onHandleMoved, this);
    this._split = null;
  }

  /** The panel's slot in a sidebar; follows the split's handle (the user's drags). */
  private _slot(): ISlot | null {
    const slot = slotOf(this._panel);
    if (slot && slot.split !== this._split) {
      this._split?.handleMoved.disconnect(this._onHandleMoved, this);
      this._split = slot.split;
      this._split.handleMoved.connect(this._onHandleMoved, this);
    }
    return slot;
  }

  private _onHandleMoved(): void {
    const slot = slotOf(this._panel);
    if (!slot || !this._panel.isVisible) {
      return; // another sidebar panel's width, or the main area's
    }
    const width = slot.split.widgets[slot.index].node.offsetWidth;
    const keep = keepsUserWidth(width, window.innerWidth);
    if (keep !== this._keep) {
      this._keep = keep;
      void this._state?.save(STATE_KEY, { keep });
    }
  }

  private async _load(): Promise<void> {
    try {
      const saved = (await this._state?.fetch(STATE_KEY)) as
        { keep?: boolean } | undefined;
      this._keep = saved?.keep === true;
    } catch {
      this._keep = false;
    }
  }

  /** Fit once the sidebar is laid out, each time the panel is shown. */
  private _hook = (_: unknown, msg: Message): boolean => {
    if (msg.type === 'after-show' || msg.type === 'after-attach') {
      requestAnimationFrame(() => void this.fit());
    }
    return true;
  };

  private _panel: Widget;
  private _state: IStateDB | null;
  private _loaded: Promise<void>;
  private _keep = false;
  private _split: SplitPanel | null = null;
}
