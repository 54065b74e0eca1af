import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { Controller } from '../controller';
import { ChangeKind, ProfileModel } from '../model';
import { INSTALL_HINT } from '../protocol';
import { CanvasView } from './canvas';
import { ExceptionsView } from './exceptions';
import { FindingsView } from './findings';
import { FlameGraphView } from './flameGraph';
import { MemoryView } from './memory';
import { ProgressView } from './progress';
import { CacheView, ResourcesView } from './resources';
import { RunBar } from './runBar';
import { FlameSourceLink } from './flameSource';
import { section } from './section';
import { SourceView } from './sourceView';
import { SpanSelect } from './spanSelect';
import { TaskStreamView } from './taskStream';
import { readTheme } from './theme';
import { TimeViewport } from './viewport';

/** Options of the panel's views (from the settings registry). */
export interface IPanelOptions {
  maxLaneHeight: number;
  flameRowHeight: number;
}

/**
 * The "Dask Profile" panel, in a sidebar or the main area: a header with the followed
 * kernel, the run bar and the run's findings (a click highlights one in the views), then progress, task stream, CPU/memory lines, a cluster's memory
 * and bandwidth, cache lines, a cluster's exceptions, and the flame graph with the source
 * view of the function last clicked (below it; Escape or its × closes it). The model's
 * state is mirrored in data attributes on the panel node (for tests and styling).
 */
export class ProfilePanel extends Widget {
  constructor(controller: Controller) {
    super();
    this.addClass('jp-DaskProfile');
    this._controller = controller;
    const model = controller.model;

    const header = document.createElement('div');
    header.className = 'jp-DaskProfile-header';
    const titleRow = document.createElement('div');
    titleRow.className = 'jp-DaskProfile-titleRow';
    const title = document.createElement('div');
    title.className = 'jp-DaskProfile-title';
    title.textContent = 'Dask Profile';
    this.tools.className = 'jp-DaskProfile-tools';
    titleRow.append(title, this.tools);
    this._kernel.className = 'jp-DaskProfile-kernel';
    this._status.className = 'jp-DaskProfile-status';
    this._notice.className = 'jp-DaskProfile-notice';
    this.runBar = new RunBar(model);
    this.spans = new SpanSelect(model);
    this.findings = new FindingsView(model);
    header.append(
      titleRow,
      this._kernel,
      this._status,
      this._notice,
      this.runBar.node,
      this.findings.node,
      this.spans.node
    );

    this.viewport = new TimeViewport();
    this.progress = new ProgressView(model);
    this.taskStream = new TaskStreamView(model, this.viewport);
    this.resources = new ResourcesView(model, this.viewport);
    this.cache = new CacheView(model, this.viewport);
    this.memory = new MemoryView(model, this.viewport);
    this.exceptions = new ExceptionsView(model);
    this.flame = new FlameGraphView(model, this.viewport);
    this.source = new SourceView({ onClose: () => this._updateData() });

    const streamTools = document.createElement('div');
    streamTools.className = 'jp-DaskProfile-toolbar';
    const reset = document.createElement('button');
    reset.className = 'jp-DaskProfile-button';
    reset.textContent = 'Reset view';
    reset.title = 'Show the whole run (or double-click the task stream)';
    reset.addEventListener('click', () => this.viewport.reset());
    const hint = document.createElement('span');
    hint.className = 'jp-DaskProfile-muted';
    hint.textContent = 'wheel: zoom · drag: pan · shift+drag: select range';
    streamTools.append(reset, hint);

    this.body.className = 'jp-DaskProfile-body';
    this.body.append(
      this._section('progress', 'Progress', this.progress.node),
      this._section(
        'tasks',
        'Task stream',
        streamTools,
        this.taskStream.node,
        this.resources.node,
        this.memory.node,
        this.cache.node,
        this.taskStream.legend
      ),
      this.exceptions.node,
      this._section(
        'flame',
        'Flame graph',
        this.flame.toolbar,
        this.flame.node,
        this.source.node
      )
    );
    this.node.append(header, this.body);

    controller.changed.connect(this._render, this);
    model.changed.connect(this._onModel, this);
    this.viewport.changed.connect(this._updateData, this);
    this.flame.changed.connect(this._updateData, this);
    this._sourceLink = new FlameSourceLink(this.flame, this.source, model, () =>
      this._updateData()
    );
    this._render();
    this._updateData();
  }

