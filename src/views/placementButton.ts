/**
 * The panel header's button that moves the panel between its sidebar and the main area
 * (as the "Open in Main Area" / "Open in Sidebar" commands do). Its icon shows where the
 * panel would go: docked right of the notebook, or back to the side.
 */

import { dockLeftIcon, dockRightIcon } from '@jupyterlab/ui-components';

import type { PanelPlacement } from '../placement';

export class PlacementButton {
  /** `move` is called with where the user asked the panel to go. */
  constructor(move: (to: PanelPlacement) => void) {
    this.node.className = 'jp-DaskProfile-iconButton jp-DaskProfile-placement';
    this.node.type = 'button';
    this.node.addEventListener('click', () =>
      move(this._current === 'main' ? 'sidebar' : 'main')
    );
    this.render('sidebar');
  }

  readonly node = document.createElement('button');

  /** Show the action for a panel that is now in `current`. */
  render(current: PanelPlacement): void {
    this._current = current;
    const toMain = current !== 'main';
    const label = toMain
      ? 'Open in the main area, beside the notebook'
      : 'Open in the sidebar';
    this.node.title = label;
    this.node.setAttribute('aria-label', label);
    this.node.dataset.placement = current;
    const icon = toMain ? dockRightIcon : dockLeftIcon;
    this.node.replaceChildren(icon.element({ tag: 'span' }));
  }

  private _current: PanelPlacement = 'sidebar';
}
