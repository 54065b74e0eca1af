/**
 * The link between a flame graph and a source view: a clicked function frame opens its
 * source, and the open view follows the tree shown (group, zoom, new samples or
 * sources). One piece shared by the panel and the standalone inline view.
 */

import { Signal } from '@lumino/signaling';

import { IFlameNode } from '../flame';
import { ProfileModel } from '../model';
import { FlameGraphView } from './flameGraph';
import { SourceView } from './sourceView';

export class FlameSourceLink {
  /** `shown` is called after the view opened or redrew (e.g. to mirror its state). */
  constructor(
    private readonly _flame: FlameGraphView,
    private readonly _source: SourceView,
    private readonly _model: ProfileModel,
    private readonly _shown: () => void
  ) {
    _flame.changed.connect(this.refresh, this);
    _flame.frameClicked.connect(this._onFrameClicked, this);
  }

  /** Redraw an open source view from the tree and sources shown now. */
  refresh(): void {
    const identifier = this._source.identifier;
    if (identifier !== null) {
      this._show(identifier);
    }
  }

  dispose(): void {
    Signal.disconnectReceiver(this);
  }

  private _onFrameClicked(_: FlameGraphView, node: IFlameNode): void {
    this._show(node.identifier);
    this._source.focus();
    this._source.node.scrollIntoView({ block: 'nearest' });
  }

  private _show(identifier: string): void {
    const run = this._model.current;
    const root = this._flame.root;
    if (!run || !root) {
      this._source.close();
      return;
    }
    this._source.show(identifier, root, run.functionSources, this._flame.scale);
    this._shown();
  }
}
