import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';

import {
  ChangeKind,
  ProfileModel,
  reducedLine,
  stacksInRange
} from '../src/model';
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
    assert.equal(end.cluster, null);
  });

  it("reads a cluster run's workers, threads and memory limit from run_end", () => {
    const model = started();
    const run = model.runs[0];
    assert.equal(run.summary().cluster, null);
    feed(model, {
      type: 'run_end',
      run: 1,
      summary: {
        tasks: 0,
        cluster: { workers: 2, threads: 4, memory_limit: 2e9, scheduler: 'x' }
      },
      dropped: {},
      errors: []
    });
    assert.deepEqual(run.summary().cluster, {
      workers: 2,
      threads: 4,
      memoryLimit: 2e9
    });
  });

  it('names the parts recorded in a reduced way from run_end (protocol 1.1)', () => {
    const model = started();
    const run = model.runs[0];
    assert.deepEqual(run.summary().reduced, {});
    assert.equal(reducedLine(run.summary().reduced), '');
    const why = 'workers lack daskprofile (ModuleNotFoundError: <b>x</b>)';
    feed(model, {
      type: 'run_end',
      run: 1,
      summary: { tasks: 4 },
      dropped: {},
      errors: [],
      reduced: {
        stacks: `${why}: no stack samples`,
        resources: `${why}: CPU/memory from the scheduler's heartbeats`
      }
    });
    const reduced = run.summary().reduced;
    assert.deepEqual(Object.keys(reduced).sort(), ['resources', 'stacks']);
    assert.equal(
      reducedLine(reduced),
      `Reduced: resources (${why}: CPU/memory from the scheduler's heartbeats); ` +
        `stacks (${why}: no stack samples)`
    );
    // a replay of the run starts it afresh: nothing reduced until its run_end says so
    feed(model, runStart(1));
    assert.deepEqual(model.runs[0].summary().reduced, {});
    // a run_end of protocol 1.0 (no reduced field): nothing reduced
    feed(model, {
      type: 'run_end',
      run: 1,
      summary: {},
      dropped: {},
      errors: []
    });
    assert.deepEqual(model.runs[0].summary().reduced, {});
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

describe('model: resources of each worker process (protocol 1.1 source)', () => {
  const A = 'tcp://127.0.0.1:40123';
  const B = 'pid 4123 @ host';

  /** A run fed a total series and two worker processes' series, interleaved. */
  function sourced(): ProfileModel {
    const model = started();
    feed(
      model,
      resourcesMessage(1, [{ time: 0.1, cpu: 150, memory: 3e9 }], 0.1)
    );
    feed(
      model,
      resourcesMessage(
        1,
        [
          { time: 0.1, cpu: 100, memory: 2e9 },
          { time: 0.2, cpu: 90, memory: 2.5e9 }
        ],
        0.1,
        A
      )
    );
    feed(
      model,
      resourcesMessage(1, [{ time: 0.15, cpu: 50, memory: 1e9 }], 0.15, B)
    );
    feed(
      model,
      resourcesMessage(1, [{ time: 0.3, cpu: 120, memory: 4e9 }], 0.3, A)
    );
    feed(
      model,
      resourcesMessage(1, [{ time: 0.2, cpu: 200, memory: 5e9 }], 0.2, null)
    );
    return model;
  }

  const col = (c: { view(): ArrayLike<number> }) => Array.from(c.view());

  it("keeps the run's total apart from each source's series", () => {
    const run = sourced().current!;
    assert.equal(run.resourceCount, 2);
    assert.deepEqual(col(run.resCpu), [150, 200]);
    assert.deepEqual(col(run.resMemory), [3e9, 5e9]);
    assert.deepEqual([...run.resourceSources.keys()], [A, B]);
    const a = run.resourceSources.get(A)!;
    assert.equal(a.length, 3);
    assert.deepEqual(col(a.cpu), [100, 90, 120]);
    assert.deepEqual(col(a.memory), [2e9, 2.5e9, 4e9]);
    assert.deepEqual(
      col(a.time).map(t => Math.round(t * 1e6) / 1e6),
      [0.1, 0.2, 0.3]
    );
    assert.ok(a.cpu.data instanceof Float32Array);
    assert.ok(a.memory.data instanceof Float64Array);
    assert.equal(a.maxCpu, 120);
    assert.equal(a.maxMemory, 4e9);
    assert.equal(run.resourceSources.get(B)!.length, 1);
    assert.equal(run.resources.maxMemory, 5e9);
  });

  it('leaves the summary to the total and widens the extent to every series', () => {
    const run = sourced().current!;
    const s = run.summary();
    assert.equal(s.peakMemory, 5e9);
    assert.equal(s.meanCpu, 175);
    const [, hi] = run.extent();
    assert.ok(Math.abs(hi - 0.3) < 1e-6, `extent ends at ${hi}`);
  });

  it('lists sources by label whatever order they arrived in, and a replay holds the same', () => {
    const model = sourced();
    const labels = (m: ProfileModel) => m.current!.sources().map(([l]) => l);
    assert.deepEqual(labels(model), [B, A]);
    const late = new ProfileModel();
    feed(late, runStart(1));
    for (const source of ['tcp://h:10', 'tcp://h:9', A]) {
      feed(
        late,
        resourcesMessage(1, [{ time: 0, cpu: 1, memory: 1 }], 0, source)
      );
    }
    assert.deepEqual(labels(late), [A, 'tcp://h:9', 'tcp://h:10']);
    // a replay (run_start again, then the run's messages) rebuilds the same series
    const before = model.current!.sources().map(([l, x]) => [l, col(x.cpu)]);
    feed(model, runStart(1));
    assert.equal(model.current!.resourceSources.size, 0);
    assert.equal(model.current!.resourceCount, 0);
    feed(
      model,
      resourcesMessage(1, [{ time: 0.15, cpu: 50, memory: 1e9 }], 0.15, B)
    );
    feed(
      model,
      resourcesMessage(
        1,
        [
          { time: 0.1, cpu: 100, memory: 2e9 },
          { time: 0.2, cpu: 90, memory: 2.5e9 },
          { time: 0.3, cpu: 120, memory: 4e9 }
        ],
        0.1,
        A
      )
    );
    const after = model.current!.sources().map(([l, x]) => [l, col(x.cpu)]);
    assert.deepEqual(after, before);
  });

  it('applies the shared resources_source fixture to its source only', () => {
    const model = new ProfileModel();
    for (const name of ['run_start', 'resources', 'resources_source']) {
      const { data, buffers } = fixture(name);
      assert.equal(model.handle(data, buffers), true, name);
    }
    const run = model.current!;
    assert.equal(run.resourceCount, 4);
    const series = run.resourceSources.get('tcp://127.0.0.1:40123')!;
    assert.equal(series.length, 3);
    assert.deepEqual(col(series.cpu), [12.5, 99, 50.25]);
    assert.equal(run.resourceSources.size, 1);
  });

  it('without sources nothing changes: no source series', () => {
    const model = started();
    feed(model, resourcesMessage(1, [{ time: 0.1, cpu: 10, memory: 1 }]));
    assert.equal(model.current!.resourceSources.size, 0);
    assert.deepEqual(model.current!.sources(), []);
    assert.equal(model.current!.resourceCount, 1);
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

  it('reads the reduced parts of the run_end_reduced fixture', { skip }, () => {
    const model = new ProfileModel();
    for (const name of ['run_start', 'run_end_reduced']) {
      const { data, buffers } = fixture(name);
      assert.equal(model.handle(data, buffers), true, name);
    }
    const line = reducedLine(model.current!.summary().reduced);
    assert.match(line, /^Reduced: resources \(workers lack daskprofile/);
    assert.match(
      line,
      /; stacks \(workers lack daskprofile .*no stack samples\)$/
    );
    assert.ok(line.includes('<b>'), 'the kernel text is kept as text');
  });

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
