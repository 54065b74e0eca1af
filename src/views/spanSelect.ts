/**
 * The span selector: "All spans" and each span path of the current run (with its
 * parents), shown only when the run has spans. Picking one sets the model's span filter,
 * which every view draws from; option texts are the kernel's, set as text.
 */

import { ChangeKind, ProfileModel } from '../model';

const ALL = '';

export class SpanSelect {
  constructor(model: ProfileModel) {
    this._model = model;
    this.node.className = 'jp-DaskProfile-spanRow';
    const label = document.createElement('label');
    label.className = 'jp-DaskProfile-muted';
    label.textContent = 'Span ';
    this.select.className = 'jp-DaskProfile-spanSelect';
    this.select.title = 'Show only the tasks of a span (and its sub-spans)';
    this.select.addEventListener('change', () =>
      model.setSpanFilter(this.select.value === ALL ? null : this.select.value)
    );
    label.append(this.select);
    this.node.append(label);
    model.changed.connect(this._onModel, this);
    this.render();
  }

  readonly node = document.createElement('div');
  readonly select = document.createElement('select');

  dispose(): void {
    this._model.changed.disconnect(this._onModel, this);
    this.node.remove();
  }

  render(): void {
    const run = this._model.current;
    const paths = run?.hasSpans ? run.spanPaths() : [];
    this.node.hidden = paths.length === 0;
    const key = paths.join('\n');
    if (key !== this._key) {
      this._key = key;
      const options = [ALL, ...paths].map(path => {
        const o = document.createElement('option');
        o.value = path;
        o.textContent = path === ALL ? 'All spans' : path;
        return o;
      });
      this.select.replaceChildren(...options);
    }
    this.select.value = this._model.spanFilter ?? ALL;
  }

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (
      changes.has('spans') ||
      changes.has('filter') ||
      changes.has('current') ||
      changes.has('runs')
    ) {
      this.render();
    }
  }

  private _model: ProfileModel;
  private _key: string | null = null;
}
