import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';

import { ChangeKind, ProfileModel, stacksInRange } from '../src/model';
import {
  cacheMessage,
  groupsMessage,
  resourcesMessage,
  runStart,
  tasksMessage,
  tree,
  workersMessage,
  fixture,
  fixtureNames
} from './helpers';

interface IWireLike {
  data: unknown;
  buffers: DataView[];
}

function feed(
  model: ProfileModel,
  wire: IWireLike | Record<string, unknown>
): boolean {
  if ('data' in wire && 'buffers' in wire && Array.isArray(wire.buffers)) {
    return model.handle(wire.data, wire.buffers as DataView[]);
  }
  return model.handle(wire);
}

function started(): ProfileModel {
  const model = new ProfileModel();
  feed(model, runStart(1));
  feed(model, groupsMessage(1, ['inc', 'add']));
  feed(model, workersMessage(1, ['thread 1', 'thread 2']));
  return model;
}

describe('model', () => {
  it('appends task batches into growable columns and lanes', () => {
    const model = started();
    let first = 0;
    for (let batch = 0; batch < 10; batch++) {
      const rows = Array.from({ length: 50 }, (_, i) => {
        const k = batch * 50 + i;
        return {
          group: k % 2,
          worker: k % 2,
          submit: k * 0.01,
          start: k * 0.01 + 0.001,
          stop: k * 0.01 + 0.009
        };
      });
      assert.equal(
        feed(model, tasksMessage(1, first, rows, batch * 0.5)),
        true
      );
      first += rows.length;
    }
    const run = model.current!;
    assert.equal(run.taskCount, 500);
    assert.equal(run.laneIndex.get(0)!.length, 250);
    assert.ok(Math.abs(run.taskStart.data[499] - 4.991) < 1e-5);
    assert.equal(run.taskIndex.data[499], 499);
    const summary = run.summary();
    assert.equal(summary.tasks, 500);
    assert.equal(summary.groups, 2);
    assert.equal(summary.workers, 2);
    assert.ok(Math.abs(summary.wallTime - 4.999) < 1e-5);
  });

  it('keeps resources, cache and progress, and summarises them', () => {
    const model = started();
    feed(
      model,
      resourcesMessage(1, [
        { time: 0.1, cpu: 100, memory: 1e9 },
        { time: 0.2, cpu: 50, memory: 3e9 }
      ])
    );
    feed(
      model,
      cacheMessage(1, [
        { time: 0.1, group: 0, metric: 10 },
        { time: 0.2, group: 0, metric: 30 },
        { time: 0.2, group: 1, metric: 5 }
      ])
    );
    feed(model, {
      type: 'progress',
      run: 1,
      groups: [0, 1],
      total: [10, 5],
      done: [3, 5],
      erred: [1, 0]
    });
    const run = model.current!;
    assert.equal(run.resourceCount, 2);
    assert.equal(run.cache.get(0)!.metric.length, 2);
    assert.equal(run.cacheMax, 30);
    assert.deepEqual(run.progress.get(0), {
      group: 0,
      total: 10,
      done: 3,
      erred: 1
    });
    const s = run.summary();
    assert.equal(s.peakMemory, 3e9);
    assert.equal(s.meanCpu, 75);
    assert.deepEqual(s.dropped, {});
    feed(model, { type: 'dropped', run: 1, messages: 2, rows: 300 });
    feed(model, {
      type: 'run_end',
      run: 1,
      summary: { wall_time: 2.5, tasks: 9 },
      dropped: { tasks: 4 },
      errors: []
    });
    const end = run.summary();
    assert.equal(run.finished, true);
    assert.equal(end.wallTime, 2.5);
    assert.deepEqual(end.dropped, { tasks: 4, messages: 2, rows: 300 });
  });

  it('merges stack cycles per group and restricts them to a time range', () => {
    const model = started();
    feed(model, {
      type: 'stacks',
      run: 1,
      t_start: 0,
      t_end: 1,
      trees: { inc: tree('root', 2, [tree('f', 2)]) }
    });
    feed(model, {
      type: 'stacks',
      run: 1,
      t_start: 1,
      t_end: 2,
      trees: { inc: tree('root', 3, [tree('g', 3)]), add: tree('root', 1) }
    });
    const run = model.current!;
    assert.equal(run.stacks.get('inc')!.count, 5);
    assert.equal(run.stacks.get('inc')!.children.length, 2);
    assert.equal(run.stackSamples, 6);
    const early = stacksInRange(run, [0, 0.5]);
    assert.equal(early.get('inc')!.count, 2);
    assert.equal(early.has('add'), false);
  });

  it('fetches keys through the sender and keeps them', () => {
    const model = started();
    feed(
      model,
      tasksMessage(1, 100, [
        { group: 0, worker: 0, start: 0, stop: 1 },
        { group: 1, worker: 1, start: 0, stop: 1 }
      ])
    );
    const sent: Record<string, unknown>[] = [];
    model.sender = d => sent.push(d);
    const run = model.current!;
    model.requestKeys(run, [0, 1]);
    model.requestKeys(run, [0, 1]); // pending: not asked twice
    assert.deepEqual(sent, [{ type: 'keys', run: 1, indices: [100, 101] }]);
    feed(model, {
      type: 'keys',
      run: 1,
      indices: [100, 101],
      keys: ["('inc-abc', 0)", '<b>x</b>']
    });
    assert.equal(model.keyOf(run, 1), '<b>x</b>');
    model.setPaused(true);
    model.requestExport(run, 'trace');
    assert.deepEqual(sent.slice(1), [
      { type: 'pause' },
      { type: 'export', run: 1, format: 'trace' }
    ]);
  });

  it('rejects malformed messages with a logged error and keeps its state', () => {
    const model = started();
    const error = mock.method(console, 'error', () => undefined);
    try {
      feed(
        model,
        tasksMessage(1, 0, [{ group: 0, worker: 0, start: 0, stop: 1 }])
      );
      const wire = tasksMessage(1, 1, [
        { group: 0, worker: 0, start: 1, stop: 2 }
      ]);
      assert.equal(model.handle({ ...wire.data, n: 5 }, wire.buffers), false);
      assert.equal(model.handle({ type: 'tasks' }), false);
      assert.equal(model.handle('garbage'), false);
      assert.equal(
        model.handle({
          type: 'groups',
          run: 99,
          ids: [],
          names: [],
          colors: []
        }),
        false
      );
      assert.equal(model.handle({ type: 'not-yet-invented' }), false);
      assert.equal(error.mock.callCount(), 4);
      assert.ok(
        String(error.mock.calls[0].arguments[0]).includes('daskprofile')
      );
    } finally {
      error.mock.restore();
    }
    assert.equal(model.current!.taskCount, 1);
    assert.equal(model.rejected, 4);
  });

  it('follows the newest run unless another is selected, and replays in place', () => {
    const model = started();
    feed(model, runStart(2));
    assert.equal(model.current!.id, 2);
    model.select(1);
    feed(model, runStart(3));
    assert.equal(model.current!.id, 1);
    model.select(3);
    feed(model, runStart(4));
    assert.equal(model.current!.id, 4);
    feed(
      model,
      tasksMessage(4, 0, [{ group: 0, worker: 0, start: 0, stop: 1 }])
    );
    feed(model, runStart(4));
    assert.equal(model.runs.length, 4);
    assert.equal(model.current!.taskCount, 0);
    model.maxRuns = 2;
    feed(model, runStart(5));
    assert.deepEqual(
      model.runs.map(r => r.id),
      [4, 5]
    );
  });

  it('signals changes once, batched', async () => {
    const model = started();
    const seen: Set<ChangeKind>[] = [];
    model.changed.connect((_, changes) => seen.push(changes));
    await new Promise(r => setTimeout(r, 30));
    seen.length = 0;
    feed(
      model,
      tasksMessage(1, 0, [{ group: 0, worker: 0, start: 0, stop: 1 }])
    );
    feed(model, resourcesMessage(1, [{ time: 0.1, cpu: 1, memory: 1 }]));
    model.flush();
    assert.equal(seen.length, 1);
    assert.ok(seen[0].has('tasks') && seen[0].has('resources'));
    model.reset();
    model.flush();
    assert.equal(model.runs.length, 0);
  });
});

