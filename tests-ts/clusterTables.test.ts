import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  actionColor,
  actionName,
  actionText,
  bandwidth,
  ExceptionTable,
  leftText,
  MemorySeries,
  pairBandwidth,
  rerunText,
  sumMemory,
  TransferTable,
  workersLine
} from '../src/clusterTables';
import { ProfileModel } from '../src/model';
import {
  IClusterWorker,
  IExceptionsMessage,
  IMemoryMessage,
  ITransfersMessage,
  decodeMessage
} from '../src/protocol';
import {
  actionsMessage,
  clusterWorker,
  exceptionRow,
  fixture,
  groupsMessage,
  memoryMessage,
  runStart,
  tasksMessage,
  transfersMessage,
  workersMessage
} from './helpers';

interface IWireLike {
  data: unknown;
  buffers: DataView[];
}

function feed(model: ProfileModel, wire: IWireLike | object): boolean {
  if ('data' in wire && 'buffers' in wire) {
    return model.handle(wire.data, wire.buffers);
  }
  return model.handle(wire);
}

/** A cluster run: 2 workers x 2 threads (lanes 0..3). */
function clusterRun(): ProfileModel {
  const model = new ProfileModel();
  feed(model, runStart(1));
  feed(model, groupsMessage(1, ['inc', 'add']));
  feed(
    model,
    workersMessage(
      1,
      [
        'tcp://127.0.0.1:1 thread 0',
        'tcp://127.0.0.1:1 thread 1',
        'tcp://127.0.0.1:2 thread 0',
        'tcp://127.0.0.1:2 thread 1'
      ],
      ['worker', 'worker', 'worker', 'worker']
    )
  );
  return model;
}

function decoded<T>(wire: IWireLike): T {
  return decodeMessage(wire.data, wire.buffers) as T;
}

function series(rows: [number, number, number, number][]): MemorySeries {
  const s = new MemorySeries();
  s.append(
    decoded<IMemoryMessage>(
      memoryMessage(
        1,
        'w',
        rows.map(([time, managed, unmanaged, spilled]) => ({
          time,
          managed,
          unmanaged,
          spilled
        }))
      )
    )
  );
  return s;
}

function worker(extra: Partial<IClusterWorker> = {}): IClusterWorker {
  return {
    address: 'tcp://a:1',
    name: '0',
    host: 'a',
    threads: 2,
    memoryLimit: 0,
    joined: null,
    left: null,
    reason: null,
    ...extra
  };
}

