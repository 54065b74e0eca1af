import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  combineGroups,
  countNodes,
  findPath,
  flameNode,
  groupIdentifier,
  layoutFlame,
  mergeStackTree
} from '../src/flame';
import { decodeMessage, IStacksMessage } from '../src/protocol';
import { tree } from './helpers';

function stacks(trees: Record<string, unknown>): IStacksMessage {
  return decodeMessage({
    type: 'stacks',
    run: 1,
    t_start: 0,
    t_end: 1,
    trees
  }) as IStacksMessage;
}

describe('flame', () => {
  const msg = stacks({
    inc: tree('root', 10, [
      tree('main', 10, [tree('inc', 6), tree('slow', 4, [tree('sleep', 4)])])
    ])
  });

  it('merges trees by identifier, adding counts', () => {
    const node = flameNode('root', 'inc');
    mergeStackTree(node, msg.trees.inc);
    mergeStackTree(node, msg.trees.inc);
    assert.equal(node.count, 20);
    assert.equal(node.children.length, 1);
    assert.equal(node.children[0].children[1].count, 8);
    assert.equal(countNodes(node), 5);
  });

  it('lays out widths by samples, children left to right', () => {
    const node = flameNode('root', 'inc');
    mergeStackTree(node, msg.trees.inc);
    const root = combineGroups(new Map([['grp', node]]));
    const layout = layoutFlame(root);
    assert.equal(layout.total, 10);
    const byName = new Map(layout.rects.map(r => [r.node.name, r]));
    assert.equal(byName.get('all')!.depth, 0);
    assert.equal(byName.get('grp')!.depth, 1); // the group
    const slow = byName.get('slow')!;
    assert.equal(slow.depth, 3);
    assert.ok(Math.abs(slow.x0 - 0.6) < 1e-9 && Math.abs(slow.x1 - 1) < 1e-9);
    assert.equal(layout.depth, 5);
  });

  it('zooms on a node, keeping ancestors full width, and searches', () => {
    const node = flameNode('root', 'inc');
    mergeStackTree(node, msg.trees.inc);
    const root = combineGroups(new Map([['inc', node]]));
    const path = [groupIdentifier('inc'), 'main;file.py;1', 'slow;file.py;1'];
    assert.equal(findPath(root, path).length, 4);
    const layout = layoutFlame(root, { focus: path, query: 'SLEEP' });
    const slow = layout.rects.find(r => r.node.name === 'slow')!;
    assert.deepEqual([slow.x0, slow.x1, slow.ancestor], [0, 1, false]);
    assert.equal(layout.rects.filter(r => r.ancestor).length, 3);
    assert.equal(
      layout.rects.find(r => r.node.name === 'sleep')!.matched,
      true
    );
    assert.equal(layout.matchedFraction, 1);
    assert.equal(
      layout.rects.some(
        r => r.node.name === 'inc' && !r.ancestor && r.depth > 1
      ),
      false
    );
  });

  it('filters groups and drops nodes narrower than the minimum', () => {
    const a = flameNode('root', 'a');
    mergeStackTree(a, msg.trees.inc);
    const b = flameNode('root', 'b');
    mergeStackTree(
      b,
      stacks({ b: tree('root', 1000, [tree('big', 1000)]) }).trees.b
    );
    const both = combineGroups(
      new Map([
        ['a', a],
        ['b', b]
      ])
    );
    assert.equal(both.count, 1010);
    const onlyA = combineGroups(
      new Map([
        ['a', a],
        ['b', b]
      ]),
      new Set(['a'])
    );
    assert.equal(onlyA.count, 10);
    const layout = layoutFlame(both, { minFraction: 0.05 });
    assert.equal(
      layout.rects.some(r => r.node.name === 'main'),
      false
    );
  });
});
