/**
 * Progress per task group (done / total / erred), live; names set as text. With a span
 * picked, the counts are that span's finished tasks (the kernel's totals are per group,
 * not per span).
 */

import { formatCount } from '../format';
import { ChangeKind, IGroupProgress, ProfileModel, RunData } from '../model';

const MAX_GROUPS = 30;

export class ProgressView {
  constructor(model: ProfileModel) {
    this._model = model;
    this.node.className = 'jp-DaskProfile-progress';
    model.changed.connect(this._onModel, this);
    this.render();
  }

  readonly node = document.createElement('div');

  dispose(): void {
    this._model.changed.disconnect(this._onModel, this);
    this.node.remove();
  }

  render(): void {
    const run = this._model.current;
    const rows = run ? this._rows(run) : [];
    rows.sort((a, b) => b.total - a.total);
    if (rows.length === 0) {
      const empty = document.createElement('div');
      empty.className = 'jp-DaskProfile-muted';
      empty.textContent = run ? 'No progress reported.' : '';
      this.node.replaceChildren(empty);
      this.node.dataset.done = '0';
      this.node.dataset.total = '0';
      return;
    }
    let done = 0;
    let total = 0;
    const items = rows.slice(0, MAX_GROUPS).map(p => {
      const group = run!.group(p.group);
      const row = document.createElement('div');
      row.className = 'jp-DaskProfile-progressRow';
      const name = document.createElement('span');
      name.className = 'jp-DaskProfile-progressName';
      name.textContent = group.name;
      name.title = group.name;
      const bar = document.createElement('span');
      bar.className = 'jp-DaskProfile-progressBar';
      const ok = document.createElement('span');
      ok.className = 'jp-DaskProfile-progressDone';
      ok.style.background = group.color;
      ok.style.width = `${p.total > 0 ? ((p.done - p.erred) / p.total) * 100 : 0}%`;
      const bad = document.createElement('span');
      bad.className = 'jp-DaskProfile-progressErred';
      bad.style.width = `${p.total > 0 ? (p.erred / p.total) * 100 : 0}%`;
      bar.append(ok, bad);
      const text = document.createElement('span');
      text.className = 'jp-DaskProfile-progressText';
      text.textContent =
        `${formatCount(p.done)} / ${formatCount(p.total)}` +
        (p.erred > 0 ? ` (${formatCount(p.erred)} erred)` : '');
      row.append(name, bar, text);
      return row;
    });
    for (const p of rows) {
      done += p.done;
      total += p.total;
    }
    if (rows.length > MAX_GROUPS) {
      const more = document.createElement('div');
      more.className = 'jp-DaskProfile-muted';
      more.textContent = `+${rows.length - MAX_GROUPS} more groups`;
      items.push(more);
    }
    this.node.replaceChildren(...items);
    this.node.dataset.done = String(done);
    this.node.dataset.total = String(total);
  }

  /** The kernel's progress, or the picked span's finished tasks per group. */
  private _rows(run: RunData): IGroupProgress[] {
    const span = this._model.spanFilter;
    this.node.dataset.span = span ?? '';
    if (span === null) {
      return [...run.progress.values()];
    }
    const counts = run.spanCounts(span).groups;
    return [...counts].map(([group, [done, erred]]) => ({
      group,
      total: done,
      done,
      erred
    }));
  }

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (
      changes.has('filter') ||
      (changes.has('tasks') && this._model.spanFilter !== null) ||
      changes.has('progress') ||
      changes.has('current') ||
      changes.has('runs')
    ) {
      this.render();
    }
  }

  private _model: ProfileModel;
}
