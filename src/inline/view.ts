/**
 * The inline view of one finished run: the panel's own views (run summary, findings,
 * progress, task stream, CPU/memory, a cluster's memory and bandwidth, cache, exceptions,
 * flame graph) over a model fed with the run's replayed protocol messages, without
 * JupyterLab or a kernel connection. Used by the standalone bundle (index.ts) that the
 * kernel side inlines in a notebook output; the same drawing code as the panel, so the two
 * read alike. The findings open the body; a click on one highlights it, as in the panel.
 *
 * Things the panel asks the kernel for (task keys, exports, pause) are not available: the
 * payload carries what the kernel side chose to include (e.g. the keys of small runs),
 * and the run bar's kernel controls are hidden by the inline stylesheet.
 */

import { formatCount } from '../format';
import { ProfileModel, RunData } from '../model';
import { CanvasView } from '../views/canvas';
import { ExceptionsView } from '../views/exceptions';
import { FindingsView } from '../views/findings';
import { FlameGraphView } from '../views/flameGraph';
import { MemoryView } from '../views/memory';
import { ProgressView } from '../views/progress';
import { CacheView, ResourcesView } from '../views/resources';
import { RunBar } from '../views/runBar';
import { section } from '../views/section';
import { FlameSourceLink } from '../views/flameSource';
import { SourceView } from '../views/sourceView';
import { SpanSelect } from '../views/spanSelect';
import { TaskStreamView } from '../views/taskStream';
import { TimeViewport } from '../views/viewport';
import { base64View, IInlinePayload } from './payload';

/** Class of the view's root (the inline stylesheet scopes its additions to it). */
export const ROOT_CLASS = 'jp-DaskProfile-inline';
/** Added to the root when no JupyterLab theme variables are in effect (exported HTML). */
export const STANDALONE_CLASS = 'jp-DaskProfile-standalone';

/** Whether JupyterLab's theme variables are defined where `node` is. */
function hasLabTheme(node: HTMLElement): boolean {
  return (
    getComputedStyle(node).getPropertyValue('--jp-layout-color1').trim() !== ''
  );
}

/**
 * The panel's model, naming the task stream's merged bars: hovering one says how many
 * tasks it holds where the panel would show a task's key.
 */
export class InlineModel extends ProfileModel {
  constructor(merged: Uint32Array | null) {
    super();
    this._merged = merged;
  }

  keyOf(run: RunData, row: number): string | undefined {
    const key = super.keyOf(run, row);
    if (key !== undefined || !this._merged || row < 0 || row >= run.taskCount) {
      return key;
    }
    const n = this._merged[run.taskIndex.data[row]] ?? 1;
    return n > 1 ? `${formatCount(n)} tasks merged into this bar` : undefined;
  }

  private _merged: Uint32Array | null;
}

export class InlineView {
  /**
   * Build the view of `payload` into `root` (its children are replaced). `css` is the
   * stylesheet text the view needs (the panel's, plus the inline additions).
   */
  constructor(root: HTMLElement, payload: IInlinePayload, css: string) {
    this.root = root;
    this.model = new InlineModel(payload.merged);
    root.classList.add('jp-DaskProfile', ROOT_CLASS);
    const style = document.createElement('style');
    style.textContent = css;

    this.viewport = new TimeViewport();
    const model = this.model;
    this.runBar = new RunBar(model);
    this.spans = new SpanSelect(model);
    this.findings = new FindingsView(model, { heading: false });
    this.progress = new ProgressView(model);
    this.taskStream = new TaskStreamView(model, this.viewport);
    this.resources = new ResourcesView(model, this.viewport);
    this.memory = new MemoryView(model, this.viewport);
    this.cache = new CacheView(model, this.viewport);
    this.exceptions = new ExceptionsView(model);
    this.flame = new FlameGraphView(model, this.viewport);
    this.source = new SourceView({ onClose: () => this._mirror() });
    this.findingsSection = section(
      'findings',
      'Findings',
      true,
      this.findings.node
    );
    this.sourceLink = new FlameSourceLink(this.flame, this.source, model, () =>
      this._mirror()
    );

    root.replaceChildren(style, this._header(payload), this._body(payload));
    if (!hasLabTheme(root)) {
      root.classList.add(STANDALONE_CLASS);
    }
    this._feed(payload);
    this._listen();
    this.refreshTheme();
  }

  readonly root: HTMLElement;
  readonly model: InlineModel;
  readonly viewport: TimeViewport;
  readonly runBar: RunBar;
  readonly spans: SpanSelect;
  /** The run's top findings, in a section that opens the body (hidden when none). */
  readonly findings: FindingsView;
  readonly findingsSection: HTMLDetailsElement;
  readonly progress: ProgressView;
  readonly taskStream: TaskStreamView;
  readonly resources: ResourcesView;
  readonly memory: MemoryView;
  readonly cache: CacheView;
  readonly exceptions: ExceptionsView;
  readonly flame: FlameGraphView;
  /** The source of a clicked flame-graph frame, with a heat bar per line (as in the panel). */
  readonly source: SourceView;
  /** Opens the source view on a clicked frame and keeps it in step with the graph. */
  readonly sourceLink: FlameSourceLink;
  /** Where the source view goes, under the flame graph. */
  readonly sourceSlot = document.createElement('div');

  /** Re-read the theme's colours and redraw every canvas. */
  refreshTheme(): void {
    this.root.classList.toggle(
      STANDALONE_CLASS,
      !this._labTheme() && this.root.isConnected
    );
    for (const view of this._canvases()) {
      view.refreshTheme();
    }
    this.taskStream.update();
    this._mirror();
  }

