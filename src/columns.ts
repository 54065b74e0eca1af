/** Growable typed-array columns: amortised O(1) appends, contiguous storage (no DOM). */

type TypedArray =
  | Float64Array
  | Float32Array
  | Int32Array
  | Uint32Array
  | Uint16Array
  | Uint8Array;

interface ITypedCtor<T extends TypedArray> {
  new (length: number): T;
}

/** A typed array that doubles its capacity as rows are appended. */
export class Column<T extends TypedArray> {
  constructor(ctor: ITypedCtor<T>, capacity = 64) {
    this._ctor = ctor;
    this._data = new ctor(Math.max(1, capacity));
  }

  /** Rows in use. */
  get length(): number {
    return this._length;
  }

  /** The backing array (valid up to `length`; replaced when the column grows). */
  get data(): T {
    return this._data;
  }

  /** A view of the rows in use. */
  view(): T {
    return this._data.subarray(0, this._length) as T;
  }

  /** Make room for `extra` more rows. */
  reserve(extra: number): void {
    const need = this._length + extra;
    if (need <= this._data.length) {
      return;
    }
    let capacity = this._data.length;
    while (capacity < need) {
      capacity *= 2;
    }
    const grown = new this._ctor(capacity);
    grown.set(this._data.subarray(0, this._length));
    this._data = grown;
  }

  push(value: number): void {
    if (this._length === this._data.length) {
      this.reserve(1);
    }
    this._data[this._length++] = value;
  }

  /** Append `values` (each plus `offset`). */
  append(values: ArrayLike<number>, offset = 0): void {
    const n = values.length;
    this.reserve(n);
    const data = this._data;
    let j = this._length;
    if (offset === 0) {
      for (let i = 0; i < n; i++) {
        data[j++] = values[i];
      }
    } else {
      for (let i = 0; i < n; i++) {
        data[j++] = values[i] + offset;
      }
    }
    this._length = j;
  }

  clear(): void {
    this._length = 0;
  }

  /** Keep the first `length` rows only (no-op when there are no more). */
  truncate(length: number): void {
    this._length = Math.max(0, Math.min(this._length, length));
  }

  private _ctor: ITypedCtor<T>;
  private _data: T;
  private _length = 0;
}
