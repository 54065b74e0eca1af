import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  checkHello,
  decodeMessage,
  IActionsMessage,
  IClusterWorkersMessage,
  IExceptionsMessage,
  IExportMessage,
  IMemoryMessage,
  ITransfersMessage,
  IResourcesMessage,
  IRunEndMessage,
  IStacksMessage,
  ITasksMessage,
  KernelMessage,
  ProtocolError
} from '../src/protocol';
import {
  actionsMessage,
  cacheMessage,
  clusterWorker,
  exceptionRow,
  fixture,
  fixtureNames,
  groupsMessage,
  memoryMessage,
  resourcesMessage,
  runStart,
  tasksMessage,
  transfersMessage,
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
  'export',
  'actions',
  'memory',
  'exceptions',
  'cluster_workers',
  'transfers',
  'spans',
  'sources'
];

/** Columnar fixtures: their `decoded` section holds every column's values. */
const COLUMNAR = [
  'tasks',
  'tasks_span',
  'resources',
  'resources_source',
  'cache',
  'actions',
  'memory',
  'transfers'
];

/** `got` matches the encoder's `want` (null in JSON: NaN, a value not known). */
function close(got: number, want: number | null): boolean {
  if (want === null) {
    return Number.isNaN(got);
  }
  return Math.abs(got - want) <= 1e-6 * Math.max(1, Math.abs(want));
}

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
      for (const name of COLUMNAR) {
        const { data, buffers, decoded } = fixture(name);
        const msg = decodeMessage(data, buffers) as unknown as Record<
          string,
          ArrayLike<number>
        >;
        const arrays = (decoded?.arrays ?? {}) as Record<
          string,
          (number | null)[]
        >;
        assert.ok(
          Object.keys(arrays).length > 0,
          `${name}: no decoded section`
        );
        for (const [column, values] of Object.entries(arrays)) {
          const got = Array.from(msg[column]);
          assert.equal(got.length, values.length, `${name}.${column}`);
          values.forEach((v, i) =>
            assert.ok(close(got[i], v), `${name}.${column}[${i}]: ${got[i]}`)
          );
        }
        // times: base + offset, in seconds since the run's t0
        const base = Number(data.base);
        const times = (decoded?.times ?? {}) as Record<string, number[]>;
        for (const [column, values] of Object.entries(times)) {
          values.forEach((v, i) =>
            assert.ok(
              close(msg[column][i] + base, v),
              `${name}.${column} time [${i}]`
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

describe('protocol 1.2: the cluster tables', () => {
  it('decodes the actions fixture, bytes not known as NaN', () => {
    const { data, buffers } = fixture('actions');
    const msg = decodeMessage(data, buffers) as IActionsMessage;
    assert.equal(msg.type, 'actions');
    assert.equal(msg.first, 40);
    assert.deepEqual(Array.from(msg.worker), [0, 1, 3, 3]);
    assert.deepEqual(Array.from(msg.action), [0, 0, 1, 3]);
    assert.equal(msg.bytes[0], 8e6);
    assert.ok(Number.isNaN(msg.bytes[3]));
  });

  it('decodes the memory fixture: one worker, its limit', () => {
    const { data, buffers } = fixture('memory');
    const msg = decodeMessage(data, buffers) as IMemoryMessage;
    assert.equal(msg.source, 'tcp://127.0.0.1:40123');
    assert.equal(msg.limit, 4e9);
    assert.deepEqual(Array.from(msg.spilled), [0, 0, 1.5e8]);
  });

  it('decodes the transfers fixture: new addresses, which end logged each row', () => {
    const { data, buffers } = fixture('transfers');
    const msg = decodeMessage(data, buffers) as ITransfersMessage;
    assert.deepEqual(msg.addresses, [
      'tcp://127.0.0.1:40123',
      'tcp://127.0.0.1:40125'
    ]);
    assert.deepEqual(Array.from(msg.incoming), [1, 1, 0]);
    assert.deepEqual(Array.from(msg.source), [0, 1, 1]);
  });

  it("decodes the exceptions fixture, the kernel's text as it is", () => {
    const msg = decodeMessage(fixture('exceptions').data) as IExceptionsMessage;
    assert.equal(msg.first, 0);
    assert.equal(msg.dropped, 3);
    assert.equal(msg.rows.length, 2);
    assert.equal(msg.rows[0].type, 'ZeroDivisionError');
    assert.match(msg.rows[0].traceback, /^Traceback/);
    assert.equal(msg.rows[1].message, '<script>alert(1)</script>');
    assert.equal(msg.rows[1].key, '<img src=x onerror=alert(1)>');
  });

  it('decodes the cluster_workers fixture: who joined, who left and why', () => {
    const msg = decodeMessage(
      fixture('cluster_workers').data
    ) as IClusterWorkersMessage;
    assert.deepEqual(msg.workers[1], {
      address: 'tcp://127.0.0.1:40125',
      name: '1',
      host: '127.0.0.1',
      threads: 2,
      memoryLimit: 4e9,
      joined: 0.25,
      left: 3.2,
      reason: 'lost'
    });
    assert.equal(msg.workers[0].joined, null);
    assert.equal(msg.workers[0].reason, null);
  });

  it('takes a numeric worker name as text, an absent dropped as 0', () => {
    const w = decodeMessage({
      type: 'cluster_workers',
      run: 1,
      workers: [clusterWorker('tcp://a:1', { name: 7 })]
    }) as IClusterWorkersMessage;
    assert.equal(w.workers[0].name, '7');
    const e = decodeMessage({
      type: 'exceptions',
      run: 1,
      first: 0,
      rows: []
    }) as IExceptionsMessage;
    assert.equal(e.dropped, 0);
  });

  it('rejects malformed 1.2 messages naming the field', () => {
    const memory = memoryMessage(1, 'tcp://a:1', [{ time: 0, managed: 1 }]);
    const actions = actionsMessage(1, 0, [
      { worker: 0, action: 0, start: 0, stop: 1 }
    ]);
    const transfers = transfersMessage(
      1,
      ['a', 'b'],
      [{ start: 0, stop: 1, bytes: 10 }]
    );
    const exceptions = (rows: unknown) => ({
      type: 'exceptions',
      run: 1,
      first: 0,
      rows,
      dropped: 0
    });
    const workers = (w: unknown) => ({
      type: 'cluster_workers',
      run: 1,
      workers: [w]
    });
    const bad: [unknown, DataView[], RegExp][] = [
      [{ ...memory.data, source: null }, memory.buffers, /"source"/],
      [{ ...memory.data, limit: '4 GB' }, memory.buffers, /"limit"/],
      [
        { ...actions.data, columns: ['worker', 'action', 'group', 'start'] },
        actions.buffers.slice(0, 4),
        /missing column "stop"/
      ],
      [{ ...actions.data, n: 2 }, actions.buffers, /expected 4/],
      [{ ...actions.data, first: -1 }, actions.buffers, /"first"/],
      [{ ...transfers.data, addresses: [1] }, transfers.buffers, /addresses/],
      [exceptions('x'), [], /"rows" must be a list of objects/],
      [
        exceptions([exceptionRow('k', { message: undefined })]),
        [],
        /rows\[0\]: "message"/
      ],
      [exceptions([exceptionRow('k', { time: 'late' })]), [], /"time"/],
      [{ ...exceptions([]), dropped: -2 }, [], /"dropped"/],
      [workers(clusterWorker('a', { name: {} })), [], /"name"/],
      [workers(clusterWorker('a', { threads: -1 })), [], /"threads"/],
      [workers(clusterWorker('a', { joined: 'soon' })), [], /"joined"/],
      [workers(clusterWorker('a', { reason: 3 })), [], /"reason"/],
      [workers(clusterWorker('a', { address: null })), [], /"address"/],
      [{ type: 'cluster_workers', run: 1, workers: {} }, [], /"workers"/]
    ];
    for (const [data, buffers, why] of bad) {
      assert.throws(
        () => decodeMessage(data, buffers),
        (e: unknown) => e instanceof ProtocolError && why.test(e.message),
        JSON.stringify(data)
      );
    }
  });

  it('still connects to a 1.1 kernel (which sends none of these)', () => {
    const older = { ...fixture('hello').data, protocol: '1.1' };
    assert.equal(checkHello(older).status, 'connected');
  });
});
