import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { ProfileModel } from '../src/model';
import { base64View, INLINE_FORMAT, parsePayload } from '../src/inline/payload';
import { FIXTURES } from './helpers';

/** A shared fixture as the inline view's payload holds it: [data, base64 buffers]. */
function raw(name: string): [Record<string, unknown>, string[]] {
  const f = JSON.parse(
    fs.readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8')
  );
  return [f.data, f.buffers ?? []];
}

function payloadText(extra: Record<string, unknown> = {}): string {
  const names = ['run_start', 'groups', 'workers', 'tasks', 'run_end'];
  return JSON.stringify({
    format: INLINE_FORMAT,
    title: '%%daskprofile',
    code: 'x.sum().compute()',
    notes: ['10,000 tasks drawn as 9 bars'],
    messages: names.map(raw),
    ...extra
  });
}

describe('inline payload', () => {
  it('reads the replayed messages into the panel model', () => {
    const payload = parsePayload(payloadText());
    assert.equal(payload.title, '%%daskprofile');
    assert.equal(payload.code, 'x.sum().compute()');
    assert.deepEqual(payload.notes, ['10,000 tasks drawn as 9 bars']);
    assert.equal(payload.merged, null);
    const model = new ProfileModel();
    for (const [data, buffers] of payload.messages) {
      assert.ok(model.handle(data, buffers.map(base64View)), String(data.type));
    }
    const tasks = raw('tasks')[0];
    assert.equal(model.current?.taskCount, tasks.n);
    assert.equal(model.current?.finished, true);
    assert.equal(model.rejected, 0);
  });

  it('decodes the tasks per merged bar (uint32, little-endian)', () => {
    const counts = Buffer.from(new Uint32Array([1, 37, 70000]).buffer);
    const payload = parsePayload(
      payloadText({ merged: counts.toString('base64') })
    );
    assert.deepEqual(Array.from(payload.merged ?? []), [1, 37, 70000]);
  });

  it('refuses data of another format or without messages', () => {
    assert.throws(() => parsePayload('[]'), /not an object/);
    assert.throws(
      () => parsePayload(payloadText({ format: INLINE_FORMAT + 1 })),
      /format 2/
    );
    assert.throws(
      () => parsePayload(payloadText({ messages: [['tasks', []]] })),
      /no valid messages/
    );
  });

  it('decodes base64 to the bytes it holds', () => {
    const view = base64View(Buffer.from([0, 1, 255]).toString('base64'));
    assert.deepEqual(
      [view.getUint8(0), view.getUint8(1), view.getUint8(2)],
      [0, 1, 255]
    );
  });
});
