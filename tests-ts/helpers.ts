/** Helpers of the TypeScript unit tests: shared fixtures and message builders. */

import * as fs from 'node:fs';
import * as path from 'node:path';

/** Where the JSON fixtures shared with pytest live. */
export const FIXTURES = path.resolve(
  __dirname,
  '..',
  '..',
  'tests',
  'fixtures',
  'protocol'
);

/** A message as the comm delivers it: JSON data and binary buffers. */
export interface IWire {
  data: Record<string, unknown>;
  buffers: DataView[];
  /** What the encoder put in the columns (columnar fixtures only). */
  decoded?: Record<string, unknown>;
}

/** Base64 strings to DataViews (as the browser gets the comm's binary buffers). */
export function fromBase64(buffers: string[]): DataView[] {
  return buffers.map(b => {
    const bytes = Buffer.from(b, 'base64');
    const copy = new ArrayBuffer(bytes.length);
    new Uint8Array(copy).set(bytes);
    return new DataView(copy);
  });
}

/** Names of the shared fixtures (without `.json`), [] until they exist. */
export function fixtureNames(): string[] {
  if (!fs.existsSync(FIXTURES)) {
    return [];
  }
  return fs
    .readdirSync(FIXTURES)
    .filter(f => f.endsWith('.json'))
    .map(f => f.slice(0, -5))
    .sort();
}

/** A shared fixture decoded to the wire form. */
export function fixture(name: string): IWire {
  const raw = JSON.parse(
    fs.readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8')
  );
  return {
    data: raw.data,
    buffers: fromBase64(raw.buffers ?? []),
    decoded: raw.decoded
  };
}

function view(a: ArrayBufferView): DataView {
  return new DataView(a.buffer, a.byteOffset, a.byteLength);
}

/** A `tasks` message. */
export function tasksMessage(
  run: number | string,
  first: number,
  rows: {
    group: number;
    worker: number;
    status?: number;
    submit?: number;
    start: number;
    stop: number;
    /** Span id (protocol 1.2): a `span` column is sent when any row has one. */
    span?: number;
  }[],
  base = 0
): IWire {
  const n = rows.length;
  const spans = rows.some(r => r.span !== undefined);
  return {
    data: {
      type: 'tasks',
      run,
      n,
      base,
      first,
      columns: ['group', 'worker', 'status', 'submit', 'start', 'stop'].concat(
        spans ? ['span'] : []
      )
    },
    buffers: [
      view(new Uint16Array(rows.map(r => r.group))),
      view(new Uint16Array(rows.map(r => r.worker))),
      view(new Uint8Array(rows.map(r => r.status ?? 0))),
      view(new Float32Array(rows.map(r => (r.submit ?? r.start) - base))),
      view(new Float32Array(rows.map(r => r.start - base))),
      view(new Float32Array(rows.map(r => r.stop - base)))
    ].concat(spans ? [view(new Uint16Array(rows.map(r => r.span ?? 0)))] : [])
  };
}

/** A `spans` message (protocol 1.2): ids 1.. for `names`, from `first`. */
export function spansMessage(
  run: number | string,
  names: string[],
  first = 1
): Record<string, unknown> {
  return { type: 'spans', run, ids: names.map((_, i) => first + i), names };
}

/** A `resources` message (of one worker process when `source` is given). */
export function resourcesMessage(
  run: number | string,
  rows: { time: number; cpu: number; memory: number; processes?: number }[],
  base = 0,
  source?: string | null
): IWire {
  return {
    data: {
      type: 'resources',
      run,
      n: rows.length,
      base,
      ...(source === undefined ? {} : { source }),
      columns: ['time', 'cpu', 'memory', 'processes']
    },
    buffers: [
      view(new Float32Array(rows.map(r => r.time - base))),
      view(new Float32Array(rows.map(r => r.cpu))),
      view(new Float64Array(rows.map(r => r.memory))),
      view(new Uint16Array(rows.map(r => r.processes ?? 1)))
    ]
  };
}

/** A `cache` message. */
export function cacheMessage(
  run: number | string,
  rows: { time: number; group: number; metric: number }[],
  base = 0
): IWire {
  return {
    data: {
      type: 'cache',
      run,
      n: rows.length,
      base,
      columns: ['time', 'group', 'metric']
    },
    buffers: [
      view(new Float32Array(rows.map(r => r.time - base))),
      view(new Uint16Array(rows.map(r => r.group))),
      view(new Float64Array(rows.map(r => r.metric)))
    ]
  };
}

