/**
 * The daskprofile comm protocol, as written down in docs/protocol.md.
 *
 * Pure types and validators: no DOM, no JupyterLab imports, so the TypeScript unit tests
 * can decode the shared JSON fixtures exactly as the panel does.
 */

/** Name of the comm target the kernel side registers. */
export const COMM_TARGET = 'daskprofile';

/** Protocol version this frontend speaks; sent in the comm-open metadata. */
export const PROTOCOL_VERSION = '1.0';

/** Key of the protocol version in comm-open metadata. */
export const PROTOCOL_METADATA_KEY = 'daskprofile_protocol';

/** Silent code that registers the comm target in a kernel (idempotent). */
export const BOOTSTRAP_CODE =
  'import daskprofile.jupyter.comm as _daskprofile_comm\n' +
  '_daskprofile_comm.register_target()\n' +
  'del _daskprofile_comm';

/** Command the panel suggests when the kernel lacks daskprofile. */
export const INSTALL_HINT = '%pip install daskprofile';

/** The kernel's answer to the panel's hello. */
export interface IHelloMessage {
  type: 'hello';
  protocol: string;
  versions: { [name: string]: string };
  pid: number;
  paused: boolean;
}

/** An error the kernel reports (bad request, incompatible protocol). */
export interface IErrorMessage {
  type: 'error';
  code: string;
  message: string;
}

/** Major part of a "major.minor" version string, or NaN. */
export function majorVersion(version: unknown): number {
  if (typeof version !== 'string') {
    return NaN;
  }
  const match = /^(\d+)\.\d+$/.exec(version);
  return match ? Number(match[1]) : NaN;
}

/** Whether a peer speaking `version` can talk to this frontend. */
export function isCompatible(version: unknown): boolean {
  return majorVersion(version) === majorVersion(PROTOCOL_VERSION);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Validate a hello message; throws an Error naming the first bad field. */
export function parseHello(data: unknown): IHelloMessage {
  if (!isRecord(data) || data.type !== 'hello') {
    throw new Error('hello: not a hello message');
  }
  if (typeof data.protocol !== 'string') {
    throw new Error('hello: "protocol" must be a string');
  }
  if (!isRecord(data.versions)) {
    throw new Error('hello: "versions" must be an object');
  }
  const versions: { [name: string]: string } = {};
  for (const [name, value] of Object.entries(data.versions)) {
    versions[name] = String(value);
  }
  return {
    type: 'hello',
    protocol: data.protocol,
    versions,
    pid: typeof data.pid === 'number' ? data.pid : -1,
    paused: data.paused === true
  };
}
