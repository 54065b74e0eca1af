/**
 * The data of an inline view: what `daskprofile.jupyter.inline` writes into a
 * `<script type="application/json">` next to the view. It holds the protocol messages the
 * panel would receive when a finished run is replayed (docs/protocol.md), their binary
 * buffers in base64, plus the notes the kernel side made when it reduced the run to stay
 * light (e.g. tasks merged into busy bars). Pure: no DOM beyond `atob`.
 */

/** Version of this format (the `format` field); a view refuses other major versions. */
export const INLINE_FORMAT = 1;

/** One message: its JSON data and its buffers (base64). */
export type IInlineMessage = [Record<string, unknown>, string[]];

/** The decoded payload. */
export interface IInlinePayload {
  format: number;
  /** The view's title (e.g. `%%daskprofile`). */
  title: string;
  /** The profiled cell's code, or null. */
  code: string | null;
  /** What was reduced to keep the output light, one sentence each (plain text). */
  notes: string[];
  /** Tasks in each bar of the task stream when close tasks were merged, else null. */
  merged: Uint32Array | null;
  messages: IInlineMessage[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isMessage(value: unknown): value is IInlineMessage {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    isRecord(value[0]) &&
    Array.isArray(value[1]) &&
    value[1].every(b => typeof b === 'string')
  );
}

/** Parse the JSON text of a payload; throws an Error saying what is wrong. */
export function parsePayload(text: string): IInlinePayload {
  const data: unknown = JSON.parse(text);
  if (!isRecord(data)) {
    throw new Error('daskprofile: the inline view data is not an object');
  }
  if (data.format !== INLINE_FORMAT) {
    throw new Error(
      `daskprofile: inline view data of format ${String(data.format)}, this view reads ${INLINE_FORMAT}`
    );
  }
  const messages = data.messages;
  if (!Array.isArray(messages) || !messages.every(isMessage)) {
    throw new Error('daskprofile: the inline view data has no valid messages');
  }
  const notes = Array.isArray(data.notes)
    ? data.notes.filter((n): n is string => typeof n === 'string')
    : [];
  return {
    format: INLINE_FORMAT,
    title: typeof data.title === 'string' ? data.title : 'Dask profile',
    code: typeof data.code === 'string' ? data.code : null,
    notes,
    merged: typeof data.merged === 'string' ? counts(data.merged) : null,
    messages
  };
}

/** Little-endian uint32 counts from base64. */
function counts(text: string): Uint32Array {
  const view = base64View(text);
  const out = new Uint32Array(view.byteLength >> 2);
  for (let i = 0; i < out.length; i++) {
    out[i] = view.getUint32(i * 4, true);
  }
  return out;
}

/** The bytes of a base64 string, as the DataView the model's decoders read. */
export function base64View(text: string): DataView {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) {
    bytes[i] = binary.charCodeAt(i);
  }
  return new DataView(bytes.buffer);
}
