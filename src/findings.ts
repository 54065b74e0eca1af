/**
 * Findings (the kernel's `run_end` `summary.findings`): why a run took the time it did.
 * Pure helpers the protocol decoder, the model and the views share: a strict decoder
 * (a malformed entry is dropped and counted, never thrown), the one-line text of a
 * finding, and what a picked finding highlights: a per-row mask of the tasks it names
 * (a chain's rows, else its groups' rows) and the task stream's colours with the others
 * dimmed. No DOM.
 */

/** Most task rows of one finding kept (the kernel sends at most 5,000). */
export const MAX_FINDING_ROWS = 5000;

/** One finding, as the panel keeps it. Texts are the kernel's: shown as text only. */
export interface IFinding {
  /** `gil-bound`, `critical-path`, `idle`, ... (a kind unknown here is kept as it is). */
  kind: string;
  /** What it concerns, in words: a group, a chain `f -> g (10)`, `parallelism`, ... */
  group: string;
  /** Seconds it is estimated to cost. */
  impactS: number;
  /** `impactS` as a share of the wall time. */
  share: number;
  message: string;
  suggestion: string;
  /** Names of the task groups it concerns ([] when none). */
  groups: string[];
  /** Protocol task row indices it names (a chain's, in order), or null. */
  rows: number[] | null;
}

/** The decoded findings of a summary and how many entries were malformed. */
export interface IDecodedFindings {
  findings: IFinding[];
  dropped: number;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function finite(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function strings(value: unknown): string[] | null {
  return Array.isArray(value) && value.every(v => typeof v === 'string')
    ? value
    : null;
}

function rowList(value: unknown): number[] | null {
  return Array.isArray(value) &&
    value.length <= MAX_FINDING_ROWS &&
    value.every(v => Number.isInteger(v) && v >= 0)
    ? (value as number[])
    : null;
}

/** One entry of `summary.findings`, or null when malformed. */
export function decodeFinding(value: unknown): IFinding | null {
  if (!isRecord(value)) {
    return null;
  }
  const { kind, group, message, suggestion } = value;
  const texts = [kind, group, message, suggestion];
  if (!texts.every(t => typeof t === 'string') || kind === '') {
    return null;
  }
  if (!finite(value.impact_s) || value.impact_s < 0 || !finite(value.share)) {
    return null;
  }
  const groups = value.groups === undefined ? [] : strings(value.groups);
  const noRows = value.rows === undefined || value.rows === null;
  const rows = noRows ? null : rowList(value.rows);
  if (groups === null || (rows === null && !noRows)) {
    return null;
  }
  return {
    kind: kind as string,
    group: group as string,
    impactS: value.impact_s,
    share: value.share,
    message: message as string,
    suggestion: suggestion as string,
    groups: [...groups],
    rows: rows ? [...rows] : null
  };
}

/**
 * The findings of a kernel summary (`summary.findings`): absent or null is none; each
 * malformed entry (or a value that is not a list) is dropped and counted.
 */
export function decodeFindings(value: unknown): IDecodedFindings {
  if (value === undefined || value === null) {
    return { findings: [], dropped: 0 };
  }
  if (!Array.isArray(value)) {
    return { findings: [], dropped: 1 };
  }
  const findings: IFinding[] = [];
  for (const entry of value) {
    const f = decodeFinding(entry);
    if (f) {
      findings.push(f);
    }
  }
  return { findings, dropped: value.length - findings.length };
}

/** Whether picking `finding` highlights anything (it names groups or rows). */
export function highlights(finding: IFinding): boolean {
  return finding.groups.length > 0 || (finding.rows?.length ?? 0) > 0;
}

/** `1.25 s (62 % of wall)`: a finding's impact. */
export function impactText(
  finding: IFinding,
  duration: (s: number) => string
): string {
  const pct = Math.round(finding.share * 100);
  return `${duration(finding.impactS)} (${pct} % of wall)`;
}

/** Ids of the groups (by id, sparse) whose name is one of `names`. */
export function groupIdsNamed(
  groups: readonly ({ id: number; name: string } | undefined)[],
  names: readonly string[]
): Set<number> {
  const wanted = new Set(names);
  const ids = new Set<number>();
  for (const g of groups) {
    if (g && wanted.has(g.name)) {
      ids.add(g.id);
    }
  }
  return ids;
}

/**
 * Per task row (the first `n`), 1 when `finding` names it: rows whose protocol index
 * (`index`) is one of the finding's `rows`, else rows whose group id is in `groupIds`.
 * Null when it names nothing.
 */
export function highlightMask(
  finding: IFinding,
  index: ArrayLike<number>,
  group: ArrayLike<number>,
  n: number,
  groupIds: ReadonlySet<number>
): Uint8Array | null {
  const rows = finding.rows;
  if (rows && rows.length > 0) {
    const wanted = new Set(rows);
    const mask = new Uint8Array(n);
    for (let r = 0; r < n; r++) {
      mask[r] = wanted.has(index[r]) ? 1 : 0;
    }
    return mask;
  }
  if (finding.groups.length === 0) {
    return null;
  }
  const mask = new Uint8Array(n);
  for (let r = 0; r < n; r++) {
    mask[r] = groupIds.has(group[r]) ? 1 : 0;
  }
  return mask;
}

/**
 * `shown` (each row's colour index) with the rows outside `keep` set to `dim`, for the
 * first `n` rows, written into `out` when it is long enough (it may be `shown` itself).
 */
export function dimOutside(
  shown: ArrayLike<number>,
  keep: Uint8Array,
  n: number,
  dim: number,
  out?: Uint16Array
): Uint16Array {
  const result =
    out && out.length >= n ? out : new Uint16Array(Math.max(n, 64));
  for (let r = 0; r < n; r++) {
    result[r] = keep[r] === 1 ? shown[r] : dim;
  }
  return result;
}

/** The one group a finding names, for the flame graph's group filter, or null. */
export function singleGroup(finding: IFinding | null): string | null {
  return finding && finding.groups.length === 1 ? finding.groups[0] : null;
}
