import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it, mock } from 'node:test';

import {
  combineGroups,
  flameNode,
  IFlameNode,
  mergeFlame,
  mergeStackTree
} from '../src/flame';
import { ProfileModel } from '../src/model';
import {
  decodeMessage,
  ISourcesMessage,
  IStacksMessage,
  parseStackTree,
  ProtocolError
} from '../src/protocol';
import {
  collectLines,
  runSampleScale,
  sampleScale,
  sourceTable,
  splitIdentifier,
  taskSecondsByGroup
} from '../src/sourceLines';
import {
  fixture,
  FIXTURES,
  groupsMessage,
  runStart,
  tasksMessage,
  workersMessage
} from './helpers';

/** A stack tree node of function `name` in `file` with per-line samples. */
function fn(
  name: string,
  lines: Record<number, number>,
  children: Record<string, unknown>[] = [],
  file = 'work.py',
  first = 1
): Record<string, unknown> {
  const kids: Record<string, unknown> = {};
  for (const c of children) {
    kids[String(c.identifier)] = c;
  }
  const own = Object.values(lines).reduce((a, b) => a + b, 0);
  const below = children.reduce((a, c) => a + Number(c.count), 0);
  return {
    identifier: `${name};${file};${first}`,
    description: { filename: file, name, line_number: first, line: '' },
    count: Math.max(own, below),
    lines: Object.fromEntries(
      Object.entries(lines).map(([k, v]) => [String(k), v])
    ),
    children: kids
  };
}

function root(children: Record<string, unknown>[]): Record<string, unknown> {
  const kids: Record<string, unknown> = {};
  for (const c of children) {
    kids[String(c.identifier)] = c;
  }
  return {
    identifier: 'root',
    description: { filename: '', name: '', line_number: 0, line: '' },
    count: children.reduce((a, c) => a + Number(c.count), 0),
    children: kids
  };
}

function merged(group: string, raw: Record<string, unknown>): IFlameNode {
  const node = flameNode('root', group);
  mergeStackTree(node, parseStackTree(raw));
  return node;
}

const WORK = 'work;work.py;10';
const SOURCE = {
  file: 'Cell In[5]',
  name: 'work',
  start: 10,
  text: [
    'def work(x):',
    '    y = slow(x)',
    '    s = "<script>alert(1)</script>"',
    '    return y + 1'
  ]
};

/** Group `inc`: work (lines 11, 13) called from two places, once recursively. */
function incTree(): Record<string, unknown> {
  const work = (
    lines: Record<number, number>,
    kids: Record<string, unknown>[] = []
  ) => fn('work', lines, kids, 'work.py', 10);
  return root([
    fn(
      'main',
      { 2: 10 },
      [
        work({ 11: 6 }, [work({ 11: 2 })]),
        fn('other', { 21: 4 }, [work({ 13: 4 })], 'work.py', 20)
      ],
      'main.py',
      1
    )
  ]);
}

describe('sources: protocol 1.3 decoding', () => {
  it('decodes a sources message into typed sources', () => {
    const msg = decodeMessage({
      type: 'sources',
      run: 'r1',
      sources: { [WORK]: SOURCE }
    }) as ISourcesMessage;
    assert.equal(msg.type, 'sources');
    assert.equal(msg.run, 'r1');
    assert.deepEqual(msg.sources[WORK], SOURCE);
  });

  it('decodes the shared `sources` fixture (tests/fixtures/protocol/sources.json)', () => {
    const file = path.join(FIXTURES, 'sources.json');
    assert.ok(
      fs.existsSync(file),
      `${file} is missing (the kernel side writes it)`
    );
    const { data, buffers } = fixture('sources');
    const msg = decodeMessage(data, buffers) as ISourcesMessage;
    assert.equal(msg.type, 'sources');
    const entries = Object.entries(msg.sources);
    assert.ok(entries.length > 0, 'the fixture has no source');
    for (const [identifier, info] of entries) {
      assert.equal(splitIdentifier(identifier).name, info.name, identifier);
      assert.ok(info.text.length > 0 && info.text.length <= 300, identifier);
      assert.ok(info.start >= 0);
    }
  });

  it('rejects malformed sources, naming the field', () => {
    const bad: [unknown, RegExp][] = [
      [[], /"sources" must be an object/],
      [{ [WORK]: 'def work' }, /must be an object/],
      [{ [WORK]: { ...SOURCE, text: 'def work(x):' } }, /"text"/],
      [{ [WORK]: { ...SOURCE, text: [1, 2] } }, /"text"/],
      [{ [WORK]: { ...SOURCE, start: -1 } }, /"start"/],
      [{ [WORK]: { ...SOURCE, file: null } }, /"file"/]
    ];
    for (const [sources, why] of bad) {
      assert.throws(
        () => decodeMessage({ type: 'sources', run: 1, sources }),
        (e: unknown) => e instanceof ProtocolError && why.test(e.message),
        JSON.stringify(sources)
      );
    }
  });

  it('decodes the per-line samples of stack trees, and rejects bad ones', () => {
    const msg = decodeMessage({
      type: 'stacks',
      run: 1,
      t_start: 0,
      t_end: 1,
      trees: { inc: incTree() }
    }) as IStacksMessage;
    const main = msg.trees.inc.children[0];
    assert.deepEqual(main.lines, [[2, 10]]);
    assert.deepEqual(msg.trees.inc.lines, []); // the root has none
    for (const lines of [{ x: 1 }, { 3: -1 }, { 3: 1.5 }, [1, 2]]) {
      const t = { ...fn('f', {}), lines };
      assert.throws(
        () => parseStackTree(root([t])),
        (e: unknown) => e instanceof ProtocolError && /lines/.test(e.message),
        JSON.stringify(lines)
      );
    }
  });

  it('merges per-line samples when trees are merged', () => {
    const a = merged('inc', incTree());
    mergeStackTree(a, parseStackTree(incTree()));
    const main = a.children[0];
    assert.equal(main.lines.get(2), 20);
    const all = flameNode('root', 'inc');
    mergeFlame(all, a);
    mergeFlame(all, a);
    assert.equal(all.children[0].lines.get(2), 40);
  });
});

