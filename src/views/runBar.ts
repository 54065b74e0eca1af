/**
 * The run bar under the panel header: a run list to switch runs, the run's summary
 * (wall time, tasks, groups, peak memory, mean CPU, a cluster's workers that joined or
 * left and the bytes its workers moved, dropped records; with a span picked, its tasks
 * among the run's), a warning line naming
 * what was recorded in a reduced way (e.g. cluster workers without daskprofile),
 * pause/resume and export buttons. Exports arrive through the model and are saved as
 * downloads.
 */

import {
  formatBytes,
  formatCount,
  formatDuration,
  formatPercent
} from '../format';
import { ChangeKind, ProfileModel, reducedLine, RunData } from '../model';
import { ExportFormat, IExportMessage } from '../protocol';

/** Export buttons: format and label. */
const EXPORTS: [ExportFormat, string, string][] = [
  ['html', 'HTML', 'Download a standalone HTML snapshot of the run'],
  ['trace', 'Trace', 'Download a Chrome trace (chrome://tracing, Perfetto)'],
  ['run', 'Run file', 'Download the run file (daskprofile.load)']
];

function runLabel(run: RunData, index: number): string {
  const time =
    run.wall0 > 0 ? new Date(run.wall0 * 1000).toLocaleTimeString() : '';
  const title = run.title
    ? run.title.split('\n')[0].slice(0, 60)
    : `run ${String(run.id)}`;
  const state = run.finished ? '' : ' (live)';
  return `#${index + 1} ${time} ${title}${state}`.replace(/\s+/g, ' ');
}

