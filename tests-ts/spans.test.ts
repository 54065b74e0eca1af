import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ProfileModel } from '../src/model';
import { decodeMessage, ITasksMessage, ProtocolError } from '../src/protocol';
import { groupsInSpan, spanMask, spanPaths, within } from '../src/spans';
import {
  fixture,
  groupsMessage,
  runStart,
  spansMessage,
  tasksMessage,
  workersMessage
} from './helpers';

/** A run with tasks in load (id 1), load/clean (2), reduce (3) and in no span. */
function spanned(): ProfileModel {
  const model = new ProfileModel();
  const send = (w: { data: unknown; buffers: DataView[] }) =>
    assert.ok(model.handle(w.data, w.buffers));
  model.handle(runStart(1));
  model.handle(groupsMessage(1, ['inc', 'add']));
  model.handle(workersMessage(1, ['thread 1', 'thread 2']));
  model.handle(spansMessage(1, ['load', 'load/clean', 'reduce']));
  send(
    tasksMessage(1, 0, [
      { group: 0, worker: 0, start: 0, stop: 1, span: 1 },
      { group: 0, worker: 1, start: 0, stop: 1, span: 2, status: 1 },
      { group: 1, worker: 0, start: 1, stop: 2, span: 3 },
      { group: 1, worker: 1, start: 1, stop: 2, span: 0 },
      { group: 0, worker: 0, start: 2, stop: 3, span: 2 }
    ])
  );
  model.flush();
  return model;
}

describe('spans: pure helpers', () => {
  it('a span includes its sub-spans, not its namesakes', () => {
    assert.ok(within('load', 'load'));
    assert.ok(within('load/clean', 'load'));
    assert.ok(!within('loader', 'load'));
    assert.ok(!within(undefined, 'load'));
    assert.ok(!within('load', 'load/clean'));
  });

  it('lists every path with its parents, sorted', () => {
    assert.deepEqual(spanPaths(['reduce', 'load/clean/x']), [
      'load',
      'load/clean',
      'load/clean/x',
      'reduce'
    ]);
  });

  it('masks span ids and maps rows outside the span to the dim colour', () => {
    const names = new Map([
      [1, 'load'],
      [2, 'load/clean'],
      [3, 'reduce']
    ]);
    assert.deepEqual([...spanMask(names, 'load')], [0, 1, 1, 0]);
    const groups = groupsInSpan(
      [0, 1, 0, 1],
      [1, 3, 2, 0],
      spanMask(names, 'load'),
      4,
      9
    );
    assert.deepEqual([...groups.subarray(0, 4)], [0, 9, 0, 9]);
  });
});

describe('spans: protocol 1.2', () => {
  it('decodes the span column of the tasks_span fixture', () => {
    const { data, buffers } = fixture('tasks_span');
    const msg = decodeMessage(data, buffers) as ITasksMessage;
    assert.deepEqual([...msg.span!], [1, 1, 2, 0, 3, 3, 2, 0, 1]);
    const plain = fixture('tasks');
    assert.equal(
      (decodeMessage(plain.data, plain.buffers) as ITasksMessage).span,
      null
    );
  });

  it('rejects span id 0 and unmatched lists', () => {
    for (const bad of [
      { ids: [0], names: ['a'] },
      { ids: [1, 2], names: ['a'] }
    ]) {
      assert.throws(
        () => decodeMessage({ type: 'spans', run: 1, ...bad }),
        ProtocolError
      );
    }
  });
});

describe('spans: the model filter', () => {
  it('keeps the span names and each row span, zero for batches without one', () => {
    const model = spanned();
    const run = model.current!;
    model.handle(
      tasksMessage(1, 5, [{ group: 0, worker: 0, start: 3, stop: 4 }]).data,
      tasksMessage(1, 5, [{ group: 0, worker: 0, start: 3, stop: 4 }]).buffers
    );
    assert.ok(run.hasSpans);
    assert.deepEqual(run.spanPaths(), ['load', 'load/clean', 'reduce']);
    assert.deepEqual([...run.taskSpan.view()], [1, 2, 3, 0, 2, 0]);
  });

  it('counts the picked span with its sub-spans, per group', () => {
    const model = spanned();
    assert.equal(model.spanFilter, null);
    model.setSpanFilter('load');
    const run = model.current!;
    assert.equal(model.spanFilter, 'load');
    const c = run.spanCounts('load');
    assert.equal(c.tasks, 3);
    assert.equal(c.errors, 1);
    assert.deepEqual([...c.groups], [[0, [3, 1]]]);
    assert.equal(run.spanCounts('load/clean').tasks, 2);
    assert.equal(run.spanCounts('reduce').groups.get(1)?.[0], 1);
    assert.deepEqual([...model.spanMask(run)!], [0, 1, 1, 0]);
  });

  it('signals a filter change and forgets a span the current run lacks', () => {
    const model = spanned();
    const changes: string[] = [];
    model.changed.connect((_, c) => changes.push(...c));
    model.setSpanFilter('reduce');
    model.flush();
    assert.ok(changes.includes('filter'));
    model.handle(runStart(2)); // a run without spans
    assert.equal(model.spanFilter, null);
    assert.equal(model.spanMask(model.current!), null);
    assert.ok(!model.current!.hasSpans);
  });
});