describe('sources: the model keeps them per run', () => {
  it('merges sources as they arrive, per run', () => {
    const model = new ProfileModel();
    assert.ok(model.handle(runStart('a')));
    assert.ok(model.handle(runStart('b')));
    const other = {
      ...SOURCE,
      name: 'other',
      start: 20,
      text: ['def other():']
    };
    assert.ok(
      model.handle({ type: 'sources', run: 'a', sources: { [WORK]: SOURCE } })
    );
    assert.ok(
      model.handle({
        type: 'sources',
        run: 'a',
        sources: { 'other;work.py;20': other }
      })
    );
    const [a, b] = model.runs;
    assert.equal(a.functionSources.size, 2);
    assert.deepEqual(a.functionSources.get(WORK), SOURCE);
    assert.equal(a.functionSources.get('other;work.py;20')?.name, 'other');
    assert.equal(b.functionSources.size, 0);
  });

  it('a replayed run starts with no sources; unknown runs are rejected', () => {
    const model = new ProfileModel();
    model.handle(runStart('a'));
    model.handle({ type: 'sources', run: 'a', sources: { [WORK]: SOURCE } });
    model.handle(runStart('a')); // replay: the run is reset
    assert.equal(model.runs[0].functionSources.size, 0);
    const error = mock.method(console, 'error', () => undefined);
    try {
      assert.equal(
        model.handle({ type: 'sources', run: 'zzz', sources: {} }),
        false
      );
      assert.equal(model.rejected, 1);
    } finally {
      error.mock.restore();
    }
  });
});

describe('sources: lines of a function over every call path', () => {
  it('sums the lines of every node with the identifier (recursion counted once)', () => {
    const tree = merged('inc', incTree());
    const lines = collectLines(tree, WORK);
    assert.deepEqual(
      lines.lines.map(l => [l.line, l.samples]),
      [
        [11, 8],
        [13, 4]
      ]
    );
    // outermost calls: 6 (under main, its recursive call inside) + 4 (under other)
    assert.equal(lines.samples, 10);
    assert.equal(lines.name, 'work');
    assert.equal(lines.filename, 'work.py');
    assert.equal(lines.firstLine, 10);
    assert.equal(lines.seconds, null); // no scale given
  });

  it('scales each group by its own seconds per sample', () => {
    const trees = new Map([
      ['inc', merged('inc', incTree())],
      ['add', merged('add', incTree())]
    ]);
    const all = combineGroups(trees);
    const scale = {
      groups: new Map([
        ['inc', 0.01],
        ['add', 0.1]
      ]),
      fallback: null
    };
    const lines = collectLines(all, WORK, scale);
    const line11 = lines.lines.find(l => l.line === 11)!;
    assert.equal(line11.samples, 16);
    assert.ok(Math.abs(line11.seconds! - (8 * 0.01 + 8 * 0.1)) < 1e-12);
    assert.ok(Math.abs(lines.seconds! - (10 * 0.01 + 10 * 0.1)) < 1e-12);
    // one group's tree alone: its root names the group
    const inc = collectLines(trees.get('inc')!, WORK, scale);
    assert.ok(Math.abs(inc.seconds! - 0.1) < 1e-12);
    // a group without a scale of its own and no fallback: seconds unknown
    const partial = { groups: new Map([['inc', 0.01]]), fallback: null };
    assert.equal(collectLines(all, WORK, partial).seconds, null);
  });

  it('finds nothing for a function that is not in the tree', () => {
    const lines = collectLines(merged('inc', incTree()), 'nope;x.py;1');
    assert.equal(lines.samples, 0);
    assert.deepEqual(lines.lines, []);
    assert.equal(lines.name, 'nope');
  });

  it('splits identifiers whose file name holds a semicolon', () => {
    assert.deepEqual(splitIdentifier('f;/tmp/a;b.py;12'), {
      name: 'f',
      filename: '/tmp/a;b.py',
      firstLine: 12
    });
    assert.deepEqual(splitIdentifier('root'), {
      name: 'root',
      filename: '',
      firstLine: 0
    });
  });
});

