import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, IThemeManager } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';
import { dockLeftIcon, dockRightIcon } from '@jupyterlab/ui-components';

import { Controller } from './controller';
import { daskProfileIcon } from './icons';
import { ProfileModel } from './model';
import { PanelPlacement, Placement } from './placement';
import { ExportFormat } from './protocol';
import { SidebarWidth } from './sidebarWidth';
import { KernelTracker } from './tracker';
import { ProfilePanel } from './views/panel';
import { PlacementButton } from './views/placementButton';

const PLUGIN_ID = 'daskprofile:plugin';
/** Rank of the panel among the left sidebar's panels. */
const RANK = 650;

/** Command ids. */
export const CommandIDs = {
  open: 'daskprofile:open',
  reconnect: 'daskprofile:reconnect',
  togglePause: 'daskprofile:toggle-pause',
  resetView: 'daskprofile:reset-view',
  clearSelection: 'daskprofile:clear-selection',
  exportHtml: 'daskprofile:export-html',
  exportTrace: 'daskprofile:export-trace',
  exportRun: 'daskprofile:export-run',
  openInMain: 'daskprofile:open-in-main',
  openInSidebar: 'daskprofile:open-in-sidebar'
} as const;

/** Moves the panel where the user asked (showing it or not) and remembers it. */
type Mover = (to: PanelPlacement, show?: boolean) => void;

/**
 * Test-only hook: when localStorage['daskprofile:test-hook'] is '1' (set by the browser
 * tests before the page loads), `window.daskprofileTestHook` exposes the model and a way
 * to feed it messages, so the benchmark can load 1,000,000 synthetic tasks and the tests
 * can inject malformed messages through the same decoder a kernel's messages go through.
 * Users never set that key; without it nothing is exposed.
 */
function installTestHook(panel: ProfilePanel, model: ProfileModel): void {
  let enabled = false;
  try {
    enabled = window.localStorage.getItem('daskprofile:test-hook') === '1';
  } catch {
    enabled = false;
  }
  if (enabled) {
    (window as unknown as Record<string, unknown>).daskprofileTestHook = {
      model,
      panel,
      receive: (data: unknown, buffers: ArrayBuffer[] = []) =>
        model.handle(
          data,
          buffers.map(b => new DataView(b))
        )
    };
  }
}

function addCommands(
  app: JupyterFrontEnd,
  panel: ProfilePanel,
  controller: Controller,
  palette: ICommandPalette | null
): void {
  const model = controller.model;
  const exporter = (format: ExportFormat) => () => {
    if (model.current) {
      panel.runBar.export(format);
    }
  };
  const canExport = () => model.connected && model.current !== null;
  app.commands.addCommand(CommandIDs.open, {
    label: 'Open Dask Profile',
    icon: daskProfileIcon,
    execute: () => app.shell.activateById(panel.id)
  });
  app.commands.addCommand(CommandIDs.reconnect, {
    label: 'Dask Profile: Reconnect to Kernel',
    execute: () => controller.reconnect()
  });
  app.commands.addCommand(CommandIDs.togglePause, {
    label: () =>
      model.paused
        ? 'Dask Profile: Resume Live Updates'
        : 'Dask Profile: Pause Live Updates',
    isEnabled: () => model.connected,
    execute: () => model.setPaused(!model.paused)
  });
  app.commands.addCommand(CommandIDs.resetView, {
    label: 'Dask Profile: Reset Task Stream View',
    execute: () => panel.viewport.reset()
  });
  app.commands.addCommand(CommandIDs.clearSelection, {
    label: 'Dask Profile: Clear Selected Time Range',
    execute: () => panel.viewport.select(null)
  });
  app.commands.addCommand(CommandIDs.exportHtml, {
    label: 'Dask Profile: Export Run as HTML Snapshot',
    isEnabled: canExport,
    execute: exporter('html')
  });
  app.commands.addCommand(CommandIDs.exportTrace, {
    label: 'Dask Profile: Export Run as Chrome Trace',
    isEnabled: canExport,
    execute: exporter('trace')
  });
  app.commands.addCommand(CommandIDs.exportRun, {
    label: 'Dask Profile: Export Run File',
    isEnabled: canExport,
    execute: exporter('run')
  });
  for (const command of Object.values(CommandIDs)) {
    palette?.addItem({ command, category: 'Dask Profile' });
  }
}

