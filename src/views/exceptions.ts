/**
 * The "Exceptions (N)" section: the run's tasks that raised (protocol 1.2 `exceptions`),
 * one line each with the exception's type and message, the task's key and worker; a click
 * folds out its traceback. Everything here comes from the kernel (task keys, messages,
 * tracebacks): it is set with textContent only, never parsed as HTML. Hidden while the run
 * has no failure.
 */

import { IException } from '../clusterTables';
import { formatCount, formatDuration } from '../format';
import { ChangeKind, ProfileModel, RunData } from '../model';

/** Most failures listed (the rest are counted). */
const MAX_ROWS = 200;

/** The section's title: `Exceptions (3)`. */
export function exceptionsTitle(total: number): string {
  return `Exceptions (${formatCount(total)})`;
}

/** One failure: a summary line (type: message · key · worker · time), its traceback. */
function exceptionItem(row: IException): HTMLElement {
  const item = document.createElement('details');
  item.className = 'jp-DaskProfile-exception';
  item.dataset.index = String(row.index);
  const line = document.createElement('summary');
  const what = document.createElement('span');
  what.className = 'jp-DaskProfile-exceptionWhat';
  const type = document.createElement('b');
  type.textContent = row.type;
  what.append(type, document.createTextNode(`: ${row.message}`));
  const where = document.createElement('span');
  where.className = 'jp-DaskProfile-muted jp-DaskProfile-exceptionWhere';
  where.textContent = [row.key, row.worker, `at ${formatDuration(row.time)}`]
    .filter(Boolean)
    .join(' · ');
  line.append(what, where);
  const trace = document.createElement('pre');
  trace.className = 'jp-DaskProfile-traceback';
  trace.textContent = row.traceback || '(no traceback)';
  item.append(line, trace);
  return item;
}

export class ExceptionsView {
  constructor(model: ProfileModel) {
    this._model = model;
    this.node.className = 'jp-DaskProfile-section jp-DaskProfile-exceptions';
    this.node.dataset.section = 'exceptions';
    this.node.open = true;
    this._list.className = 'jp-DaskProfile-exceptionList';
    this._more.className = 'jp-DaskProfile-muted';
    this.node.append(this._title, this._list, this._more);
    model.changed.connect(this._onModel, this);
    this.render();
  }

  /** The section (a `<details>`), hidden while the run has no failure. */
  readonly node = document.createElement('details');

  dispose(): void {
    this._model.changed.disconnect(this._onModel, this);
    this.node.remove();
  }

  /** Show the current run's failures (only what changed since the last call). */
  render(): void {
    const run = this._model.current;
    const table = run?.tables.exceptions;
    const total = table?.total ?? 0;
    this.node.hidden = total === 0;
    this.node.dataset.count = String(total);
    this._title.textContent = exceptionsTitle(total);
    if (run !== this._run) {
      this._run = run;
      this._items.clear();
      this._list.replaceChildren();
    }
    if (!table) {
      this._more.textContent = '';
      return;
    }
    const rows = table.rows.slice(0, MAX_ROWS);
    if (rows.some(r => this._items.get(r.index)?.row !== r)) {
      // the items already shown are kept (a traceback the user opened stays open)
      const items = new Map<number, { row: IException; node: HTMLElement }>();
      for (const row of rows) {
        const known = this._items.get(row.index);
        items.set(
          row.index,
          known?.row === row ? known : { row, node: exceptionItem(row) }
        );
      }
      this._items = items;
      this._list.replaceChildren(...[...items.values()].map(i => i.node));
    }
    const hidden = table.rows.length - rows.length;
    const notes: string[] = [];
    if (hidden > 0) {
      notes.push(`${formatCount(hidden)} more not listed`);
    }
    if (table.dropped > 0) {
      notes.push(`${formatCount(table.dropped)} not kept by the kernel`);
    }
    this._more.textContent = notes.join('; ');
  }

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (
      changes.has('exceptions') ||
      changes.has('current') ||
      changes.has('runs')
    ) {
      this.render();
    }
  }

  private _model: ProfileModel;
  private _title = document.createElement('summary');
  private _list = document.createElement('div');
  private _more = document.createElement('div');
  private _run: RunData | null = null;
  private _items = new Map<number, { row: IException; node: HTMLElement }>();
}