describe('model on the shared fixtures', () => {
  const names = fixtureNames();
  const skip = names.length === 0;

  it(
    'builds a run from the kernel fixtures, in protocol order',
    { skip },
    () => {
      const model = new ProfileModel();
      for (const name of [
        'hello',
        'run_start',
        'groups',
        'workers',
        'tasks',
        'resources',
        'cache',
        'progress',
        'stacks',
        'keys',
        'dropped',
        'run_end'
      ]) {
        const { data, buffers } = fixture(name);
        assert.equal(model.handle(data, buffers), true, name);
      }
      const run = model.current!;
      assert.equal(run.id, 'run-1');
      assert.ok(run.taskCount > 0);
      assert.ok(run.resourceCount > 0);
      assert.ok(run.stackSamples > 0);
      assert.equal(run.finished, true);
      assert.equal(typeof model.keyOf(run, 0), 'string');
      const s = run.summary();
      assert.equal(s.tasks, run.taskCount);
      assert.ok(s.groups > 0);
    }
  );

  it('sends requests shaped as the panel_* fixtures', { skip }, () => {
    const model = new ProfileModel();
    for (const name of ['run_start', 'groups', 'workers', 'tasks']) {
      const { data, buffers } = fixture(name);
      model.handle(data, buffers);
    }
    const sent: Record<string, unknown>[] = [];
    model.sender = d => sent.push(d);
    const run = model.current!;
    model.setPaused(true);
    model.setPaused(false);
    model.requestExport(run, 'html');
    model.replay(run);
    assert.deepEqual(
      sent,
      ['panel_pause', 'panel_resume', 'panel_export', 'panel_replay'].map(
        n => fixture(n).data
      )
    );
    const keys = fixture('panel_keys').data as { indices: number[] };
    sent.length = 0;
    const rows = keys.indices.map(i =>
      Array.from(run.taskIndex.view()).indexOf(i)
    );
    model.requestKeys(run, rows);
    assert.deepEqual(sent, [keys]);
  });
});
