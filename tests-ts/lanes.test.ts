import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  compareNatural,
  ILaneWorker,
  KERNEL_GROUP,
  laneAt,
  laneGeometry,
  LaneLayoutCache,
  layoutHeight,
  layoutLanes,
  MIN_LANE_WITH_HEADERS,
  parseWorkerLabel
} from '../src/lanes';

/** Workers with ids in order of appearance. */
function workers(...specs: [string, string][]): ILaneWorker[] {
  return specs.map(([label, kind], id) => ({ id, label, kind }));
}

const W = (address: string, thread: number): [string, string] => [
  `${address} thread ${thread}`,
  'worker'
];

/** Labels of the lanes top to bottom, by worker label. */
function labelsInOrder(list: ILaneWorker[]): string[] {
  const byId = new Map(list.map(w => [w.id, w.label]));
  return layoutLanes(list).order.map(id => byId.get(id)!);
}

/** Every permutation of `items` (small lists only). */
function permutations<T>(items: T[]): T[][] {
  if (items.length <= 1) {
    return [items];
  }
  return items.flatMap((x, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map(p => [
      x,
      ...p
    ])
  );
}

describe('lanes: labels and natural order', () => {
  it('parses a cluster lane label into address and thread number', () => {
    assert.deepEqual(parseWorkerLabel('tcp://127.0.0.1:40123 thread 10'), {
      address: 'tcp://127.0.0.1:40123',
      thread: 10
    });
    assert.deepEqual(parseWorkerLabel('tls://[::1]:8786 thread 0'), {
      address: 'tls://[::1]:8786',
      thread: 0
    });
    for (const label of ['tcp://a:1', 'thread 3', 'tcp://a:1 thread x']) {
      assert.deepEqual(parseWorkerLabel(label), {
        address: label,
        thread: null
      });
    }
  });

  it('compares runs of digits as numbers', () => {
    const sorted = [
      'tcp://10.0.0.10:8786',
      'tcp://10.0.0.9:8786',
      'tcp://10.0.0.9:10000',
      'tcp://10.0.0.9:999',
      'tcp://10.0.0.1:8786'
    ].sort(compareNatural);
    assert.deepEqual(sorted, [
      'tcp://10.0.0.1:8786',
      'tcp://10.0.0.9:999',
      'tcp://10.0.0.9:8786',
      'tcp://10.0.0.9:10000',
      'tcp://10.0.0.10:8786'
    ]);
    assert.equal(compareNatural('a', 'a'), 0);
    assert.ok(compareNatural('a', 'a1') < 0);
    assert.ok(compareNatural('x007', 'x7') !== 0, 'a total order');
  });
});

describe('lanes: layout', () => {
  it('keeps a local run as today: order of appearance, own labels, no groups', () => {
    const list = workers(
      ['thread 3', 'thread'],
      ['main thread', 'thread'],
      ['thread 1', 'thread'],
      ['process 12345', 'process']
    );
    const layout = layoutLanes(list);
    assert.deepEqual(layout.order, [0, 1, 2, 3]);
    assert.deepEqual(layout.labels, [
      'thread 3',
      'main thread',
      'thread 1',
      'process 12345'
    ]);
    assert.deepEqual(layout.groups, []);
  });

  it('orders cluster lanes by address then thread number, numerically, whatever their arrival order', () => {
    const specs = [
      W('tcp://127.0.0.1:40777', 0),
      W('tcp://127.0.0.1:40123', 10),
      W('tcp://127.0.0.1:9000', 0),
      W('tcp://127.0.0.1:40123', 2),
      W('tcp://127.0.0.1:40123', 0)
    ];
    const expected = [
      'tcp://127.0.0.1:9000 thread 0',
      'tcp://127.0.0.1:40123 thread 0',
      'tcp://127.0.0.1:40123 thread 2',
      'tcp://127.0.0.1:40123 thread 10',
      'tcp://127.0.0.1:40777 thread 0'
    ];
    for (const order of permutations(specs)) {
      assert.deepEqual(labelsInOrder(workers(...order)), expected);
    }
  });

  it('groups consecutive lanes of one worker under its address; lanes say just `thread N`', () => {
    const layout = layoutLanes(
      workers(
        W('tcp://127.0.0.1:40123', 1),
        W('tcp://127.0.0.1:40777', 0),
        W('tcp://127.0.0.1:40123', 0)
      )
    );
    assert.deepEqual(layout.order, [2, 0, 1]);
    assert.deepEqual(layout.labels, ['thread 0', 'thread 1', 'thread 0']);
    assert.deepEqual(layout.groups, [
      { label: 'tcp://127.0.0.1:40123', local: false, first: 0, count: 2 },
      { label: 'tcp://127.0.0.1:40777', local: false, first: 2, count: 1 }
    ]);
    assert.deepEqual(
      [...layout.index],
      [
        [2, 0],
        [0, 1],
        [1, 2]
      ]
    );
  });

  it('puts local lanes first, under `kernel`, in a run that mixes them with cluster lanes', () => {
    const layout = layoutLanes(
      workers(W('tcp://h:2', 0), ['main thread', 'thread'], W('tcp://h:1', 0), [
        'thread 1',
        'thread'
      ])
    );
    assert.deepEqual(layout.order, [1, 3, 2, 0]);
    assert.deepEqual(layout.labels, [
      'main thread',
      'thread 1',
      'thread 0',
      'thread 0'
    ]);
    assert.deepEqual(
      layout.groups.map(g => [g.label, g.local, g.first, g.count]),
      [
        [KERNEL_GROUP, true, 0, 2],
        ['tcp://h:1', false, 2, 1],
        ['tcp://h:2', false, 3, 1]
      ]
    );
  });

  it('a new worker appearing mid-run takes its place in the order', () => {
    const list = workers(W('tcp://h:30', 0), W('tcp://h:10', 0));
    assert.deepEqual(layoutLanes(list).order, [1, 0]);
    list.push({ id: 2, label: 'tcp://h:20 thread 0', kind: 'worker' });
    const layout = layoutLanes(list);
    assert.deepEqual(layout.order, [1, 2, 0]);
    assert.deepEqual(
      layout.groups.map(g => g.label),
      ['tcp://h:10', 'tcp://h:20', 'tcp://h:30']
    );
  });
});

describe('lanes: geometry and hit testing', () => {
  it('spreads ungrouped lanes evenly, as the stream always did', () => {
    const layout = layoutLanes(
      workers(['thread 1', 'thread'], ['thread 2', 'thread'])
    );
    const g = laneGeometry(layout, 100, 14);
    assert.equal(g.header, 0);
    assert.equal(g.laneHeight, 50);
    assert.deepEqual(Array.from(g.tops), [0, 50]);
    assert.equal(layoutHeight(layout, 18, 14), 36);
    assert.equal(laneAt(g, 0), 0);
    assert.equal(laneAt(g, 49.9), 0);
    assert.equal(laneAt(g, 50), 1);
    assert.equal(laneAt(g, 100), -1);
    assert.equal(laneAt(g, -1), -1);
  });

  it('gives each group a labelled band and maps y to the lane under it (bands are no lane)', () => {
    const layout = layoutLanes(
      workers(W('tcp://h:1', 0), W('tcp://h:1', 1), W('tcp://h:2', 0))
    );
    assert.equal(layoutHeight(layout, 18, 14), 3 * 18 + 2 * 14);
    const g = laneGeometry(layout, 82, 14); // 2 bands of 14, 3 lanes of 18
    assert.equal(g.header, 14);
    assert.equal(g.laneHeight, 18);
    assert.deepEqual(g.groupTops, [0, 50]);
    assert.deepEqual(Array.from(g.tops), [14, 32, 64]);
    const at = (y: number) => laneAt(g, y);
    assert.equal(at(5), -1, 'first band');
    assert.equal(at(14), 0);
    assert.equal(at(31.9), 0);
    assert.equal(at(32), 1);
    assert.equal(at(55), -1, 'second band');
    assert.equal(at(64), 2);
    assert.equal(at(81.9), 2);
    assert.equal(at(82), -1);
    assert.equal(layout.order[at(40)], 1);
  });

  it('gives up the bands when they would leave lanes too thin', () => {
    const list = workers(
      ...Array.from({ length: 20 }, (_, i) => W(`tcp://h:${i}`, 0))
    );
    const layout = layoutLanes(list);
    const g = laneGeometry(layout, 300, 14);
    assert.ok((300 - 20 * 14) / 20 < MIN_LANE_WITH_HEADERS);
    assert.equal(g.header, 0);
    assert.equal(g.laneHeight, 15);
    assert.deepEqual(g.groupTops.slice(0, 3), [0, 15, 30]);
    assert.equal(laneAt(g, 299), 19);
  });

  it('an empty run has no lanes to hit', () => {
    const g = laneGeometry(layoutLanes([]), 100, 14);
    assert.equal(g.tops.length, 0);
    assert.equal(laneAt(g, 10), -1);
  });
});

describe('LaneLayoutCache', () => {
  it('lays lanes out again only when the workers change', () => {
    const cache = new LaneLayoutCache();
    const list = workers(
      W('tcp://b:1', 0),
      W('tcp://a:1', 1),
      W('tcp://a:1', 0)
    );
    const first = cache.get(list);
    assert.deepEqual(first.order, [2, 1, 0]);
    // the same workers (a new array of the same objects): the same layout, not re-sorted
    assert.equal(cache.get([...list]), first);
    // a worker named anew (the model replaces its object): laid out again
    const renamed = [...list];
    renamed[0] = { id: 0, label: 'tcp://0:1 thread 0', kind: 'worker' };
    const second = cache.get(renamed);
    assert.notEqual(second, first);
    assert.deepEqual(second.order, [0, 2, 1]);
    // a new lane: laid out again
    const more = [
      ...renamed,
      { id: 3, label: 'tcp://a:1 thread 2', kind: 'worker' }
    ];
    assert.deepEqual(cache.get(more).order, [0, 2, 1, 3]);
  });
});
