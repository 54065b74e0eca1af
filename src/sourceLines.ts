/**
 * The line view of one function (pure, no DOM): the samples at each line of a function,
 * summed over every node of a flame tree with the function's identifier (all its call
 * paths in the group or view shown), the scale from samples to estimated seconds, and the
 * rows a source view draws (the function's text, when the kernel found it, beside the
 * counts). Shared by the lab panel and the standalone inline view.
 */

import { IFlameNode } from './flame';
import { ISourceInfo } from './protocol';

/** Identifier prefix of the nodes standing for task groups (see flame.combineGroups). */
const GROUP_PREFIX = 'group:';

/**
 * How samples become estimated seconds: a task group's samples stand for the compute time
 * of its tasks, so one sample of group `g` is `taskSeconds[g] / samples[g]` seconds.
 */
export interface ISampleScale {
  /** Seconds per sample, by task group name. */
  groups: Map<string, number>;
  /** Seconds per sample where the group has no scale of its own (null: unknown). */
  fallback: number | null;
}

/** A scale that knows no seconds (counts only). */
export const NO_SCALE: ISampleScale = { groups: new Map(), fallback: null };

/**
 * The scale from each group's task compute time and stack samples (whole run), as
 * `daskprofile.compare` estimates seconds: groups with both get their own ratio; others
 * take `interval` (the sampling period, seconds) when known, else the ratio over all the
 * groups with both, else null (counts only).
 */
export function sampleScale(
  taskSeconds: Map<string, number>,
  samples: Map<string, number>,
  interval: number | null = null
): ISampleScale {
  const groups = new Map<string, number>();
  let seconds = 0;
  let counted = 0;
  for (const [group, n] of samples) {
    const s = taskSeconds.get(group) ?? 0;
    if (n > 0 && s > 0) {
      groups.set(group, s / n);
      seconds += s;
      counted += n;
    }
  }
  const fallback =
    interval !== null && interval > 0
      ? interval
      : counted > 0
        ? seconds / counted
        : null;
  return { groups, fallback };
}

/** Compute seconds (stop - start) of the tasks of each group, by group name. */
export function taskSecondsByGroup(
  group: ArrayLike<number>,
  start: ArrayLike<number>,
  stop: ArrayLike<number>,
  n: number,
  name: (id: number) => string
): Map<string, number> {
  const byId = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const d = stop[i] - start[i];
    if (d > 0 && Number.isFinite(d)) {
      byId.set(group[i], (byId.get(group[i]) ?? 0) + d);
    }
  }
  const out = new Map<string, number>();
  for (const [id, s] of byId) {
    const key = name(id);
    out.set(key, (out.get(key) ?? 0) + s);
  }
  return out;
}

/** What `runSampleScale` reads of a run (the panel model's RunData has it). */
export interface IScaledRun {
  readonly taskCount: number;
  readonly taskGroup: { readonly data: ArrayLike<number> };
  readonly taskStart: { readonly data: ArrayLike<number> };
  readonly taskStop: { readonly data: ArrayLike<number> };
  group(id: number): { name: string };
  readonly stacks: ReadonlyMap<string, { count: number }>;
  readonly options: Record<string, unknown>;
}

/**
 * Seconds per stack sample of each task group of `run`: the group's task compute time
 * over its samples (see `sampleScale`; the run's options may name the `interval`).
 */
export function runSampleScale(run: IScaledRun): ISampleScale {
  const taskSeconds = taskSecondsByGroup(
    run.taskGroup.data,
    run.taskStart.data,
    run.taskStop.data,
    run.taskCount,
    id => run.group(id).name
  );
  const samples = new Map<string, number>();
  for (const [group, tree] of run.stacks) {
    samples.set(group, tree.count);
  }
  const interval = run.options.interval;
  return sampleScale(
    taskSeconds,
    samples,
    typeof interval === 'number' && Number.isFinite(interval) ? interval : null
  );
}

/** One line of a function with samples. */
export interface ILineCount {
  line: number;
  samples: number;
  /** Estimated seconds (null: no scale known). */
  seconds: number | null;
}

/** The samples of one function, line by line, in one flame tree. */
export interface IFunctionLines {
  identifier: string;
  name: string;
  filename: string;
  /** First line of the function (from the identifier; 0 when unknown). */
  firstLine: number;
  /** Samples with the function on the stack (its outermost calls: recursion counted once). */
  samples: number;
  /** Estimated seconds of `samples` (null: no scale known). */
  seconds: number | null;
  /** Lines with samples, by line number. */
  lines: ILineCount[];
}