  /** Where the views go. */
  readonly body = document.createElement('div');
  /** Buttons at the right of the header's title (e.g. where the panel lives). */
  readonly tools = document.createElement('div');
  readonly viewport: TimeViewport;
  readonly runBar: RunBar;
  /** The run's top findings (hidden when none): a click highlights one. */
  readonly findings: FindingsView;
  /** The span selector (shown when the run has spans): filters every view. */
  readonly spans: SpanSelect;
  readonly progress: ProgressView;
  readonly taskStream: TaskStreamView;
  readonly resources: ResourcesView;
  readonly cache: CacheView;
  /** A cluster's memory and bandwidth (protocol 1.2; hidden without them). */
  readonly memory: MemoryView;
  readonly exceptions: ExceptionsView;
  readonly flame: FlameGraphView;
  /** The source of the function last clicked in the flame graph (hidden until then). */
  readonly source: SourceView;
  private readonly _sourceLink: FlameSourceLink;

  get model(): ProfileModel {
    return this._controller.model;
  }

  /** Apply settings and redraw. */
  configure(options: IPanelOptions): void {
    this.taskStream.options = { maxLaneHeight: options.maxLaneHeight };
    this.flame.rowHeight = options.flameRowHeight;
    this.taskStream.update();
    this.flame.schedule();
  }

  /** Re-read the theme's colours and redraw every canvas. */
  refreshTheme(): void {
    for (const view of this._canvases()) {
      view.refreshTheme();
    }
    this.node.dataset.theme = readTheme(this.node).dark ? 'dark' : 'light';
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._controller.changed.disconnect(this._render, this);
    this._controller.model.changed.disconnect(this._onModel, this);
    this.viewport.changed.disconnect(this._updateData, this);
    for (const view of this._canvases()) {
      view.dispose();
    }
    this.progress.dispose();
    this._sourceLink.dispose();
    this.source.dispose();
    this.exceptions.dispose();
    this.runBar.dispose();
    this.findings.dispose();
    this.spans.dispose();
    super.dispose();
  }

  protected onAfterShow(_msg: Message): void {
    this._onShown();
  }

  /** Attached while visible (e.g. restored into the main area): shown, with no show. */
  protected onAfterAttach(_msg: Message): void {
    if (this.isVisible) {
      this._onShown();
    }
  }

  protected onAfterHide(_msg: Message): void {
    this._controller.active = false;
  }

  protected onResize(_msg: Widget.ResizeMessage): void {
    for (const view of this._canvases()) {
      view.schedule();
    }
  }

  private _onShown(): void {
    this._controller.active = true;
    this.refreshTheme();
    this.taskStream.update();
  }

  private _canvases(): CanvasView[] {
    return [
      this.taskStream,
      this.resources,
      this.memory,
      this.cache,
      this.flame
    ];
  }

  private _section(
    name: string,
    label: string,
    ...content: HTMLElement[]
  ): HTMLElement {
    const details = section(name, label, true, ...content);
    details.addEventListener('toggle', () => {
      for (const view of this._canvases()) {
        view.schedule();
      }
    });
    return details;
  }

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (changes.has('current')) {
      this.source.close();
    } else if (changes.has('sources')) {
      this._sourceLink.refresh();
    }
    this._updateData();
  }

  /** Mirror the model's state in data attributes (tests wait on them). */
  private _updateData(): void {
    const model = this._controller.model;
    const run = model.current;
    const data: { [key: string]: string } = {};
    data.runs = String(model.runs.length);
    data.run = run ? String(run.id) : '';
    data.runState = run ? (run.finished ? 'finished' : 'live') : '';
    data.tasks = String(run?.taskCount ?? 0);
    data.resources = String(run?.resourceCount ?? 0);
    data.samples = String(run?.stackSamples ?? 0);
    data.groups = String(run?.groupsByName.size ?? 0);
    data.workers = String(run?.workers.size ?? 0);
    data.flameNodes = String(this.flame.nodeCount);
    data.flameSamples = String(this.flame.samples);
    data.source = this.source.identifier ?? '';
    const sel = this.viewport.selection;
    data.selection = sel ? `${sel[0]},${sel[1]}` : '';
    data.paused = String(model.paused);
    data.spans = String(run?.spanNames.size ?? 0);
    data.span = model.spanFilter ?? '';
    data.findings = String(run?.findings.length ?? 0);
    data.highlight = model.highlight?.kind ?? '';
    data.rejected = String(model.rejected);
    const dataset = this.node.dataset;
    for (const [key, value] of Object.entries(data)) {
      // only what changed: an attribute write invalidates style
      if (dataset[key] !== value) {
        dataset[key] = value;
      }
    }
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
    const notice = this._controller.notice;
    this._notice.textContent = notice;
    this._notice.hidden = notice === '';
    this.node.dataset.notice = notice ? 'restarted' : '';
    this.runBar.render();
    this._updateData();
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
  private _notice = document.createElement('div');
}
