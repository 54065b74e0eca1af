import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  decodeFinding,
  decodeFindings,
  dimOutside,
  groupIdsNamed,
  highlightMask,
  highlights,
  IFinding,
  impactText,
  MAX_FINDING_ROWS,
  singleGroup
} from '../src/findings';
import { formatDuration } from '../src/format';
import { ProfileModel } from '../src/model';
import { decodeMessage, IRunEndMessage } from '../src/protocol';
import {
  fixture,
  groupsMessage,
  runStart,
  tasksMessage,
  workersMessage
} from './helpers';

/** A well-formed entry of `summary.findings`, as the kernel sends it. */
function entry(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'gil-bound',
    group: 'inc',
    impact_s: 0.5,
    share: 0.25,
    message: "'inc' kept 3 threads busy",
    suggestion: 'Use processes.',
    groups: ['inc'],
    ...extra
  };
}

function finding(extra: Partial<IFinding> = {}): IFinding {
  return {
    kind: 'gil-bound',
    group: 'inc',
    impactS: 0.5,
    share: 0.25,
    message: 'm',
    suggestion: 's',
    groups: [],
    rows: null,
    ...extra
  };
}

/** A finished run: 6 tasks, groups inc (0) and add (1), rows 10..15, with `findings`. */
function finished(findings: unknown[]): ProfileModel {
  const model = new ProfileModel();
  model.handle(runStart(1));
  model.handle(groupsMessage(1, ['inc', 'add']));
  model.handle(workersMessage(1, ['thread 1', 'thread 2']));
  const w = tasksMessage(1, 10, [
    { group: 0, worker: 0, start: 0, stop: 1 },
    { group: 1, worker: 1, start: 0, stop: 1 },
    { group: 0, worker: 0, start: 1, stop: 2 },
    { group: 1, worker: 1, start: 1, stop: 2 },
    { group: 0, worker: 0, start: 2, stop: 3 },
    { group: 1, worker: 1, start: 2, stop: 3 }
  ]);
  assert.ok(model.handle(w.data, w.buffers));
  assert.ok(
    model.handle({
      type: 'run_end',
      run: 1,
      summary: { wall_time: 3, findings },
      dropped: {},
      errors: []
    })
  );
  model.flush();
  return model;
}

describe('findings: decoding summary.findings', () => {
  it('decodes the shared fixture: groups, rows, texts kept as data', () => {
    const wire = fixture('run_end_findings');
    const msg = decodeMessage(wire.data, wire.buffers) as IRunEndMessage;
    assert.equal(msg.findingsDropped, 0);
    assert.deepEqual(
      msg.findings.map(f => f.kind),
      ['critical-path', 'gil-bound', 'idle']
    );
    const [chain, gil, idle] = msg.findings;
    assert.deepEqual(chain.rows, [100, 103, 106, 108]);
    assert.deepEqual(chain.groups, ['inc', '<img src=x onerror=alert(1)>']);
    assert.equal(chain.impactS, 1.25);
    assert.equal(chain.share, 0.625);
    assert.ok(chain.message.includes('<img src=x onerror=alert(1)>'));
    assert.deepEqual(gil.groups, ['inc']);
    assert.equal(gil.rows, null);
    assert.deepEqual(idle.groups, []);
    assert.equal(highlights(idle), false);
    assert.equal(highlights(chain), true);
  });

  it('a run_end without findings (an older kernel) has none', () => {
    const wire = fixture('run_end');
    const msg = decodeMessage(wire.data, wire.buffers) as IRunEndMessage;
    assert.deepEqual(msg.findings, []);
    assert.equal(msg.findingsDropped, 0);
  });

  it('drops and counts malformed entries, keeps the others', () => {
    const bad: unknown[] = [
      null,
      'critical-path',
      entry({ kind: 3 }),
      entry({ kind: '' }),
      entry({ impact_s: 'soon' }),
      entry({ impact_s: -1 }),
      entry({ share: Number.NaN }),
      entry({ message: { html: '<b>' } }),
      entry({ groups: 'inc' }),
      entry({ groups: ['inc', 3] }),
      entry({ rows: [1, -2] }),
      entry({ rows: [1.5] }),
      entry({ rows: 'all' }),
      entry({ rows: new Array(MAX_FINDING_ROWS + 1).fill(0) })
    ];
    const good = [entry(), entry({ kind: 'new-kind', groups: undefined })];
    const out = decodeFindings([...bad, ...good]);
    assert.equal(out.dropped, bad.length);
    assert.deepEqual(
      out.findings.map(f => [f.kind, f.groups]),
      [
        ['gil-bound', ['inc']],
        ['new-kind', []]
      ]
    );
    assert.deepEqual(decodeFindings(undefined), { findings: [], dropped: 0 });
    assert.deepEqual(decodeFindings({ kind: 'idle' }), {
      findings: [],
      dropped: 1
    });
    assert.equal(decodeFinding(entry({ rows: null }))?.rows, null);
  });

  it('a malformed findings list never rejects the run_end', () => {
    const model = finished([entry(), { kind: 'idle' }, 42]);
    const run = model.current!;
    assert.ok(run.finished);
    assert.equal(run.findings.length, 1);
    assert.equal(run.findingsDropped, 2);
    assert.equal(model.rejected, 0);
  });

  it('says the impact in seconds and as a share of the wall time', () => {
    const f = finding({ impactS: 1.25, share: 0.625 });
    assert.equal(impactText(f, formatDuration), '1.25 s (63 % of wall)');
  });
});

