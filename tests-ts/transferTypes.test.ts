/**
 * Protocol 1.3's type of the data each transfer moved (the `type` column and `types` of
 * `transfers` batches): decoded from the shared fixture, kept by the transfer table and
 * summed per type for the panel's bandwidth table; and the lanes of a worker that joined
 * or left mid-run (where they are empty, and the hover text).
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  joinedText,
  lifeText,
  NO_TYPE,
  TransferTable,
  typeBandwidth
} from '../src/clusterTables';
import { absences, absentAt } from '../src/lanes';
import { ProfileModel } from '../src/model';
import {
  decodeMessage,
  IClusterWorker,
  ITransfersMessage
} from '../src/protocol';
import { fixture, IWire, runStart, transfersMessage } from './helpers';

/** `wire` (a transfers batch) with a `type` column of `ids` and new type names `types`. */
function typed(wire: IWire, ids: number[], types: unknown): IWire {
  const columns = [...(wire.data.columns as string[]), 'type'];
  const column = new Uint16Array(ids);
  return {
    data: { ...wire.data, columns, types },
    buffers: [...wire.buffers, new DataView(column.buffer)]
  };
}

function decode(wire: IWire): ITransfersMessage {
  return decodeMessage(wire.data, wire.buffers) as ITransfersMessage;
}

function worker(joined: number | null, left: number | null): IClusterWorker {
  return {
    address: 'tcp://10.0.0.3:4003',
    name: '2',
    host: '10.0.0.3',
    threads: 2,
    memoryLimit: 0,
    joined,
    left,
    reason: left === null ? null : 'lost'
  };
}

describe('transfers: the type of the data moved (protocol 1.3)', () => {
  it('decodes the transfers_type fixture: type ids and new names, as text', () => {
    const wire = fixture('transfers_type');
    const msg = decode(wire);
    assert.deepEqual(msg.types, ['numpy.ndarray', '<b>pandas.DataFrame</b>']);
    const want = (wire.decoded?.arrays as Record<string, number[]>).type;
    assert.deepEqual(Array.from(msg.dataType ?? []), want);
    assert.deepEqual(want, [0, 1, 1]);
    assert.deepEqual(Array.from(msg.source), [0, 1, 1]);
  });

  it('decodes a 1.2 batch (no type column) with no types', () => {
    const msg = decode(fixture('transfers'));
    assert.equal(msg.dataType, null);
    assert.deepEqual(msg.types, []);
  });

  it('rejects a typed batch without its type names, naming the field', () => {
    const base = transfersMessage(
      1,
      ['a', 'b'],
      [{ start: 0, stop: 1, bytes: 1 }]
    );
    assert.throws(() => decode(typed(base, [0], undefined)), /"types"/);
    assert.throws(() => decode(typed(base, [0], [3])), /"types"/);
    assert.throws(() => decode(typed(base, [0, 1], ['x'])), /"type"/);
  });

  it('sums incoming transfers per type name across batches, most bytes first', () => {
    const table = new TransferTable();
    const rows = [
      { start: 0, stop: 1, bytes: 100 },
      { start: 1, stop: 3, bytes: 300 },
      { start: 0, stop: 0, bytes: 1000 },
      { start: 0, stop: 2, bytes: NaN },
      { start: 0, stop: 1, bytes: 7, incoming: 0 } // the other end's row: not counted
    ];
    table.append(
      decode(
        typed(
          transfersMessage(1, ['tcp://a:1', 'tcp://b:2'], rows),
          [0, 0, 1, 2, 1],
          ['numpy.ndarray', '<b>x</b>', '']
        )
      )
    );
    // a later batch: ids go on in the run's list; a name sent again sums with its own
    table.append(
      decode(
        typed(
          transfersMessage(1, [], [{ start: 4, stop: 5, bytes: 50 }]),
          [3],
          ['numpy.ndarray']
        )
      )
    );
    assert.deepEqual(table.types, [
      'numpy.ndarray',
      '<b>x</b>',
      '',
      'numpy.ndarray'
    ]);
    assert.equal(table.typed, 5);
    const types = typeBandwidth(table);
    assert.deepEqual(
      types.map(t => [t.type, t.bytes, t.transfers]),
      [
        ['<b>x</b>', 1000, 1],
        ['numpy.ndarray', 450, 3],
        ['(unknown)', 0, 1]
      ]
    );
    assert.equal(types[0].seconds, 1e-3); // an instant transfer counts 1 ms
    assert.equal(types[0].bandwidth, 1e6);
    assert.equal(types[1].seconds, 4);
    assert.equal(types[1].bandwidth, 450 / 4);
  });

  it('has no table per type for transfers from a kernel older than 1.3', () => {
    const table = new TransferTable();
    table.append(
      decode(transfersMessage(1, ['a', 'b'], [{ start: 0, stop: 1, bytes: 9 }]))
    );
    assert.equal(table.type.data[0], NO_TYPE);
    assert.equal(table.typed, 0);
    assert.deepEqual(typeBandwidth(table), []);
    assert.deepEqual(typeBandwidth(new TransferTable()), []);
  });

  it('keeps the run type names the model is sent', () => {
    const model = new ProfileModel();
    assert.ok(model.handle(runStart('run-1')));
    const wire = fixture('transfers_type');
    assert.ok(model.handle(wire.data, wire.buffers));
    const transfers = model.current?.tables.transfers;
    assert.ok(transfers);
    assert.equal(transfers.length, 2); // incoming rows
    assert.deepEqual(
      typeBandwidth(transfers).map(t => [t.type, t.bytes]),
      [
        ['<b>pandas.DataFrame</b>', 12345678],
        ['numpy.ndarray', 8e6]
      ]
    );
  });
});

describe('lanes start and end with their worker', () => {
  it('are empty before a worker joined and from when it left, within the view', () => {
    assert.deepEqual(absences(null, null, 0, 10), []);
    assert.deepEqual(absences(3.2, null, 0, 10), [
      { from: 0, to: 3.2, why: 'joined', at: 3.2 }
    ]);
    assert.deepEqual(absences(3.2, 7, 5, 10), [
      { from: 7, to: 10, why: 'left', at: 7 }
    ]); // joined before the view
    assert.deepEqual(absences(12, null, 0, 10), [
      { from: 0, to: 10, why: 'joined', at: 12 }
    ]); // joins after the view: empty all along it
    assert.deepEqual(absences(1, 4, 0, 10), [
      { from: 0, to: 1, why: 'joined', at: 1 },
      { from: 4, to: 10, why: 'left', at: 4 }
    ]);
    assert.deepEqual(absences(null, 2, 3, 10), [
      { from: 3, to: 10, why: 'left', at: 2 }
    ]);
    assert.deepEqual(absences(null, 12, 0, 10), []);
  });

  it('says whether a worker was there at a time', () => {
    assert.equal(absentAt(3.2, null, 1), 'joined');
    assert.equal(absentAt(3.2, null, 3.2), null);
    assert.equal(absentAt(3.2, 7, 5), null);
    assert.equal(absentAt(3.2, 7, 7), 'left');
    assert.equal(absentAt(null, null, -1), null);
  });

  it('words when a worker joined, and its whole life', () => {
    assert.equal(joinedText(worker(3.2, null)), 'joined at 3.2 s');
    assert.equal(joinedText(worker(null, 1)), '');
    assert.equal(lifeText(worker(1, 3)), 'joined at 1 s · lost at 3 s');
    assert.equal(lifeText(worker(null, null)), '');
  });
});