  /** Lab's theme variables, read without the standalone fallbacks in the way. */
  private _labTheme(): boolean {
    const had = this.root.classList.contains(STANDALONE_CLASS);
    this.root.classList.remove(STANDALONE_CLASS);
    const lab = hasLabTheme(this.root);
    if (had) {
      this.root.classList.add(STANDALONE_CLASS);
    }
    return lab;
  }

  private _header(payload: IInlinePayload): HTMLElement {
    const header = document.createElement('div');
    header.className = 'jp-DaskProfile-header';
    const titleRow = document.createElement('div');
    titleRow.className = 'jp-DaskProfile-titleRow';
    const title = document.createElement('div');
    title.className = 'jp-DaskProfile-title';
    title.textContent = payload.title; // the user's words: text, never HTML
    const brand = document.createElement('span');
    brand.className = 'jp-DaskProfile-muted';
    brand.textContent = 'daskprofile';
    titleRow.append(title, brand);
    const notes = document.createElement('div');
    notes.className = 'jp-DaskProfile-inlineNotes';
    for (const text of payload.notes) {
      const note = document.createElement('div');
      note.textContent = text;
      notes.append(note);
    }
    notes.hidden = payload.notes.length === 0;
    header.append(titleRow, this.runBar.node, this.spans.node, notes);
    return header;
  }

  private _body(payload: IInlinePayload): HTMLElement {
    const tools = document.createElement('div');
    tools.className = 'jp-DaskProfile-toolbar';
    const reset = document.createElement('button');
    reset.className = 'jp-DaskProfile-button';
    reset.textContent = 'Reset view';
    reset.title = 'Show the whole run (or double-click the task stream)';
    reset.addEventListener('click', () => this.viewport.reset());
    const hint = document.createElement('span');
    hint.className = 'jp-DaskProfile-muted';
    hint.textContent =
      'click, then wheel: zoom · drag: pan · shift+drag: select range';
    tools.append(reset, hint);
    this.sourceSlot.className = 'jp-DaskProfile-sourceSlot';
    this.sourceSlot.append(this.source.node);
    const body = document.createElement('div');
    body.className = 'jp-DaskProfile-body';
    body.append(this.findingsSection);
    if (payload.code !== null) {
      const code = document.createElement('pre');
      code.className = 'jp-DaskProfile-traceback';
      code.textContent = payload.code; // the user's code: text, never HTML
      body.append(section('code', 'Code', false, code));
    }
    body.append(
      section('progress', 'Progress', false, this.progress.node),
      section(
        'tasks',
        'Task stream',
        true,
        tools,
        this.taskStream.node,
        this.resources.node,
        this.memory.node,
        this.cache.node,
        this.taskStream.legend
      ),
      this.exceptions.node,
      section(
        'flame',
        'Flame graph',
        true,
        this.flame.toolbar,
        this.flame.node,
        this.sourceSlot
      )
    );
    body.addEventListener('toggle', () => this._schedule(), true);
    return body;
  }

  /** Apply the run's messages to the model, then draw. */
  private _feed(payload: IInlinePayload): void {
    for (const [data, buffers] of payload.messages) {
      this.model.handle(data, buffers.map(base64View));
    }
    this.model.flush();
    this.runBar.render();
    this.findings.render();
    this.findingsSection.hidden = this.findings.node.hidden;
  }

  private _listen(): void {
    this.model.changed.connect(this._mirror, this);
    this.viewport.changed.connect(this._mirror, this);
    this.flame.changed.connect(this._mirror, this);
    // In a notebook the wheel scrolls the page; it zooms the task stream once the view
    // has been clicked (until the pointer leaves it), or with Ctrl/Cmd held.
    this.root.addEventListener('pointerdown', () => (this._active = true));
    this.root.addEventListener('pointerleave', () => (this._active = false));
    this.root.addEventListener(
      'wheel',
      e => {
        if (!this._active && !e.ctrlKey && !e.metaKey) {
          e.stopPropagation();
        }
      },
      { capture: true }
    );
    this._watchTheme();
  }

  /** Redraw in the new colours when JupyterLab switches theme. */
  private _watchTheme(): void {
    if (typeof MutationObserver === 'undefined') {
      return;
    }
    const observer = new MutationObserver(() => {
      if (!this.root.isConnected) {
        observer.disconnect();
        return;
      }
      this.refreshTheme();
    });
    observer.observe(document.body, {
      attributes: true,
      attributeFilter: ['data-jp-theme-name', 'data-jp-theme-light']
    });
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

  private _schedule(): void {
    for (const view of this._canvases()) {
      view.schedule();
    }
  }

  /** Mirror the view's state in data attributes (tests wait on them). */
  private _mirror(): void {
    const run = this.model.current;
    const data: { [key: string]: string } = {
      run: run ? String(run.id) : '',
      tasks: String(run?.taskCount ?? 0),
      resources: String(run?.resourceCount ?? 0),
      samples: String(run?.stackSamples ?? 0),
      groups: String(run?.groupsByName.size ?? 0),
      workers: String(run?.workers.size ?? 0),
      flameNodes: String(this.flame.nodeCount),
      findings: String(this.findings.count),
      highlight: this.model.highlight?.kind ?? '',
      rejected: String(this.model.rejected),
      source: this.source.identifier ?? '',
      theme: this.root.classList.contains(STANDALONE_CLASS)
        ? 'standalone'
        : 'lab'
    };
    const dataset = this.root.dataset;
    for (const [key, value] of Object.entries(data)) {
      if (dataset[key] !== value) {
        dataset[key] = value;
      }
    }
  }

  private _active = false;
}