describe('findings: what a picked finding highlights', () => {
  it('a chain highlights its rows by protocol index, whatever the groups', () => {
    const f = finding({ groups: ['inc'], rows: [12, 11, 99] });
    const index = [10, 11, 12, 13];
    const mask = highlightMask(f, index, [0, 1, 0, 1], 4, new Set([0]));
    assert.deepEqual([...mask!], [0, 1, 1, 0]);
  });

  it('groups highlight their rows; a finding naming nothing highlights nothing', () => {
    const ids = groupIdsNamed(
      [{ id: 0, name: 'inc' }, undefined, { id: 2, name: 'add' }],
      ['add', 'gone']
    );
    assert.deepEqual([...ids], [2]);
    const f = finding({ groups: ['add'] });
    const mask = highlightMask(f, [0, 1, 2], [0, 2, 2], 3, ids);
    assert.deepEqual([...mask!], [0, 1, 1]);
    assert.equal(highlightMask(finding(), [0], [0], 1, ids), null);
  });

  it('dims the rows outside the mask, in place when asked', () => {
    const shown = new Uint16Array([0, 1, 2, 0]);
    const keep = new Uint8Array([1, 0, 1, 0]);
    const out = dimOutside(shown, keep, 4, 9, shown);
    assert.equal(out, shown);
    assert.deepEqual([...out.subarray(0, 4)], [0, 9, 2, 9]);
  });

  it('the flame graph picks a group only when the finding names one', () => {
    assert.equal(singleGroup(finding({ groups: ['inc'] })), 'inc');
    assert.equal(singleGroup(finding({ groups: ['inc', 'add'] })), null);
    assert.equal(singleGroup(null), null);
  });

  it('the model keeps the pick per run; picking again, or null, clears it', () => {
    const model = finished([
      entry({
        kind: 'critical-path',
        groups: ['inc'],
        rows: [10, 12, 14]
      }),
      entry({ kind: 'overhead-bound', groups: ['add'] }),
      entry({ kind: 'idle', groups: [] })
    ]);
    const run = model.current!;
    const [chain, add, idle] = run.findings;
    const seen: string[][] = [];
    model.changed.connect((_, changes) => seen.push([...changes]));
    model.setHighlight(chain);
    model.flush();
    assert.equal(model.highlight, chain);
    assert.deepEqual(seen, [['highlight']]);
    assert.deepEqual([...model.highlightMask(run)!], [1, 0, 1, 0, 1, 0]);
    model.setHighlight(add);
    assert.deepEqual([...model.highlightMask(run)!], [0, 1, 0, 1, 0, 1]);
    model.setHighlight(add); // again: cleared
    assert.equal(model.highlight, null);
    assert.equal(model.highlightMask(run), null);
    model.setHighlight(idle); // names nothing: picked, masks nothing
    assert.equal(model.highlightMask(run), null);
    model.setHighlight(null);
    assert.equal(model.highlight, null);
    model.setHighlight(finding()); // not one of the run's findings
    assert.equal(model.highlight, null);
  });

  it('another run shown has no highlight', () => {
    const model = finished([entry({ groups: ['inc'] })]);
    const first = model.current!;
    model.setHighlight(first.findings[0]);
    model.handle(runStart(2));
    model.flush();
    assert.notEqual(model.current, first);
    assert.equal(model.highlight, null);
    assert.equal(model.highlightMask(first), null);
    model.select(1);
    assert.equal(model.highlight, first.findings[0]);
  });
});
