import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  decodeMessage,
  IExportMessage,
  IResourcesMessage,
  IRunEndMessage,
  IStacksMessage,
  ITasksMessage,
  KernelMessage,
  ProtocolError
} from '../src/protocol';
import {
  cacheMessage,
  fixture,
  fixtureNames,
  groupsMessage,
  resourcesMessage,
  runStart,
  tasksMessage,
  tree,
  workersMessage
} from './helpers';

const TYPES = [
  'hello',
  'error',
  'run_start',
  'groups',
  'workers',
  'tasks',
  'resources',
  'cache',
  'progress',
  'stacks',
  'keys',
  'run_end',
  'dropped',
  'state',
  'export'
];

describe('protocol: shared fixtures (tests/fixtures/protocol)', () => {
  // kernel -> panel messages; panel_*.json are the panel's requests (checked in model tests)
  const names = fixtureNames().filter(n => !n.startsWith('panel_'));
  const skip = names.length === 0;

  it('decodes every kernel message fixture as its type', { skip }, () => {
    for (const name of names) {
      const { data, buffers } = fixture(name);
      const msg = decodeMessage(data, buffers);
      assert.ok(msg, `${name}: decoded to null`);
      assert.equal(msg.type, data.type, name);
    }
  });

  it('has a fixture for every message type', { skip }, () => {
    const types = new Set(names.map(n => fixture(n).data.type));
    for (const t of TYPES) {
      assert.ok(types.has(t), `no fixture of type ${t}`);
    }
  });

  it(
    'decodes columnar fixtures to the values the encoder wrote',
    { skip },
    () => {
      for (const name of ['tasks', 'resources', 'resources_source', 'cache']) {
        const { data, buffers, decoded } = fixture(name);
        const msg = decodeMessage(data, buffers) as unknown as Record<
          string,
          ArrayLike<number>
        >;
        const arrays = (decoded?.arrays ?? {}) as Record<string, number[]>;
        assert.ok(
          Object.keys(arrays).length > 0,
          `${name}: no decoded section`
        );
        for (const [column, values] of Object.entries(arrays)) {
          const got = Array.from(msg[column]);
          assert.equal(got.length, values.length, `${name}.${column}`);
          values.forEach((v, i) =>
            assert.ok(
              Math.abs(got[i] - v) <= 1e-6 * Math.max(1, Math.abs(v)),
              `${name}.${column}[${i}]`
            )
          );
        }
      }
    }
  );

  it('decodes the tasks fixture into columns of n rows', { skip }, () => {
    const { data, buffers } = fixture('tasks');
    const msg = decodeMessage(data, buffers) as ITasksMessage;
    for (const col of [
      msg.group,
      msg.worker,
      msg.status,
      msg.submit,
      msg.start,
      msg.stop
    ]) {
      assert.equal(col.length, msg.n);
    }
    for (let i = 0; i < msg.n; i++) {
      assert.ok(msg.submit[i] <= msg.start[i] && msg.start[i] <= msg.stop[i]);
    }
  });
});

describe('protocol 1.1: the source of resources batches', () => {
  it('decodes the resources_source fixture with its worker process', () => {
    const { data, buffers } = fixture('resources_source');
    const msg = decodeMessage(data, buffers) as IResourcesMessage;
    assert.equal(msg.type, 'resources');
    assert.equal(msg.source, 'tcp://127.0.0.1:40123');
    assert.equal(msg.n, 3);
    assert.deepEqual(Array.from(msg.cpu), [12.5, 99, 50.25]);
  });

  it("a batch without a source (protocol 1.0, the run's total) has source null", () => {
    const { data, buffers } = fixture('resources');
    assert.equal('source' in data, false);
    const total = decodeMessage(data, buffers) as IResourcesMessage;
    assert.equal(total.source, null);
    const wire = resourcesMessage(1, [{ time: 0, cpu: 1, memory: 2 }], 0, null);
    const explicit = decodeMessage(
      wire.data,
      wire.buffers
    ) as IResourcesMessage;
    assert.equal(explicit.source, null);
  });

  it('rejects a source that is not a string', () => {
    for (const source of [3, ['tcp://a'], { a: 1 }, true]) {
      const wire = resourcesMessage(1, [{ time: 0, cpu: 1, memory: 2 }]);
      assert.throws(
        () => decodeMessage({ ...wire.data, source }, wire.buffers),
        /"source" must be a string or null/
      );
    }
  });
});

