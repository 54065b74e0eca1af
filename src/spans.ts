/**
 * Spans (protocol 1.2): named, nestable parts of a computation, as paths such as
 * `load/clean`. Pure helpers the model and the views share: the paths a selector lists
 * (each with its parents), which span ids a selection keeps (a span keeps its sub-spans),
 * and the task counts of one span. No DOM.
 */

import { compareNatural } from './lanes';

/** Whether span path `path` is `selected` or one of its sub-spans. */
export function within(path: string | undefined, selected: string): boolean {
  return (
    path !== undefined && (path === selected || path.startsWith(`${selected}/`))
  );
}

/** Every path of `names` and its parents (`load/clean` -> `load`, `load/clean`), sorted. */
export function spanPaths(names: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const name of names) {
    const parts = name.split('/');
    for (let i = 1; i <= parts.length; i++) {
      out.add(parts.slice(0, i).join('/'));
    }
  }
  return [...out].sort(compareNatural);
}

/** Per span id (index), 1 when that span is `selected` or inside it (id 0: no span). */
export function spanMask(
  names: ReadonlyMap<number, string>,
  selected: string
): Uint8Array {
  let top = 0;
  for (const id of names.keys()) {
    top = Math.max(top, id);
  }
  const mask = new Uint8Array(top + 1);
  for (const [id, name] of names) {
    mask[id] = within(name, selected) ? 1 : 0;
  }
  return mask;
}

/** Tasks of one span: how many, how many failed, and per group finished/failed. */
export interface ISpanCounts {
  tasks: number;
  errors: number;
  /** Group id -> [finished (failed included), failed]. */
  groups: Map<number, [number, number]>;
}

/** Counts of the first `n` rows whose span is in `mask`. */
export function spanCounts(
  mask: Uint8Array,
  span: ArrayLike<number>,
  group: ArrayLike<number>,
  status: ArrayLike<number>,
  n: number
): ISpanCounts {
  const out: ISpanCounts = { tasks: 0, errors: 0, groups: new Map() };
  for (let r = 0; r < n; r++) {
    if (mask[span[r]] !== 1) {
      continue;
    }
    const failed = status[r] !== 0 ? 1 : 0;
    out.tasks++;
    out.errors += failed;
    const g = out.groups.get(group[r]);
    if (g) {
      g[0]++;
      g[1] += failed;
    } else {
      out.groups.set(group[r], [1, failed]);
    }
  }
  return out;
}

/**
 * Each row's group, or `dim` for rows outside the span (`mask` over span ids), for the
 * first `n` rows: what the task stream draws when a span is picked. Reuses `out` when it
 * is long enough.
 */
export function groupsInSpan(
  group: ArrayLike<number>,
  span: ArrayLike<number>,
  mask: Uint8Array,
  n: number,
  dim: number,
  out?: Uint16Array
): Uint16Array {
  const result =
    out && out.length >= n ? out : new Uint16Array(Math.max(n, 64));
  for (let r = 0; r < n; r++) {
    result[r] = mask[span[r]] === 1 ? group[r] : dim;
  }
  return result;
}
