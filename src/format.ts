/** Pure formatting helpers for durations, sizes, counts and axis ticks (no DOM). */

/** A duration in seconds, with a unit that keeps 3 significant digits: `12.3 ms`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) {
    return '–';
  }
  const sign = seconds < 0 ? '-' : '';
  const s = Math.abs(seconds);
  if (s === 0) {
    return '0 s';
  }
  if (s < 1e-6) {
    return `${sign}${trim(s * 1e9)} ns`;
  }
  if (s < 1e-3) {
    return `${sign}${trim(s * 1e6)} µs`;
  }
  if (s < 1) {
    return `${sign}${trim(s * 1e3)} ms`;
  }
  if (s < 60) {
    return `${sign}${trim(s)} s`;
  }
  if (s < 3600) {
    const m = Math.floor(s / 60);
    return `${sign}${m} min ${Math.round(s - m * 60)} s`;
  }
  const h = Math.floor(s / 3600);
  return `${sign}${h} h ${Math.round((s - h * 3600) / 60)} min`;
}

/** A byte count in binary units: `1.5 GiB`. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) {
    return '–';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.abs(bytes);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const sign = bytes < 0 ? '-' : '';
  return u === 0
    ? `${sign}${Math.round(v)} B`
    : `${sign}${trim(v)} ${units[u]}`;
}

/** A percentage (of one core for CPU): `153 %`. */
export function formatPercent(value: number): string {
  if (!Number.isFinite(value)) {
    return '–';
  }
  return `${trim(value)} %`;
}

/** An integer with thousands separators: `1,234,567`. */
export function formatCount(value: number): string {
  if (!Number.isFinite(value)) {
    return '–';
  }
  const digits = String(Math.round(Math.abs(value)));
  const grouped = digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return value < 0 ? `-${grouped}` : grouped;
}

/** A compact count: `1.23M`, `45.6k`, `789`. */
export function formatCompact(value: number): string {
  const a = Math.abs(value);
  if (a >= 1e9) {
    return `${trim(value / 1e9)}G`;
  }
  if (a >= 1e6) {
    return `${trim(value / 1e6)}M`;
  }
  if (a >= 1e4) {
    return `${trim(value / 1e3)}k`;
  }
  return formatCount(value);
}

/** Three significant digits, without trailing zeros. */
function trim(v: number): string {
  const digits = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return String(Number(v.toFixed(digits)));
}

/** Round axis ticks: about `target` multiples of 1, 2 or 5 x 10^k in [lo, hi]. */
export function niceTicks(lo: number, hi: number, target = 5): number[] {
  if (
    !(hi > lo) ||
    !Number.isFinite(lo) ||
    !Number.isFinite(hi) ||
    target < 1
  ) {
    return [];
  }
  const raw = (hi - lo) / target;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const norm = raw / mag;
  const step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  const out: number[] = [];
  const first = Math.ceil(lo / step);
  for (let i = first; i * step <= hi + step * 1e-9; i++) {
    out.push(Number((i * step).toPrecision(12)));
    if (out.length > 1000) {
      break;
    }
  }
  return out;
}

/** A tick label for a time offset in seconds, precise enough for ticks `step` apart. */
export function formatTick(seconds: number, step: number): string {
  if (step >= 1) {
    return `${Number(seconds.toFixed(0))} s`;
  }
  if (step >= 1e-3) {
    const digits = Math.max(0, -Math.floor(Math.log10(step)));
    return `${seconds.toFixed(digits)} s`;
  }
  const digits = Math.max(0, -Math.floor(Math.log10(step * 1e3)));
  return `${(seconds * 1e3).toFixed(digits)} ms`;
}