function addPlacementCommands(
  app: JupyterFrontEnd,
  placement: Placement,
  move: Mover
): void {
  app.commands.addCommand(CommandIDs.openInMain, {
    label: 'Dask Profile: Open in Main Area',
    caption: 'Show the panel in the main area, to the right of the notebook',
    icon: dockRightIcon,
    isVisible: () => placement.current !== 'main',
    execute: () => move('main')
  });
  app.commands.addCommand(CommandIDs.openInSidebar, {
    label: 'Dask Profile: Open in Sidebar',
    caption: 'Show the panel in its sidebar',
    icon: dockLeftIcon,
    isVisible: () => placement.current === 'main',
    execute: () => move('sidebar')
  });
  placement.changed.connect(() => {
    app.commands.notifyCommandChanged(CommandIDs.openInMain);
    app.commands.notifyCommandChanged(CommandIDs.openInSidebar);
  });
}

/**
 * Where the panel goes: the `placement` setting, once the layout is restored (the
 * restorer puts the panel back where it was; the setting has the last word) and whenever
 * the setting changes. The commands move the panel and write the setting.
 */
function setupPlacement(
  app: JupyterFrontEnd,
  panel: ProfilePanel,
  placement: Placement,
  settings: Promise<ISettingRegistry.ISettings | null>
): Mover {
  const move: Mover = (to, show = true) => {
    if (show) {
      placement.moveTo(to);
    } else {
      placement.want(to);
    }
    void settings
      .then(s => s?.set('placement', to))
      .catch(reason => {
        console.warn('daskprofile: could not save the placement', reason);
      });
  };
  const button = new PlacementButton(to => move(to));
  panel.tools.append(button.node);
  placement.changed.connect((_, where) => button.render(where));
  placement.closeRequested.connect(() => move('sidebar', false));
  void Promise.all([settings, app.restored]).then(([s]) => {
    const follow = () =>
      placement.want(
        s?.get('placement').composite === 'main' ? 'main' : 'sidebar'
      );
    follow();
    button.render(placement.current);
    s?.changed.connect(follow);
  });
  return move;
}

function applySettings(
  settings: ISettingRegistry.ISettings,
  panel: ProfilePanel,
  controller: Controller
): void {
  const get = <T>(key: string, fallback: T): T => {
    const v = settings.get(key).composite;
    return v === undefined || v === null ? fallback : (v as T);
  };
  controller.autoConnect = get('autoConnect', true);
  controller.model.maxRuns = get('maxRuns', 20);
  panel.configure({
    maxLaneHeight: get('maxLaneHeight', 18),
    flameRowHeight: get('flameRowHeight', 16)
  });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'A panel (in a sidebar or beside the notebook) that shows where Dask computations spend their time.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [
    ILayoutRestorer,
    ICommandPalette,
    ISettingRegistry,
    IThemeManager,
    ILabShell,
    IStateDB
  ],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    settings: ISettingRegistry | null,
    themes: IThemeManager | null,
    labShell: ILabShell | null,
    state: IStateDB | null
  ) => {
    const controller = new Controller(new KernelTracker(notebooks));
    const panel = new ProfilePanel(controller);
    panel.id = 'daskprofile-panel';
    panel.title.icon = daskProfileIcon;
    panel.title.caption = 'Dask Profile';
    app.shell.add(panel, 'left', { rank: RANK });
    restorer?.add(panel, 'daskprofile');
    new SidebarWidth(panel, state);

    const loaded = settings
      ? settings.load(PLUGIN_ID).catch(reason => {
          console.warn('daskprofile: could not load settings', reason);
          return null;
        })
      : Promise.resolve(null);
    const placement = new Placement({
      shell: app.shell,
      labShell,
      notebooks,
      panel,
      icon: daskProfileIcon,
      label: 'Dask Profile',
      rank: RANK
    });
    const move = setupPlacement(app, panel, placement, loaded);
    addPlacementCommands(app, placement, move);
    addCommands(app, panel, controller, palette);
    installTestHook(panel, controller.model);

    // the theme's CSS is in place once themeChanged fires; read colours on the next frame
    themes?.themeChanged.connect(() => {
      requestAnimationFrame(() => panel.refreshTheme());
    });

    void loaded.then(s => {
      if (s) {
        applySettings(s, panel, controller);
        s.changed.connect(() => applySettings(s, panel, controller));
      }
    });
  }
};

export default plugin;
