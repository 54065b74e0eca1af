import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  keepsUserWidth,
  MAX_OPENING,
  MIN_MAIN,
  MIN_READABLE,
  readableWidth,
  widening
} from '../src/widths';

describe('readableWidth', () => {
  it('is 35% of a wide window, at least 420 px and at most 640 px', () => {
    assert.equal(readableWidth(1400), 490);
    assert.equal(readableWidth(1000), MIN_READABLE);
    assert.equal(readableWidth(800), MIN_READABLE);
    assert.equal(readableWidth(1600), 560);
    assert.equal(readableWidth(3840), MAX_OPENING);
  });
});

describe('widening', () => {
  it('grows a sidebar to the target, taken from the main area', () => {
    assert.equal(widening(245, 1089, 490), 245);
    assert.equal(widening(300.5, 800, 490), 189);
  });

  it('leaves the main area at least its minimum', () => {
    assert.equal(widening(250, 500, 490), 500 - MIN_MAIN);
    assert.equal(widening(250, 500, 490, 300), 200);
  });

  it('is 0 when the sidebar is wide enough or the main area has nothing to give', () => {
    assert.equal(widening(600, 700, 490), 0);
    assert.equal(widening(490, 700, 490), 0);
    assert.equal(widening(489.5, 700, 490), 0);
    assert.equal(widening(250, MIN_MAIN, 490), 0);
    assert.equal(widening(250, 300, 490), 0);
  });
});

describe('keepsUserWidth', () => {
  it('keeps a width narrower than the panel opens at, not a wider one', () => {
    assert.equal(keepsUserWidth(300, 1400), true);
    assert.equal(keepsUserWidth(488, 1400), true);
    assert.equal(keepsUserWidth(490, 1400), false);
    assert.equal(keepsUserWidth(900, 1400), false);
    assert.equal(keepsUserWidth(0, 1400), false);
  });
});
