import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  formatBytes,
  formatCompact,
  formatCount,
  formatDuration,
  formatPercent,
  formatTick,
  niceTicks
} from '../src/format';
import {
  groupColor,
  isDark,
  mix,
  nameColor,
  parseCssColor,
  parseHex,
  textOn
} from '../src/colors';

describe('format', () => {
  it('formats durations with a fitting unit', () => {
    assert.equal(formatDuration(0), '0 s');
    assert.equal(formatDuration(1.5e-7), '150 ns');
    assert.equal(formatDuration(0.000123), '123 µs');
    assert.equal(formatDuration(0.0123), '12.3 ms');
    assert.equal(formatDuration(2.5), '2.5 s');
    assert.equal(formatDuration(125), '2 min 5 s');
    assert.equal(formatDuration(7260), '2 h 1 min');
    assert.equal(formatDuration(NaN), '–');
  });

  it('formats bytes in binary units', () => {
    assert.equal(formatBytes(512), '512 B');
    assert.equal(formatBytes(1536), '1.5 KiB');
    assert.equal(formatBytes(3 * 1024 ** 3), '3 GiB');
  });

  it('formats counts and percents', () => {
    assert.equal(formatCount(1234567), '1,234,567');
    assert.equal(formatCount(-1000), '-1,000');
    assert.equal(formatCompact(1234567), '1.23M');
    assert.equal(formatCompact(45600), '45.6k');
    assert.equal(formatPercent(153.04), '153 %');
  });

  it('makes round ticks covering the range', () => {
    assert.deepEqual(niceTicks(0, 10, 5), [0, 2, 4, 6, 8, 10]);
    assert.deepEqual(niceTicks(0.013, 0.051, 4), [0.02, 0.03, 0.04, 0.05]);
    assert.deepEqual(niceTicks(5, 5), []);
    assert.equal(formatTick(2, 1), '2 s');
    assert.equal(formatTick(0.25, 0.05), '0.25 s');
    assert.equal(formatTick(0.0015, 0.0005), '1.5 ms');
  });
});

describe('colors', () => {
  it('keeps valid kernel colours and derives stable ones otherwise', () => {
    assert.equal(groupColor('inc', '#AABBCC'), '#aabbcc');
    assert.equal(
      groupColor('inc', 'red; background: url(x)'),
      nameColor('inc')
    );
    assert.equal(nameColor('inc'), nameColor('inc'));
    assert.notEqual(nameColor('inc'), nameColor('add'));
    assert.match(nameColor('anything'), /^#[0-9a-f]{6}$/);
  });

  it('parses CSS colours and tells dark backgrounds', () => {
    assert.deepEqual(parseHex('#ff0080'), [255, 0, 128]);
    assert.deepEqual(parseCssColor('rgb(17, 17, 17)'), [17, 17, 17]);
    assert.deepEqual(parseCssColor('#fff'), [255, 255, 255]);
    assert.equal(isDark('#111111'), true);
    assert.equal(isDark('rgb(255, 255, 255)'), false);
    assert.equal(textOn('#000000'), '#ffffff');
    assert.equal(mix('#000000', '#ffffff', 0.5), '#808080');
  });
});