/** A stack tree in distributed's nested form. */
export function tree(
  name: string,
  count: number,
  children: Record<string, unknown>[] = []
): Record<string, unknown> {
  const kids: Record<string, unknown> = {};
  for (const c of children) {
    kids[String(c.identifier)] = c;
  }
  return {
    identifier: name === 'root' ? 'root' : `${name};file.py;1`,
    description: { filename: 'file.py', name, line_number: 1, line: '' },
    count,
    children: kids
  };
}

/** The JSON-only messages of a small run. */
export function runStart(
  run: number | string,
  title: string | null = 'x.sum()'
) {
  return {
    type: 'run_start',
    run,
    t0: 1000.5,
    wall0: 1.7e9,
    options: { tasks: true },
    title
  };
}

export function groupsMessage(
  run: number | string,
  names: string[],
  first = 0
) {
  return {
    type: 'groups',
    run,
    ids: names.map((_, i) => first + i),
    names,
    colors: names.map(() => '#1f77b4')
  };
}

export function workersMessage(
  run: number | string,
  labels: string[],
  kinds: string[] = labels.map(() => 'thread'),
  first = 0
) {
  return {
    type: 'workers',
    run,
    ids: labels.map((_, i) => first + i),
    labels,
    kinds
  };
}

// ------------------------------------------------------------------ protocol 1.2

/** An `actions` message (bytes NaN: not known). */
export function actionsMessage(
  run: number | string,
  first: number,
  rows: {
    worker: number;
    action: number;
    group?: number;
    start: number;
    stop: number;
    bytes?: number;
  }[],
  base = 0
): IWire {
  return {
    data: {
      type: 'actions',
      run,
      n: rows.length,
      base,
      first,
      columns: ['worker', 'action', 'group', 'start', 'stop', 'bytes']
    },
    buffers: [
      view(new Uint16Array(rows.map(r => r.worker))),
      view(new Uint8Array(rows.map(r => r.action))),
      view(new Uint16Array(rows.map(r => r.group ?? 0))),
      view(new Float32Array(rows.map(r => r.start - base))),
      view(new Float32Array(rows.map(r => r.stop - base))),
      view(new Float64Array(rows.map(r => r.bytes ?? NaN)))
    ]
  };
}

/** A `memory` message of worker `source`. */
export function memoryMessage(
  run: number | string,
  source: string,
  rows: {
    time: number;
    managed: number;
    unmanaged?: number;
    spilled?: number;
  }[],
  limit = 0,
  base = 0
): IWire {
  return {
    data: {
      type: 'memory',
      run,
      n: rows.length,
      base,
      source,
      limit,
      columns: ['time', 'managed', 'unmanaged', 'spilled']
    },
    buffers: [
      view(new Float32Array(rows.map(r => r.time - base))),
      view(new Float64Array(rows.map(r => r.managed))),
      view(new Float64Array(rows.map(r => r.unmanaged ?? 0))),
      view(new Float64Array(rows.map(r => r.spilled ?? 0)))
    ]
  };
}

/** A `transfers` message (rows incoming unless said otherwise). */
export function transfersMessage(
  run: number | string,
  addresses: string[],
  rows: {
    start: number;
    stop: number;
    source?: number;
    destination?: number;
    bytes: number;
    incoming?: number;
  }[],
  base = 0
): IWire {
  return {
    data: {
      type: 'transfers',
      run,
      n: rows.length,
      base,
      addresses,
      columns: ['start', 'stop', 'source', 'destination', 'bytes', 'incoming']
    },
    buffers: [
      view(new Float32Array(rows.map(r => r.start - base))),
      view(new Float32Array(rows.map(r => r.stop - base))),
      view(new Uint16Array(rows.map(r => r.source ?? 0))),
      view(new Uint16Array(rows.map(r => r.destination ?? 1))),
      view(new Float64Array(rows.map(r => r.bytes))),
      view(new Uint8Array(rows.map(r => r.incoming ?? 1)))
    ]
  };
}

/** An exception row as the kernel sends it. */
export function exceptionRow(
  key: string,
  extra: Record<string, unknown> = {}
): Record<string, unknown> {
  return {
    key,
    group: 'inc',
    worker: 'tcp://127.0.0.1:40123 thread 0',
    time: 0.5,
    type: 'ZeroDivisionError',
    message: 'division by zero',
    traceback: 'Traceback (most recent call last):\n  ...\n',
    ...extra
  };
}

/** A cluster worker as `cluster_workers` lists it. */
export function clusterWorker(
  address: string,
  extra: Record<string, unknown> = {}
): Record<string, unknown> {
  return {
    address,
    name: address.slice(-1),
    host: '127.0.0.1',
    threads: 2,
    memory_limit: 4e9,
    joined: null,
    left: null,
    reason: null,
    ...extra
  };
}