describe('protocol: decoders', () => {
  it('decodes JSON messages', () => {
    const start = decodeMessage(runStart(3)) as KernelMessage;
    assert.deepEqual(start, {
      type: 'run_start',
      run: 3,
      t0: 1000.5,
      wall0: 1.7e9,
      options: { tasks: true },
      title: 'x.sum()'
    });
    assert.equal(
      decodeMessage(groupsMessage(3, ['inc', 'add']))?.type,
      'groups'
    );
    assert.equal(
      decodeMessage(workersMessage(3, ['thread 1']))?.type,
      'workers'
    );
    assert.deepEqual(decodeMessage({ type: 'state', paused: true }), {
      type: 'state',
      paused: true
    });
    assert.deepEqual(
      decodeMessage({ type: 'dropped', run: 'a', messages: 2, rows: 10 }),
      {
        type: 'dropped',
        run: 'a',
        messages: 2,
        rows: 10
      }
    );
    const end = decodeMessage({
      type: 'run_end',
      run: 3,
      summary: { tasks: 2 },
      dropped: { tasks: 0 },
      errors: []
    });
    assert.equal(end?.type, 'run_end');
    assert.deepEqual((end as IRunEndMessage).reduced, {});
    const reduced = decodeMessage({
      type: 'run_end',
      run: 3,
      summary: {},
      dropped: {},
      errors: [],
      reduced: { stacks: 'workers lack daskprofile: no stack samples' }
    }) as IRunEndMessage;
    assert.deepEqual(reduced.reduced, {
      stacks: 'workers lack daskprofile: no stack samples'
    });
  });

  it('decodes binary columns, adding nothing to the offsets', () => {
    const wire = tasksMessage(
      1,
      10,
      [
        { group: 0, worker: 1, submit: 100.0, start: 100.25, stop: 100.5 },
        { group: 1, worker: 0, status: 1, start: 101, stop: 102 }
      ],
      100
    );
    const msg = decodeMessage(wire.data, wire.buffers) as ITasksMessage;
    assert.equal(msg.n, 2);
    assert.equal(msg.first, 10);
    assert.deepEqual(Array.from(msg.group), [0, 1]);
    assert.deepEqual(Array.from(msg.status), [0, 1]);
    assert.deepEqual(Array.from(msg.start), [0.25, 1]);
    const res = resourcesMessage(1, [{ time: 0.5, cpu: 150, memory: 2 ** 40 }]);
    assert.equal(decodeMessage(res.data, res.buffers)?.type, 'resources');
    const cache = cacheMessage(1, [{ time: 0.5, group: 2, metric: 1e6 }]);
    assert.equal(decodeMessage(cache.data, cache.buffers)?.type, 'cache');
  });

  it('copies unaligned buffers rather than failing', () => {
    const wire = tasksMessage(1, 0, [
      { group: 7, worker: 0, start: 0, stop: 1 }
    ]);
    const bytes = new Uint8Array(wire.buffers[4].byteLength + 1);
    bytes.set(
      new Uint8Array(wire.buffers[4].buffer, wire.buffers[4].byteOffset, 4),
      1
    );
    wire.buffers[4] = new DataView(bytes.buffer, 1, 4);
    const msg = decodeMessage(wire.data, wire.buffers) as ITasksMessage;
    assert.equal(msg.start[0], 0);
    assert.equal(msg.group[0], 7);
  });

  it('decodes stack trees recursively and exports as bytes', () => {
    const msg = decodeMessage({
      type: 'stacks',
      run: 1,
      t_start: 0,
      t_end: 1,
      trees: { inc: tree('root', 3, [tree('f', 3)]) }
    }) as IStacksMessage;
    assert.equal(msg.trees.inc.children[0].name, 'f');
    const exp = decodeMessage(
      {
        type: 'export',
        run: 1,
        format: 'trace',
        filename: 'a.json',
        mime: 'application/json'
      },
      [new DataView(new TextEncoder().encode('{}').buffer)]
    ) as IExportMessage;
    assert.equal(new TextDecoder().decode(exp.bytes), '{}');
  });

  it('ignores unknown types', () => {
    assert.equal(decodeMessage({ type: 'future_thing', x: 1 }), null);
    assert.equal(decodeMessage({ type: 'toString' }), null);
  });

  it('rejects malformed messages naming the field', () => {
    const bad: [unknown, DataView[]?][] = [
      [null],
      [[1, 2]],
      [{ type: 3 }],
      [{ ...runStart(1), t0: 'soon' }],
      [{ ...runStart(1), run: null }],
      [{ ...groupsMessage(1, ['a']), names: [] }],
      [{ ...groupsMessage(1, ['a']), ids: [-1] }],
      [{ type: 'progress', run: 1, groups: [1], total: [2], done: [1] }],
      [{ type: 'keys', run: 1, indices: [1, 2], keys: ['a'] }],
      [
        {
          type: 'stacks',
          run: 1,
          t_start: 0,
          t_end: 1,
          trees: { a: { identifier: 'x' } }
        }
      ],
      [{ type: 'state', paused: 'yes' }],
      [
        {
          type: 'run_end',
          run: 1,
          summary: {},
          dropped: {},
          errors: [],
          reduced: ['stacks']
        }
      ],
      [
        {
          type: 'run_end',
          run: 1,
          summary: {},
          dropped: {},
          errors: [],
          reduced: { stacks: 3 }
        }
      ],
      [{ type: 'export', run: 1, format: 'html', filename: 'a', mime: 'b' }, []]
    ];
    for (const [data, buffers] of bad) {
      assert.throws(
        () => decodeMessage(data, buffers ?? []),
        ProtocolError,
        JSON.stringify(data)
      );
    }
    const wire = tasksMessage(1, 0, [
      { group: 0, worker: 0, start: 0, stop: 1 }
    ]);
    assert.throws(
      () => decodeMessage({ ...wire.data, n: 2 }, wire.buffers),
      /expected 4/
    );
    assert.throws(
      () => decodeMessage(wire.data, wire.buffers.slice(0, 5)),
      /6 columns but 5 buffers/
    );
    assert.throws(
      () =>
        decodeMessage(
          {
            ...wire.data,
            columns: ['group', 'worker', 'status', 'submit', 'start', 'end']
          },
          wire.buffers
        ),
      /missing column "stop"/
    );
  });
});