describe('sources: samples to estimated seconds', () => {
  it("gives each group its tasks' compute time over its samples", () => {
    const scale = sampleScale(
      new Map([
        ['inc', 2],
        ['add', 1],
        ['idle', 0]
      ]),
      new Map([
        ['inc', 100],
        ['add', 50],
        ['idle', 10],
        ['(all tasks)', 5]
      ])
    );
    assert.equal(scale.groups.get('inc'), 0.02);
    assert.equal(scale.groups.get('add'), 0.02);
    assert.equal(scale.groups.has('idle'), false);
    assert.equal(scale.groups.has('(all tasks)'), false);
    assert.equal(scale.fallback, 3 / 150); // over the groups with both
  });

  it('falls back to the sampling interval, else to nothing', () => {
    const samples = new Map([['x', 10]]);
    assert.equal(sampleScale(new Map(), samples, 0.005).fallback, 0.005);
    assert.equal(
      sampleScale(new Map([['x', 1]]), samples, 0.005).fallback,
      0.005
    );
    assert.equal(sampleScale(new Map(), samples).fallback, null);
    assert.equal(sampleScale(new Map(), samples, 0).fallback, null);
  });

  it('sums task durations per group name', () => {
    const names = ['inc', 'add', 'inc'];
    const seconds = taskSecondsByGroup(
      [0, 1, 2, 0],
      [0, 1, 2, 5],
      [1, 1.5, 4, 4], // the last row has stop < start: ignored
      4,
      id => names[id]
    );
    assert.deepEqual([...seconds].sort(), [
      ['add', 0.5],
      ['inc', 3]
    ]);
  });

  it("scales a panel run by its groups' tasks and samples", () => {
    const model = new ProfileModel();
    model.handle(runStart(1));
    model.handle(groupsMessage(1, ['inc', 'add']));
    model.handle(workersMessage(1, ['thread 1']));
    const t = tasksMessage(1, 0, [
      { group: 0, worker: 0, start: 0, stop: 0.5 },
      { group: 0, worker: 0, start: 0.5, stop: 1 },
      { group: 1, worker: 0, start: 1, stop: 1.25 }
    ]);
    model.handle(t.data, t.buffers);
    model.handle({
      type: 'stacks',
      run: 1,
      t_start: 0,
      t_end: 1,
      trees: { inc: incTree(), add: incTree() }
    });
    const scale = runSampleScale(model.runs[0]);
    const samples = model.runs[0].stacks.get('inc')!.count;
    assert.ok(Math.abs(scale.groups.get('inc')! - 1 / samples) < 1e-6);
    assert.ok(Math.abs(scale.groups.get('add')! - 0.25 / samples) < 1e-6);
  });
});

describe('sources: the rows of a source view', () => {
  const tree = () => merged('inc', incTree());

  it('lists every line of the source, with the samples beside it', () => {
    const table = sourceTable(collectLines(tree(), WORK), SOURCE);
    assert.equal(table.hasSource, true);
    assert.equal(table.file, 'Cell In[5]');
    assert.equal(table.name, 'work');
    assert.deepEqual(
      table.rows.map(r => [r.line, r.samples]),
      [
        [10, 0],
        [11, 8],
        [12, 0],
        [13, 4]
      ]
    );
    assert.equal(table.rows[2].text, SOURCE.text[2]); // text kept as it is: data
    assert.equal(table.maxSamples, 8);
    assert.ok(Math.abs(table.rows[1].share - 8 / 10) < 1e-12);
  });

  it('adds counted lines the text does not cover, in line order', () => {
    const short = { ...SOURCE, start: 12, text: ['    s = 1'] };
    const table = sourceTable(collectLines(tree(), WORK), short);
    assert.deepEqual(
      table.rows.map(r => [r.line, r.text, r.samples]),
      [
        [11, null, 8],
        [12, '    s = 1', 0],
        [13, null, 4]
      ]
    );
  });

  it('without a source: the counted lines only, named from the tree', () => {
    const table = sourceTable(collectLines(tree(), WORK), undefined);
    assert.equal(table.hasSource, false);
    assert.equal(table.file, 'work.py');
    assert.deepEqual(
      table.rows.map(r => [r.line, r.text, r.samples]),
      [
        [11, null, 8],
        [13, null, 4]
      ]
    );
  });
});