describe('cluster tables: the model applies protocol 1.2 messages', () => {
  it('applies the shared fixtures as one run', () => {
    const model = new ProfileModel();
    for (const name of [
      'run_start',
      'groups',
      'workers',
      'workers_actions',
      'actions',
      'memory',
      'transfers',
      'exceptions',
      'cluster_workers'
    ]) {
      const { data, buffers } = fixture(name);
      assert.equal(model.handle(data, buffers), true, name);
    }
    const run = model.current!;
    const t = run.tables;
    assert.equal(t.actions.length, 4);
    assert.deepEqual(Array.from(t.actions.index.view()), [40, 41, 42, 43]);
    assert.equal(t.actions.lanes.get(3)!.length, 2);
    assert.deepEqual(t.actions.kinds(), [0, 1, 3]);
    assert.ok(run.lanes.includes(3), 'the address lane of workers_actions');
    assert.equal(t.memory.get('tcp://127.0.0.1:40123')!.limit, 4e9);
    // the outgoing row is the same transfer as an incoming one: counted once
    assert.equal(t.transfers.length, 2);
    assert.equal(t.transfers.outgoing, 1);
    assert.equal(t.transfers.totalBytes, 8e6 + 12345678);
    assert.equal(t.exceptions.total, 5);
    assert.equal(t.workers.length, 2);
    const s = run.summary();
    assert.equal(s.clusterWorkers, '1 (+1 joined, 1 lost)');
    assert.equal(s.transferred, 8e6 + 12345678);
    const [lo, hi] = run.extent();
    assert.ok(lo <= 0 && hi >= 1, `${lo} ${hi}`);
  });

  it('keeps actions by lane, sorted for drawing, in the run extent', () => {
    const model = clusterRun();
    feed(
      model,
      actionsMessage(
        1,
        0,
        [
          { worker: 2, action: 0, group: 1, start: 1.0, stop: 1.5, bytes: 1e6 },
          { worker: 2, action: 2, start: 0.2, stop: 0.3 },
          { worker: 0, action: 3, start: 0.1, stop: 0.1001 }
        ],
        0.1
      )
    );
    const a = model.current!.tables.actions;
    const lane = a.lanes.get(2)!;
    assert.equal(lane.length, 2);
    // the lane finds the later-starting row first in start order
    assert.equal(lane.hitTest(0.25, 0), 1);
    assert.equal(lane.hitTest(1.2, 0), 0);
    assert.ok(Number.isNaN(a.bytes.data[1]));
    assert.deepEqual(a.counts, [1, 0, 1, 1]);
    const [lo, hi] = model.current!.extent();
    assert.equal(lo, 0);
    assert.ok(Math.abs(hi - 1.5) < 1e-6, String(hi)); // float32 offsets
  });

  it('gives an action on a lane never named a placeholder lane', () => {
    const model = clusterRun();
    feed(
      model,
      actionsMessage(1, 0, [{ worker: 9, action: 0, start: 0, stop: 1 }])
    );
    const run = model.current!;
    assert.deepEqual(run.workers.get(9), {
      id: 9,
      label: 'worker 9',
      kind: 'unknown'
    });
    assert.equal(run.lanes.filter(l => l === 9).length, 1);
  });

  it('keeps memory per worker and transfers by address list', () => {
    const model = clusterRun();
    feed(
      model,
      memoryMessage(
        1,
        'tcp://127.0.0.1:1',
        [
          { time: 0, managed: 1e8, unmanaged: 5e7 },
          { time: 1, managed: 2e8, unmanaged: 5e7, spilled: 3e8 }
        ],
        1e9
      )
    );
    feed(
      model,
      transfersMessage(
        1,
        ['tcp://127.0.0.1:1'],
        [{ start: 0, stop: 0.5, bytes: 100, source: 0, destination: 1 }]
      )
    );
    feed(
      model,
      transfersMessage(
        1,
        ['tcp://127.0.0.1:2'],
        [{ start: 1, stop: 1.5, bytes: NaN, source: 1, destination: 0 }]
      )
    );
    const t = model.current!.tables;
    const m = t.memory.get('tcp://127.0.0.1:1')!;
    assert.equal(m.length, 2);
    assert.equal(m.maxTotal, 5.5e8);
    assert.deepEqual(t.transfers.addresses, [
      'tcp://127.0.0.1:1',
      'tcp://127.0.0.1:2'
    ]);
    assert.equal(t.transfers.address(1), 'tcp://127.0.0.1:2');
    assert.equal(t.transfers.address(5), 'address 5');
    assert.equal(t.transfers.totalBytes, 100, 'unknown sizes add nothing');
    assert.equal(t.summedLimit(), 1e9);
  });

  it('replaces the worker list with each cluster_workers message', () => {
    const model = clusterRun();
    const msg = (workers: unknown[]) => ({
      type: 'cluster_workers',
      run: 1,
      workers
    });
    feed(model, msg([clusterWorker('tcp://a:1'), clusterWorker('tcp://a:2')]));
    assert.equal(model.current!.summary().clusterWorkers, '2');
    // looked up before the list is replaced: the lookup follows the new list
    assert.equal(model.current!.tables.worker('tcp://a:2')!.left, null);
    assert.equal(model.current!.tables.worker('tcp://a:3'), undefined);
    feed(
      model,
      msg([
        clusterWorker('tcp://a:1'),
        clusterWorker('tcp://a:2', { left: 2.5, reason: 'lost' }),
        clusterWorker('tcp://a:3', { joined: 2.6 })
      ])
    );
    const run = model.current!;
    assert.equal(run.summary().clusterWorkers, '2 (+1 joined, 1 lost)');
    assert.equal(run.tables.worker('tcp://a:2')!.left, 2.5);
    assert.equal(run.tables.worker('tcp://a:3')!.joined, 2.6);
    // an address listed twice: the first entry, as a search of the list finds
    feed(
      model,
      msg([
        clusterWorker('tcp://a:4', { name: 'first' }),
        clusterWorker('tcp://a:4', { name: 'second' })
      ])
    );
    assert.equal(run.tables.worker('tcp://a:4')!.name, 'first');
    assert.equal(run.tables.worker('tcp://a:1'), undefined);
  });

  it('a run started again (replay) starts with empty tables', () => {
    const model = clusterRun();
    feed(
      model,
      actionsMessage(1, 0, [{ worker: 0, action: 0, start: 0, stop: 1 }])
    );
    feed(model, {
      type: 'exceptions',
      run: 1,
      first: 0,
      rows: [exceptionRow('a')]
    });
    feed(model, runStart(1));
    const t = model.current!.tables;
    assert.equal(t.actions.length, 0);
    assert.equal(t.exceptions.total, 0);
  });

  it('a 1.1 stream (none of these messages) leaves the tables empty', () => {
    const model = clusterRun();
    feed(
      model,
      tasksMessage(1, 0, [{ group: 0, worker: 0, start: 0, stop: 1 }])
    );
    const run = model.current!;
    assert.equal(run.tables.extent(), null);
    const s = run.summary();
    assert.equal(s.clusterWorkers, '');
    assert.equal(s.transferred, null);
  });

  it('rejects 1.2 rows for an unknown run, and malformed ones, keeping its state', () => {
    const model = clusterRun();
    const errors: unknown[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => errors.push(args);
    try {
      assert.equal(
        feed(
          model,
          actionsMessage(2, 0, [{ worker: 0, action: 0, start: 0, stop: 1 }])
        ),
        false
      );
      assert.equal(
        feed(model, { type: 'memory', run: 1, n: 0, base: 0, columns: [] }),
        false
      );
    } finally {
      console.error = original;
    }
    assert.equal(errors.length, 2);
    assert.equal(model.rejected, 2);
    assert.equal(model.current!.tables.actions.length, 0);
  });
});

describe('cluster tables: pure helpers', () => {
  it('sums memory of workers sampled at different times, each held until its next', () => {
    const a = series([
      [0, 10, 1, 0],
      [2, 20, 2, 5]
    ]);
    const b = series([
      [1, 100, 10, 0],
      [2, 50, 10, 0]
    ]);
    const s = sumMemory([
      { series: a, end: null },
      { series: b, end: 3 }
    ]);
    assert.equal(s.n, 4);
    assert.deepEqual(Array.from(s.time.subarray(0, s.n)), [0, 1, 2, 3]);
    assert.deepEqual(Array.from(s.managed.subarray(0, s.n)), [10, 110, 70, 20]);
    assert.deepEqual(Array.from(s.unmanaged.subarray(0, s.n)), [1, 11, 12, 2]);
    assert.deepEqual(Array.from(s.spilled.subarray(0, s.n)), [0, 0, 5, 5]);
    assert.equal(sumMemory([]).n, 0);
  });

  it('bins bandwidth: bytes spread over each transfer, conserved, window-clipped', () => {
    const t = new TransferTable();
    t.append(
      decoded<ITransfersMessage>(
        transfersMessage(
          1,
          [],
          [
            { start: 0, stop: 2, bytes: 200 }, // 100 B/s over [0, 2]
            { start: 1, stop: 1, bytes: 50 }, // instantaneous: its start's bin
            { start: 3, stop: 3.5, bytes: NaN }, // size not known
            { start: 0, stop: 1, bytes: 999, incoming: 0 } // the source's log
          ]
        )
      )
    );
    const rates = bandwidth(t, 0, 4, 4);
    assert.deepEqual(Array.from(rates), [100, 150, 0, 0]);
    const fine = bandwidth(t, 0, 4, 50);
    const total = fine.reduce((sum, r) => sum + r * (4 / 50), 0);
    assert.ok(Math.abs(total - 250) < 1e-9, String(total));
    assert.deepEqual(Array.from(bandwidth(t, 1.5, 2.5, 2)), [100, 0]);
    assert.equal(bandwidth(t, 1, 1, 10).length, 10);
  });

  it('keeps exceptions in index order; a row sent again replaces itself', () => {
    const table = new ExceptionTable();
    const msg = (first: number, keys: string[], dropped = 0) =>
      decodeMessage({
        type: 'exceptions',
        run: 1,
        first,
        rows: keys.map(k => exceptionRow(k)),
        dropped
      }) as IExceptionsMessage;
    table.add(msg(2, ['c', 'd']));
    table.add(msg(0, ['a', 'b'], 4));
    table.add(msg(1, ['B']));
    assert.deepEqual(
      table.rows.map(r => [r.index, r.key]),
      [
        [0, 'a'],
        [1, 'B'],
        [2, 'c'],
        [3, 'd']
      ]
    );
    assert.equal(table.dropped, 4);
    assert.equal(table.total, 8);
  });

  it('says how many workers the run had, joined and left, by reason', () => {
    assert.equal(workersLine([]), '0');
    assert.equal(workersLine([worker(), worker()]), '2');
    assert.equal(
      workersLine([
        worker(),
        worker({ left: 3.2, reason: 'lost' }),
        worker({ joined: 1 })
      ]),
      '2 (+1 joined, 1 lost)'
    );
    assert.equal(
      workersLine([
        worker({ left: 1, reason: 'retired' }),
        worker({ left: 2, reason: null }),
        worker({ joined: 0.5, left: 3, reason: 'timed out' })
      ]),
      '2 (+1 joined, 1 retired, 1 left, 1 timed out)'
    );
  });

  it('words when a worker left, and what an action was', () => {
    assert.equal(leftText(worker()), '');
    assert.equal(
      leftText(worker({ left: 3.2, reason: 'lost' })),
      'lost at 3.2 s'
    );
    assert.equal(leftText(worker({ left: 0.5 })), 'left at 500 ms');
    assert.equal(
      actionText(0, 12.3 * 1024 * 1024, 0.0041, 'x'),
      'transfer 12.3 MiB in 4.1 ms (group x)'
    );
    assert.equal(
      actionText(3, NaN, 0.0003, '<b>'),
      'deserialize in 300 µs (group <b>)'
    );
    assert.equal(actionName(7), 'action 7');
    assert.deepEqual([0, 1, 2, 3, 9].map(actionColor), [
      '#d62728',
      '#ff7f0e',
      '#ff7f0e',
      '#7f7f7f',
      '#7f7f7f'
    ]);
  });
});

describe('cluster tables: re-runs and bandwidth per pair', () => {
  it('marks the task rows of the reruns fixture, with the hover line', () => {
    const model = new ProfileModel();
    for (const name of ['run_start', 'groups', 'workers', 'tasks', 'reruns']) {
      const { data, buffers } = fixture(name);
      assert.equal(model.handle(data, buffers), true, name);
    }
    const reruns = model.current!.tables.reruns;
    assert.equal(reruns.size, 2);
    assert.deepEqual(reruns.get(101), {
      why: 'lost',
      worker: 'tcp://127.0.0.1:40125'
    });
    assert.equal(reruns.get(100), undefined);
    assert.equal(
      rerunText(reruns.get(104)!),
      'interrupted on tcp://127.0.0.1:40125'
    );
  });

  it('refuses a reruns message whose lists do not match', () => {
    const { data } = fixture('reruns');
    const bad = [
      { ...(data as object), why: ['lost'] },
      { ...(data as object), rows: [1.5, 2] },
      { ...(data as object), workers: null }
    ];
    for (const d of bad) {
      assert.throws(() => decodeMessage(d), /reruns/);
    }
  });

  it('sums the incoming transfers per pair of workers, most bytes first', () => {
    const table = new TransferTable();
    table.append(
      decoded<ITransfersMessage>(
        transfersMessage(
          1,
          ['tcp://a:1', 'tcp://b:2', 'tcp://c:3'],
          [
            { start: 0, stop: 1, source: 0, destination: 1, bytes: 100 },
            { start: 1, stop: 3, source: 0, destination: 1, bytes: 300 },
            { start: 0, stop: 0, source: 2, destination: 1, bytes: 1000 },
            { start: 0, stop: 2, source: 1, destination: 0, bytes: NaN },
            {
              start: 0,
              stop: 1,
              source: 1,
              destination: 0,
              bytes: 7,
              incoming: 0
            }
          ]
        )
      )
    );
    const pairs = pairBandwidth(table);
    assert.deepEqual(
      pairs.map(p => [p.source, p.destination, p.bytes, p.transfers]),
      [
        ['tcp://c:3', 'tcp://b:2', 1000, 1],
        ['tcp://a:1', 'tcp://b:2', 400, 2],
        ['tcp://b:2', 'tcp://a:1', 0, 1] // unknown size; the outgoing row not counted
      ]
    );
    assert.equal(pairs[0].seconds, 1e-3); // an instant transfer counts 1 ms
    assert.equal(pairs[0].bandwidth, 1e6);
    assert.equal(pairs[1].seconds, 3);
    assert.ok(Math.abs(pairs[1].bandwidth - 400 / 3) < 1e-9);
    assert.deepEqual(pairBandwidth(new TransferTable()), []);
  });
});

describe('bandwidth from the bytes moved by each time', () => {
  /** Bandwidth the direct way: every transfer's bytes spread over the bins it overlaps. */
  function direct(
    t: TransferTable,
    v0: number,
    v1: number,
    bins: number
  ): number[] {
    const out = new Array(bins).fill(0);
    const width = (v1 - v0) / bins;
    for (let i = 0; i < t.length; i++) {
      const [s, e, b] = [t.start.data[i], t.stop.data[i], t.bytes.data[i]];
      if (!(b > 0) || e < v0 || s >= v1) {
        continue;
      }
      for (let k = 0; k < bins; k++) {
        const lo = v0 + k * width;
        const hi = lo + width;
        if (e > s) {
          out[k] +=
            (b * Math.max(0, Math.min(e, hi) - Math.max(s, lo))) / (e - s);
        } else if (s >= lo && s < hi) {
          out[k] += b;
        }
      }
    }
    return out.map(x => x / width);
  }

  it('matches a pass over every transfer, rows arriving out of order', () => {
    let seed = 11;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const rows: {
      start: number;
      stop: number;
      bytes: number;
      incoming: number;
    }[] = [];
    for (let i = 0; i < 3000; i++) {
      const start = 100 * rand();
      const long = i % 400 === 0;
      const duration = i % 7 === 0 ? 0 : long ? 30 * rand() : 0.05 * rand();
      const bytes = i % 50 === 0 ? NaN : i % 97 === 0 ? 0 : 1e6 * rand();
      rows.push({
        start,
        stop: start + duration,
        bytes,
        incoming: i % 5 === 0 ? 0 : 1
      });
    }
    // batches in no order of time, like the logs of several workers
    const t = new TransferTable();
    for (let b = 0; b < rows.length; b += 250) {
      t.append(
        decoded<ITransfersMessage>(
          transfersMessage(1, [], rows.slice(b, b + 250), 50)
        )
      );
    }
    const starts = t.moved.starts.view();
    assert.ok(starts.every((s, i) => i === 0 || starts[i - 1] <= s));
    assert.ok(t.moved.length > 2000 && t.moved.length < t.length);
    for (const [v0, v1, bins] of [
      [0, 100, 50],
      [-10, 140, 7],
      [20.5, 20.9, 50],
      [60, 61, 3]
    ]) {
      const fast = Array.from(bandwidth(t, v0, v1, bins));
      const slow = direct(t, v0, v1, bins);
      const scale = Math.max(1, ...slow);
      fast.forEach((x, k) =>
        assert.ok(
          Math.abs(x - slow[k]) <= 1e-9 * scale,
          `${v0}..${v1} bin ${k}: ${x} vs ${slow[k]}`
        )
      );
    }
  });
});