/** `name;filename;firstlineno` split (the filename may itself hold `;`). */
export function splitIdentifier(identifier: string): {
  name: string;
  filename: string;
  firstLine: number;
} {
  const first = identifier.indexOf(';');
  const last = identifier.lastIndexOf(';');
  if (first < 0 || last === first) {
    return { name: identifier, filename: '', firstLine: 0 };
  }
  const line = Number(identifier.slice(last + 1));
  return {
    name: identifier.slice(0, first),
    filename: identifier.slice(first + 1, last),
    firstLine: Number.isInteger(line) && line >= 0 ? line : 0
  };
}

function perSample(scale: ISampleScale, group: string | null): number | null {
  const own = group === null ? undefined : scale.groups.get(group);
  return own ?? scale.fallback;
}

/**
 * The lines of function `identifier` in tree `root`: the `lines` of every node with that
 * identifier summed (each scaled by the seconds per sample of the task group it is under:
 * a node `group:<name>`, or the root's own name for a one-group tree).
 */
export function collectLines(
  root: IFlameNode,
  identifier: string,
  scale: ISampleScale = NO_SCALE
): IFunctionLines {
  const samples = new Map<number, number>();
  const seconds = new Map<number, number>();
  let total = 0;
  let totalSeconds = 0;
  let unknown = false;
  let found: IFlameNode | null = null;
  const todo: [IFlameNode, string | null, boolean][] = [
    [root, root.name || null, false]
  ];
  while (todo.length > 0) {
    const [node, group0, inside] = todo.pop()!;
    const group = node.identifier.startsWith(GROUP_PREFIX) ? node.name : group0;
    const match = node.identifier === identifier;
    if (match) {
      found = found ?? node;
      const k = perSample(scale, group);
      unknown = unknown || k === null;
      for (const [line, n] of node.lines) {
        samples.set(line, (samples.get(line) ?? 0) + n);
        seconds.set(line, (seconds.get(line) ?? 0) + n * (k ?? 0));
      }
      if (!inside) {
        total += node.count;
        totalSeconds += node.count * (k ?? 0);
      }
    }
    for (const c of node.children) {
      todo.push([c, group, inside || match]);
    }
  }
  const parts = splitIdentifier(identifier);
  const lines = [...samples.keys()]
    .sort((a, b) => a - b)
    .map(line => ({
      line,
      samples: samples.get(line)!,
      seconds: unknown ? null : seconds.get(line)!
    }));
  return {
    identifier,
    name: found?.name || parts.name,
    filename: found?.filename || parts.filename,
    firstLine: parts.firstLine,
    samples: total,
    seconds: unknown ? null : totalSeconds,
    lines
  };
}

/** One row of a source view: a line of the function, its text and its samples. */
export interface ISourceRow {
  line: number;
  /** The line's text (null: not known). */
  text: string | null;
  samples: number;
  seconds: number | null;
  /** Share of the function's samples at this line (0..1). */
  share: number;
}

/** What a source view shows for one function. */
export interface ISourceTable {
  name: string;
  /** The file as the user knows it (a path or `Cell In[5]`), '' when unknown. */
  file: string;
  /** Whether the function's text is known. */
  hasSource: boolean;
  samples: number;
  seconds: number | null;
  /** Largest samples of one row (scales the heat bars; 0 when none). */
  maxSamples: number;
  rows: ISourceRow[];
}

/**
 * The rows of a source view, by line number: every line of `source` (when known) with
 * its samples, and any line with samples that the text does not cover; without a source,
 * the lines with samples only.
 */
export function sourceTable(
  fn: IFunctionLines,
  source: ISourceInfo | undefined
): ISourceTable {
  const counts = new Map(fn.lines.map(l => [l.line, l]));
  const denominator = Math.max(
    fn.samples,
    fn.lines.reduce((m, l) => Math.max(m, l.samples), 0)
  );
  const row = (line: number, text: string | null): ISourceRow => {
    const c = counts.get(line);
    const samples = c?.samples ?? 0;
    return {
      line,
      text,
      samples,
      seconds: c ? c.seconds : fn.seconds === null ? null : 0,
      share: denominator > 0 ? samples / denominator : 0
    };
  };
  const rows: ISourceRow[] = [];
  const covered = new Set<number>();
  if (source) {
    source.text.forEach((text, i) => {
      const line = source.start + i;
      covered.add(line);
      rows.push(row(line, text));
    });
  }
  for (const l of fn.lines) {
    if (!covered.has(l.line)) {
      rows.push(row(l.line, null));
    }
  }
  rows.sort((a, b) => a.line - b.line);
  return {
    name: source?.name || fn.name,
    file: source?.file || fn.filename,
    hasSource: source !== undefined,
    samples: fn.samples,
    seconds: fn.seconds,
    maxSamples: rows.reduce((m, r) => Math.max(m, r.samples), 0),
    rows
  };
}
