// Writing LIBSVM text (`id index:value ...`, one row a line) from a CSR matrix, as bytes.
import { type Csr } from '../linalg/csr.js';

/** Which part of the matrix is written: rows in this order (each at most once) and columns [start, end), renumbered from 1. */
export interface LibsvmView {
  rows?: ArrayLike<number>;
  columns?: readonly [number, number];
}

/**
 * Bytes per chunk of output. A chunk is filled and the next one started, so a file of any size
 * is never one string (the old formatter built a string per line and joined them: 7-9 s for a
 * party's 1e6 rows) nor one buffer.
 */
const CHUNK_BYTES = 1 << 20;
/** Room kept for one entry: ` ` + index (at most 10 digits) + `:` + a value (String(v) is at most 24 characters). */
const ENTRY_BYTES = 40;

const ZERO = 0x30;
const SPACE = 0x20;
const COLON = 0x3a;
const NEWLINE = 0x0a;
const MINUS = 0x2d;
const DOT = 0x2e;
/** 10^k, exact for k <= 22. */
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);

/** Decimal digits of a non-negative integer below 2^53, at least `width` of them (leading zeros). */
function writeDigits(buf: Buffer, pos: number, n: number, width: number): number {
  let d = 1;
  while (d < 16 && n >= POW10[d]) d++;
  if (d < width) d = width;
  let at = pos + d;
  while (n >= 2 ** 31) {
    const q = Math.floor(n / 10);
    buf[--at] = ZERO + (n - q * 10);
    n = q;
  }
  let m = n | 0;
  while (at > pos) {
    const q = (m / 10) | 0;
    buf[--at] = ZERO + (m - q * 10);
    m = q;
  }
  return pos + d;
}

/**
 * `String(v)` written at `pos`; returns the end. The common value, |v| from 1e-6 (below it
 * String writes an exponent) with a shortest decimal form of at most 15 digits, is found by
 * arithmetic: the least k with round(|v| 10^k) / 10^k === |v|. That m / 10^k is correctly
 * rounded (m < 2^53 and 10^k exact: Clinger's fast path), so it reads back as v; and no form
 * with fewer digits reads back as v, else the same test would have found it at a smaller k
 * (the product |v| 10^k is within 0.12 of an integer that round-trips, so round() finds it).
 * With m < 10^15 the numbers reading back as v span less than 0.23 at the last digit, so
 * that form is the only one of its length: the one String(v) writes (ECMAScript
 * Number::toString). Everything else (exponents, 16-17 digits, NaN) goes through String(v).
 */
function writeValue(buf: Buffer, pos: number, v: number): number {
  const a = v < 0 ? -v : v;
  if (a >= 1e-6 && a < 1e15) {
    let k = 0;
    let p = 1;
    let m = Math.round(a);
    for (;;) {
      if (m / p === a) {
        if (v < 0) buf[pos++] = MINUS;
        if (k === 0) return writeDigits(buf, pos, m, 1);
        const frac = m % p;
        pos = writeDigits(buf, pos, (m - frac) / p, 1);
        buf[pos++] = DOT;
        return writeDigits(buf, pos, frac, k);
      }
      if (++k > 22) break;
      p = POW10[k];
      const s = a * p;
      if (s >= 1e15) break;
      m = Math.round(s);
    }
  }
  return pos + buf.write(String(v), pos, 'latin1');
}

/** Values whose text a cache slot holds (a power of 2), and the bytes a slot has for it. */
const CACHE_SLOTS = 1 << 12;
const SLOT_BYTES = 24;

/**
 * writeValue through a direct-mapped cache of the texts last written: data files hold few
 * distinct values as a rule (one-hot 1s, values of a few decimals), and a hit is a hash and a
 * copy of a few bytes, against a search and digit loop (6e6 values of 3 decimals: 160 ms
 * against 300).
 */
class ValueTexts {
  private readonly key = new Float64Array(CACHE_SLOTS).fill(NaN);
  private readonly length = new Uint8Array(CACHE_SLOTS);
  private readonly text = Buffer.alloc(CACHE_SLOTS * SLOT_BYTES);
  private readonly bits = new Float64Array(1);
  private readonly words = new Uint32Array(this.bits.buffer);

  write(buf: Buffer, pos: number, v: number): number {
    this.bits[0] = v;
    const slot = Math.imul(this.words[0] ^ this.words[1], 0x9e3779b1) >>> 20;
    const at = slot * SLOT_BYTES;
    const text = this.text;
    // NaN never equals a key; 0 and -0 are equal, and both are written "0".
    if (this.key[slot] === v) {
      const n = this.length[slot];
      for (let b = 0; b < n; b++) buf[pos + b] = text[at + b];
      return pos + n;
    }
    const end = writeValue(buf, pos, v);
    this.key[slot] = v;
    this.length[slot] = end - pos;
    for (let b = pos; b < end; b++) text[at + b - pos] = buf[b];
    return end;
  }
}

/** The ids' UTF-8 bytes, back to back, and where each starts (ids.length + 1 offsets). */
function encodeIds(ids: readonly string[]): { bytes: Buffer; at: Float64Array } {
  const joined = ids.join('');
  const bytes = Buffer.from(joined, 'utf8');
  const at = new Float64Array(ids.length + 1);
  const ascii = bytes.length === joined.length;
  for (let i = 0; i < ids.length; i++) at[i + 1] = at[i] + (ascii ? ids[i].length : Buffer.byteLength(ids[i], 'utf8'));
  return { bytes, at };
}

