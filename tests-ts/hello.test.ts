import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { checkHello, isCompatible, PROTOCOL_VERSION } from '../src/protocol';
import { fixture } from './helpers';

describe('the kernel hello, as the connection judges it', () => {
  it('connects on the kernel hello of the shared fixture', () => {
    const outcome = checkHello(fixture('hello').data);
    assert.equal(outcome.status, 'connected');
    if (outcome.status === 'connected') {
      assert.equal(outcome.hello.protocol, PROTOCOL_VERSION);
    }
  });

  it('accepts another minor version, refuses another major', () => {
    assert.ok(isCompatible('1.7'));
    assert.ok(!isCompatible('2.0'));
    assert.ok(!isCompatible('0.9'));
    assert.ok(!isCompatible('1'));
    assert.ok(!isCompatible(1));
    const newer = { ...fixture('hello').data, protocol: '2.3' };
    const outcome = checkHello(newer);
    assert.equal(outcome.status, 'incompatible');
    if ('detail' in outcome) {
      assert.match(outcome.detail, /protocol 2\.3/);
      assert.match(outcome.detail, /this panel 1\.3/);
      assert.match(outcome.detail, /pip install daskprofile/);
    }
  });

  it('speaks protocol 1.3 and still connects to a 1.2, 1.1 or 1.0 kernel (minor bumps)', () => {
    assert.equal(PROTOCOL_VERSION, '1.3');
    for (const protocol of ['1.2', '1.1', '1.0']) {
      const older = { ...fixture('hello').data, protocol };
      const outcome = checkHello(older);
      assert.equal(outcome.status, 'connected');
      if (outcome.status === 'connected') {
        assert.equal(outcome.hello.protocol, protocol);
      }
    }
  });

  it("shows the kernel's own refusal (the error_protocol fixture) as it is", () => {
    const refusal = fixture('error_protocol').data;
    const outcome = checkHello(refusal);
    assert.deepEqual(outcome, {
      status: 'incompatible',
      detail: String(refusal.message)
    });
  });

  it('reports a malformed first message as an error, without throwing', () => {
    for (const bad of [
      null,
      'hello',
      { type: 'hello' },
      { type: 'hello', protocol: '1.0', versions: 'x' },
      { type: 'tasks' }
    ]) {
      const outcome = checkHello(bad);
      assert.equal(outcome.status, 'error', JSON.stringify(bad));
    }
  });
});
