/**
 * The findings list: the current run's top findings (the kernel's `summary.findings`),
 * one line each, "kind · impact (s and % of wall) · message"; the suggestion shows on
 * hover and when the line is expanded (its ▸ button). Clicking a finding that names
 * groups or task rows picks it as the model's highlight, which the task stream (the other
 * tasks dimmed) and the flame graph (its one group) draw from; clicking it again, or
 * Escape, clears it. Hidden when the run has no findings. Plain DOM (the panel and the
 * inline view both mount it); every text is set with textContent.
 */

import { highlights, IFinding, impactText } from '../findings';
import { formatDuration } from '../format';
import { ChangeKind, ProfileModel, RunData } from '../model';

/** Options of the list. */
export interface IFindingsViewOptions {
  /** Show a "Findings" heading (the inline view's section has its own). */
  heading?: boolean;
}

export class FindingsView {
  constructor(model: ProfileModel, options: IFindingsViewOptions = {}) {
    this._model = model;
    this.node.className = 'jp-DaskProfile-findings';
    if (options.heading ?? true) {
      const heading = document.createElement('div');
      heading.className = 'jp-DaskProfile-findingsHeading';
      heading.textContent = 'Findings';
      this.node.append(heading);
    }
    this.list.className = 'jp-DaskProfile-findingList';
    this._note.className = 'jp-DaskProfile-muted jp-DaskProfile-findingsNote';
    this.node.append(this.list, this._note);
    this.node.addEventListener('keydown', this._onKey);
    model.changed.connect(this._onModel, this);
    this.render();
  }

  readonly node = document.createElement('div');
  /** One `<li>` per finding (`data-kind`, `data-picked`, `data-expanded`). */
  readonly list = document.createElement('ol');

  /** Findings shown. */
  get count(): number {
    return this._shown.length;
  }

  dispose(): void {
    this._model.changed.disconnect(this._onModel, this);
    this.node.removeEventListener('keydown', this._onKey);
    this.node.remove();
  }

  /** Re-read the current run's findings and the picked one. */
  render(): void {
    const run = this._model.current;
    const findings = run?.findings ?? [];
    if (run !== this._run || findings !== this._shown) {
      this._run = run;
      this._shown = findings;
      this.list.replaceChildren(...findings.map((f, i) => this._item(f, i)));
    }
    const dropped = run?.findingsDropped ?? 0;
    this._note.textContent =
      dropped > 0 ? `${dropped} malformed finding(s) not shown` : '';
    this._note.hidden = dropped === 0;
    this.node.hidden = findings.length === 0 && dropped === 0;
    const picked = this._model.highlight;
    this.list.querySelectorAll('li').forEach((li, i) => {
      const on = findings[i] === picked;
      li.dataset.picked = String(on);
      li.querySelector('.jp-DaskProfile-findingPick')?.setAttribute(
        'aria-pressed',
        String(on)
      );
    });
    this.node.dataset.count = String(findings.length);
    this.node.dataset.highlight = picked?.kind ?? '';
  }

  private _item(finding: IFinding, index: number): HTMLLIElement {
    const li = document.createElement('li');
    li.className = 'jp-DaskProfile-finding';
    li.dataset.kind = finding.kind;
    li.dataset.index = String(index);
    li.dataset.expanded = 'false';
    li.title = `Try: ${finding.suggestion}`; // a tooltip: text, never HTML

    const pick = document.createElement('button');
    pick.className = 'jp-DaskProfile-findingPick';
    const span = (cls: string, text: string) => {
      const s = document.createElement('span');
      s.className = cls;
      s.textContent = text;
      return s;
    };
    pick.append(
      span('jp-DaskProfile-findingKind', finding.kind),
      span('jp-DaskProfile-findingSep', ' · '),
      span('jp-DaskProfile-findingImpact', impactText(finding, formatDuration)),
      span('jp-DaskProfile-findingSep', ' · '),
      span('jp-DaskProfile-findingMessage', finding.message)
    );
    const can = highlights(finding);
    pick.dataset.highlights = String(can);
    pick.setAttribute('aria-pressed', 'false');
    pick.addEventListener('click', () =>
      can ? this._model.setHighlight(finding) : this._toggle(li)
    );

    const more = document.createElement('button');
    more.className = 'jp-DaskProfile-findingMore';
    more.textContent = '▸';
    more.title = 'Show the suggestion';
    more.setAttribute('aria-expanded', 'false');
    more.addEventListener('click', () => this._toggle(li));

    const suggestion = document.createElement('div');
    suggestion.className = 'jp-DaskProfile-findingSuggestion';
    suggestion.append(
      span('jp-DaskProfile-findingTry', 'Try: '),
      document.createTextNode(finding.suggestion)
    );
    suggestion.hidden = true;

    const line = document.createElement('div');
    line.className = 'jp-DaskProfile-findingLine';
    line.append(more, pick);
    li.append(line, suggestion);
    return li;
  }

  /** Expand or fold a finding (its whole message and the suggestion). */
  private _toggle(li: HTMLLIElement): void {
    const open = li.dataset.expanded !== 'true';
    li.dataset.expanded = String(open);
    const more = li.querySelector('.jp-DaskProfile-findingMore');
    if (more) {
      more.textContent = open ? '▾' : '▸';
      more.setAttribute('aria-expanded', String(open));
    }
    const suggestion = li.querySelector<HTMLElement>(
      '.jp-DaskProfile-findingSuggestion'
    );
    if (suggestion) {
      suggestion.hidden = !open;
    }
  }

  private _onKey = (e: KeyboardEvent): void => {
    if (e.key === 'Escape' && this._model.highlight) {
      this._model.setHighlight(null);
      e.stopPropagation();
      e.preventDefault();
    }
  };

  private _onModel(_: ProfileModel, changes: Set<ChangeKind>): void {
    if (
      changes.has('summary') ||
      changes.has('current') ||
      changes.has('runs') ||
      changes.has('highlight')
    ) {
      this.render();
    }
  }

  private _model: ProfileModel;
  private _run: RunData | null = null;
  private _shown: IFinding[] = [];
  private _note = document.createElement('div');
}