/** Bytes below this are copied by a loop: Buffer.copy costs more than the copy for a short id or line. */
const SHORT_COPY = 64;

function copyBytes(from: Buffer, start: number, end: number, to: Buffer, at: number): number {
  if (end - start >= SHORT_COPY) return at + from.copy(to, at, start, end);
  for (let b = start; b < end; b++) to[at++] = from[b];
  return at;
}

/** Where each output line was written: line r is chunks[chunk[r]], bytes start[r] to end[r]. */
interface Lines {
  chunks: Buffer[];
  chunk: Int32Array;
  start: Int32Array;
  end: Int32Array;
}

/**
 * Every line, formatted with the matrix read front to back (row i goes to line dest[i], none
 * when -1): in a random row order every row of the matrix was a few cache misses, and 1e6
 * rows took 1.0-1.3 s against 0.6 in order. A line is whole in one chunk.
 */
function formatLines(ids: readonly string[], X: Csr, start: number, end: number, dest: Int32Array, lines: number): Lines {
  const { bytes: idBytes, at } = encodeIds(ids);
  const { indptr, indices, values } = X;
  const texts = new ValueTexts();
  const out: Lines = { chunks: [], chunk: new Int32Array(lines), start: new Int32Array(lines), end: new Int32Array(lines) };
  let buf = Buffer.allocUnsafe(CHUNK_BYTES);
  let pos = 0;
  for (let i = 0; i < X.rows; i++) {
    const r = dest[i];
    if (r < 0) continue;
    const from = at[i];
    const to = at[i + 1];
    // Room for the id, the newline and ENTRY_BYTES for every entry of the row.
    const need = to - from + 1 + ENTRY_BYTES * (indptr[i + 1] - indptr[i]);
    if (pos + need > buf.length) {
      out.chunks.push(buf.subarray(0, pos));
      buf = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, need));
      pos = 0;
    }
    out.chunk[r] = out.chunks.length;
    out.start[r] = pos;
    pos = copyBytes(idBytes, from, to, buf, pos);
    for (let k = indptr[i]; k < indptr[i + 1]; k++) {
      const j = indices[k];
      if (j < start || j >= end) continue;
      buf[pos++] = SPACE;
      pos = writeDigits(buf, pos, j - start + 1, 1);
      buf[pos++] = COLON;
      pos = texts.write(buf, pos, values[k]);
    }
    buf[pos++] = NEWLINE;
    out.end[r] = pos;
  }
  out.chunks.push(buf.subarray(0, pos));
  return out;
}

/** The lines in order, in chunks of about CHUNK_BYTES (copied: the lines are in another order). */
function joinLines(lines: Lines): Buffer[] {
  const out: Buffer[] = [];
  let buf = Buffer.allocUnsafe(CHUNK_BYTES);
  let pos = 0;
  for (let r = 0; r < lines.start.length; r++) {
    const from = lines.start[r];
    const to = lines.end[r];
    if (pos + to - from > buf.length) {
      out.push(buf.subarray(0, pos));
      buf = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, to - from));
      pos = 0;
    }
    pos = copyBytes(lines.chunks[lines.chunk[r]], from, to, buf, pos);
  }
  out.push(buf.subarray(0, pos));
  return out;
}

/** dest[i]: the line row i of the matrix goes to (rows[dest[i]] === i), -1 for a row not written. */
function destinations(rowCount: number, rows: ArrayLike<number> | undefined): Int32Array {
  const dest = new Int32Array(rowCount);
  if (!rows) {
    for (let i = 0; i < rowCount; i++) dest[i] = i;
    return dest;
  }
  dest.fill(-1);
  for (let r = 0; r < rows.length; r++) {
    const i = rows[r];
    if (!(Number.isInteger(i) && i >= 0 && i < rowCount)) throw new RangeError(`row ${i} out of range 0..${rowCount - 1}`);
    if (dest[i] >= 0) throw new RangeError(`row ${i} is listed twice`);
    dest[i] = r;
  }
  return dest;
}

/**
 * LIBSVM text with the sample id as the first token (`ids: 'first'`), as UTF-8 chunks to write
 * one after the other (writeFileAtomic takes them): line r is `ids[i] j:v ...` for row
 * i = rows[r] of X (every row in order by default), with the entries of the columns in
 * `columns` only, renumbered from 1. A value is written as String(v), as a template string
 * would: the same text as before this formatter wrote bytes.
 */
export function formatLibsvmWithIds(ids: readonly string[], X: Csr, view: LibsvmView = {}): Buffer[] {
  const [start, end] = view.columns ?? [0, X.cols];
  if (ids.length !== X.rows) throw new RangeError(`${ids.length} ids for ${X.rows} rows`);
  if (!(start >= 0 && start <= end && end <= X.cols)) throw new RangeError(`columns [${start}, ${end}) out of range 0..${X.cols}`);
  const n = view.rows ? view.rows.length : X.rows;
  // No rows: a lone newline, as the joined lines were.
  if (n === 0) return [Buffer.from('\n')];
  const lines = formatLines(ids, X, start, end, destinations(X.rows, view.rows), n);
  // In the matrix's order the chunks are the file already.
  return view.rows ? joinLines(lines) : lines.chunks;
}
