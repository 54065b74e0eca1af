import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { Controller } from './controller';
import { daskProfileIcon } from './icons';
import { KernelTracker } from './tracker';
import { ProfilePanel } from './views/panel';

const PLUGIN_ID = 'daskprofile:plugin';

/** Command ids. */
export const CommandIDs = {
  open: 'daskprofile:open',
  reconnect: 'daskprofile:reconnect'
} as const;

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'A sidebar panel that shows where Dask computations spend their time.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILayoutRestorer, ICommandPalette, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    settings: ISettingRegistry | null
  ) => {
    const controller = new Controller(new KernelTracker(notebooks));
    const panel = new ProfilePanel(controller);
    panel.id = 'daskprofile-panel';
    panel.title.icon = daskProfileIcon;
    panel.title.caption = 'Dask Profile';
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'daskprofile');

    app.commands.addCommand(CommandIDs.open, {
      label: 'Open Dask Profile',
      icon: daskProfileIcon,
      execute: () => app.shell.activateById(panel.id)
    });
    app.commands.addCommand(CommandIDs.reconnect, {
      label: 'Dask Profile: Reconnect to Kernel',
      execute: () => controller.reconnect()
    });
    for (const command of [CommandIDs.open, CommandIDs.reconnect]) {
      palette?.addItem({ command, category: 'Dask Profile' });
    }
    if (settings) {
      void settings.load(PLUGIN_ID).catch(reason => {
        console.warn('daskprofile: could not load settings', reason);
      });
    }
  }
};

export default plugin;