/** Save bytes as a file download (a Blob URL on a temporary link). */
export function download(msg: IExportMessage): void {
  const bytes = new Uint8Array(msg.bytes.byteLength);
  bytes.set(msg.bytes);
  const blob = new Blob([bytes], {
    type: msg.mime || 'application/octet-stream'
  });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = msg.filename;
  a.style.display = 'none';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export class RunBar {
  constructor(model: ProfileModel) {
    this._model = model;
    this.node.className = 'jp-DaskProfile-runBar';
    const row = document.createElement('div');
    row.className = 'jp-DaskProfile-runRow';
    this._select.className = 'jp-DaskProfile-runSelect';
    this._select.title = 'Run';
    this._select.addEventListener('change', () => {
      const run = model.runs[Number(this._select.value)];
      if (run) {
        model.select(run.id);
      }
    });
    this._pause.className = 'jp-DaskProfile-button jp-DaskProfile-pause';
    this._pause.addEventListener('click', () => model.setPaused(!model.paused));
    row.append(this._select, this._pause);
    const exports = document.createElement('div');
    exports.className = 'jp-DaskProfile-exports';
    const label = document.createElement('span');
    label.className = 'jp-DaskProfile-muted';
    label.textContent = 'Export:';
    exports.append(label);
    for (const [format, text, title] of EXPORTS) {
      const b = document.createElement('button');
      b.className = 'jp-DaskProfile-button';
      b.dataset.format = format;
      b.textContent = text;
      b.title = title;
      b.addEventListener('click', () => this.export(format));
      exports.append(b);
      this._exportButtons.push(b);
    }
    this._summary.className = 'jp-DaskProfile-summary';
    this._reduced.className = 'jp-DaskProfile-reduced jp-mod-warn';
    this._reduced.style.color = 'var(--jp-warn-color0)';
    this._reduced.hidden = true;
    this._message.className = 'jp-DaskProfile-message';
    this.node.append(row, this._summary, this._reduced, exports, this._message);
    model.changed.connect(this._onModel, this);
    model.exported.connect(this._onExported, this);
    this.render();
  }

  readonly node = document.createElement('div');

  /** Ask the kernel for an export of the current run. */
  export(format: ExportFormat): void {
    const run = this._model.current;
    if (run) {
      this._message.textContent = `Preparing ${format} export…`;
      this._model.requestExport(run, format);
    }
  }

  dispose(): void {
    this._model.changed.disconnect(this._onModel, this);
    this._model.exported.disconnect(this._onExported, this);
    this.node.remove();
  }

  /** Re-render everything (e.g. after connecting: buttons become enabled). */
  render(): void {
    const model = this._model;
    const runs = model.runs;
    const current = model.current;
    const options = runs.map((run, i) => {
      const o = document.createElement('option');
      o.value = String(i);
      o.textContent = runLabel(run, i);
      return o;
    });
    if (options.length === 0) {
      const o = document.createElement('option');
      o.textContent = 'No runs yet';
      o.value = '';
      options.push(o);
    }
    this._select.replaceChildren(...options);
    this._select.value = current ? String(runs.indexOf(current)) : '';
    this._select.disabled = runs.length === 0;
    this._pause.textContent = model.paused ? 'Resume' : 'Pause';
    this._pause.title = model.paused
      ? 'Resume live updates'
      : 'Pause live updates (runs are still recorded)';
    this._pause.dataset.paused = String(model.paused);
    this._pause.disabled = !model.connected;
    for (const b of this._exportButtons) {
      b.disabled = !current || !model.connected;
    }
    this._renderSummary(current);
  }

  private _renderSummary(run: RunData | null): void {
    if (!run) {
      this._summary.replaceChildren();
      this._reduced.textContent = '';
      this._reduced.hidden = true;
      return;
    }
    const s = run.summary();
    const reduced = reducedLine(s.reduced);
    this._reduced.textContent = reduced; // the kernel's words: text, never HTML
    this._reduced.title = reduced;
    this._reduced.hidden = reduced === '';
    const items: [string, string][] = [
      ['Wall', formatDuration(s.wallTime)],
      ['Tasks', this._tasksText(run, s.tasks, s.errors)],
      ['Groups', formatCount(s.groups)],
      ['Peak memory', s.peakMemory === null ? '–' : formatBytes(s.peakMemory)],
      ['Mean CPU', s.meanCpu === null ? '–' : formatPercent(s.meanCpu)]
    ];
    if (s.cluster) {
      const c = s.cluster;
      items.push([
        'Cluster',
        `${formatCount(c.workers)} workers · ${formatCount(c.threads)} threads` +
          (c.memoryLimit > 0 ? ` · ${formatBytes(c.memoryLimit)}` : '')
      ]);
    }
    if (s.clusterWorkers !== '') {
      items.push(['Workers', s.clusterWorkers]);
    }
    if (s.transferred !== null) {
      items.push(['Transferred', formatBytes(s.transferred)]);
    }
    const dropped = Object.entries(s.dropped).filter(([, n]) => n > 0);
    if (dropped.length > 0) {
      items.push([
        'Dropped',
        dropped.map(([what, n]) => `${formatCount(n)} ${what}`).join(', ')
      ]);
    }
    const nodes = items.map(([label, value]) => {
      const item = document.createElement('span');
      item.className = 'jp-DaskProfile-summaryItem';
      if (label === 'Dropped') {
        item.classList.add('jp-mod-warn');
      }
      const l = document.createElement('span');
      l.className = 'jp-DaskProfile-muted';
      l.textContent = `${label} `;
      const v = document.createElement('b');
      v.textContent = value;
      item.append(l, v);
      return item;
    });
    this._summary.replaceChildren(...nodes);
  }

  /** `1,234 (2 failed)`, or with a span picked `120 of 1,234 in load`. */
  private _tasksText(run: RunData, tasks: number, errors: number): string {
    const span = this._model.spanFilter;
    this._summary.dataset.span = span ?? '';
    if (span !== null) {
      const c = run.spanCounts(span);
      tasks = c.tasks;
      errors = c.errors;
    }
    const failed = errors > 0 ? ` (${formatCount(errors)} failed)` : '';
    const of =
      span === null ? '' : ` of ${formatCount(run.summary().tasks)} in ${span}`;
    this._summary.dataset.tasks = String(tasks);
    return formatCount(tasks) + failed + of;
  }

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (changes.has('error')) {
      this._message.textContent = this._model.lastError ?? '';
    }
    if (changes.has('runs') || changes.has('current') || changes.has('state')) {
      this.render();
    } else if (
      changes.has('summary') ||
      changes.has('filter') ||
      changes.has('resources') ||
      changes.has('tasks')
    ) {
      this._renderSummary(this._model.current);
    }
  }

  private _onExported(_: ProfileModel, msg: IExportMessage): void {
    this._message.textContent = `Saved ${msg.filename}`;
    download(msg);
  }

  private _model: ProfileModel;
  private _select = document.createElement('select');
  private _pause = document.createElement('button');
  private _summary = document.createElement('div');
  private _reduced = document.createElement('div');
  private _message = document.createElement('div');
  private _exportButtons: HTMLButtonElement[] = [];
}
