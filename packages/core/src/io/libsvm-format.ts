// Writing LIBSVM text (`id index:value ...`, one row a line) from a CSR matrix, as bytes.
import { type Csr } from '../linalg/csr.js';
import { COLON, DOT, MINUS, NEWLINE, POW10, SPACE, ZERO } from './ascii.js';

/**
 * Which part of the matrix is written, and in which order: the columns [start, end) (renumbered
 * from 1), and either `rows` (line r is row rows[r]; each row at most once) or `lineOfRow` (row
 * i is line lineOfRow[i]: a permutation of 0..rows-1, e.g. randomPermutation's). Every row in
 * order by default.
 */
export interface LibsvmView {
  columns?: readonly [number, number];
  rows?: ArrayLike<number>;
  lineOfRow?: ArrayLike<number>;
}

/**
 * Room kept for one entry: ` ` + index (at most 10 digits) + `:` + a value. String(v) is at most
 * 25 characters: `-0.0000010000000000000002`, a sign, `0.`, five zeros and 17 digits.
 */
const ENTRY_BYTES = 40;


/** Decimal digits of a non-negative integer below 2^53, at least `width` of them (leading zeros). */
function writeDigits(buf: Buffer, pos: number, n: number, width: number): number {
  // Indices of one or two digits: the common case, without the loops.
  if (width <= 1 && n < 100) {
    if (n < 10) {
      buf[pos] = ZERO + n;
      return pos + 1;
    }
    const t = (n / 10) | 0;
    buf[pos] = ZERO + t;
    buf[pos + 1] = ZERO + (n - 10 * t);
    return pos + 2;
  }
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
const CACHE_BITS = 14;
const CACHE_SLOTS = 1 << CACHE_BITS;
const SLOT_BYTES = 32;

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
    const slot = Math.imul(this.words[0] ^ this.words[1], 0x9e3779b1) >>> (32 - CACHE_BITS);
    const at = slot * SLOT_BYTES;
    const text = this.text;
    // NaN never equals a key; 0 and -0 are equal, and both are written "0".
    if (this.key[slot] === v) {
      const n = this.length[slot];
      for (let b = 0; b < n; b++) buf[pos + b] = text[at + b];
      return pos + n;
    }
    const end = writeValue(buf, pos, v);
    if (end - pos > SLOT_BYTES) return end;
    this.key[slot] = v;
    this.length[slot] = end - pos;
    for (let b = pos; b < end; b++) text[at + b - pos] = buf[b];
    return end;
  }
}

/**
 * The ids' UTF-8 bytes, a newline after each, and where each starts (ids.length + 1 offsets: id i
 * ends one byte before at[i + 1]). The newline keeps a lone surrogate at the end of one id from
 * pairing with one at the start of the next: each is U+FFFD, as when every line was encoded.
 */
function encodeIds(ids: readonly string[]): Ids {
  const joined = ids.join('\n') + '\n';
  const bytes = Buffer.from(joined, 'utf8');
  const at = new Float64Array(ids.length + 1);
  const ascii = bytes.length === joined.length;
  for (let i = 0; i < ids.length; i++) at[i + 1] = at[i] + (ascii ? ids[i].length : Buffer.byteLength(ids[i], 'utf8')) + 1;
  return { bytes, at };
}

/** Bytes below this are copied by a loop: Buffer.copy costs more than the copy for a short id or line. */
const SHORT_COPY = 64;

function copyBytes(from: Buffer, start: number, end: number, to: Buffer, at: number): number {
  if (end - start >= SHORT_COPY) return at + from.copy(to, at, start, end);
  for (let b = start; b < end; b++) to[at++] = from[b];
  return at;
}

/**
 * Rows are formatted in the matrix's order (in a random row order every row was a few cache
 * misses: 1e6 rows took 1.0-1.3 s against 0.6 in order), each line appended to the bucket of
 * the output lines it falls among, with its place in the bucket and its line number written
 * next in that bucket's lists: every write goes to the end of one of a few hundred streams.
 * A bucket is then put in line order from cache. A bucket holds about this many bytes.
 */
const BUCKET_TARGET_BYTES = 1 << 19;

interface Ids {
  bytes: Buffer;
  at: Float64Array;
}

/** A view's lines: bucket q holds lines q << shift up to the next bucket's, in the order they were appended. */
interface Buckets {
  shift: number;
  text: Buffer[];
  /** The bytes of text[q] in use. */
  fill: Float64Array;
  /** At (q << shift) + a: where the a-th line appended to bucket q starts in its text, and its line number less q << shift. */
  start: Float64Array;
  line: Int32Array;
}

/** log2 of the lines per bucket: about BUCKET_TARGET_BYTES of text each, from the average line's length. */
function bucketShift(ids: Ids, X: Csr, lines: number): number {
  const bytes = ids.bytes.length + X.indptr[X.rows] * 12 + X.rows;
  const perLine = Math.max(1, bytes / Math.max(1, X.rows));
  return Math.max(0, Math.min(20, Math.floor(Math.log2(BUCKET_TARGET_BYTES / perLine)), Math.ceil(Math.log2(lines))));
}

/**
 * Buffers kept from one view to the next. Each new ArrayBuffer counts towards V8's external
 * memory, and every few tens of MB of them were a full garbage collection (40-90 ms with a
 * table's 1e6 ids on the heap): allocated afresh for each view they were about 10 of them, 0.6 s.
 */
interface Scratch {
  /** The buckets' text, cut into equal parts. */
  slab: Buffer;
  /** The lines in order (and a bucket's text being copied from), when one group takes them all. */
  out: Buffer;
}

/** Most bytes of a buffer made here (Buffer's limit is 4 GiB); past it, buckets grow on their own, and lines go to more chunks. */
const MAX_BUFFER_BYTES = 1 << 30;

/** Row i of X goes to line dest[i] (none when -1); `lines` lines in all. */
function formatLines(ids: Ids, X: Csr, start: number, end: number, dest: Int32Array, lines: number, scratch: Scratch, increasing: boolean): Buckets {
  const { bytes: idBytes, at } = ids;
  const { indptr, indices, values } = X;
  const texts = new ValueTexts();
  const shift = bucketShift(ids, X, lines);
  const buckets = ((lines - 1) >>> shift) + 1;
  const out: Buckets = { shift, text: [], fill: new Float64Array(buckets), start: new Float64Array(lines), line: new Int32Array(lines) };
  const count = new Int32Array(buckets);
  // Each bucket's part of the slab: a guess at its text (12 bytes a stored entry in the view's
  // share of the columns) and a quarter more, so that few buckets have to grow.
  const entries = (indptr[X.rows] / Math.max(1, X.rows)) * ((end - start) / Math.max(1, X.cols));
  const guess = (idBytes.length / Math.max(1, X.rows) + 1 + 12 * entries) * 2 ** shift;
  const part = Math.min(Math.ceil(1.25 * guess) + 256, Math.floor(MAX_BUFFER_BYTES / buckets));
  if (scratch.slab.length < part * buckets) scratch.slab = Buffer.allocUnsafe(part * buckets);
  for (let q = 0; q < buckets; q++) out.text.push(scratch.slab.subarray(q * part, (q + 1) * part));
  const mask = (1 << shift) - 1;
  for (let i = 0; i < X.rows; i++) {
    const r = dest[i];
    if (r < 0) continue;
    const q = r >>> shift;
    const from = at[i];
    const to = at[i + 1] - 1;
    let pos = out.fill[q];
    let buf = out.text[q];
    // Room for the id, the newline and ENTRY_BYTES for every entry of the row.
    const need = pos + to - from + 1 + ENTRY_BYTES * (indptr[i + 1] - indptr[i]);
    if (need > buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, 2 * buf.length));
      buf.copy(grown, 0, 0, pos);
      buf = out.text[q] = grown;
    }
    const a = (q << shift) + count[q]++;
    out.start[a] = pos;
    out.line[a] = r & mask;
    pos = copyBytes(idBytes, from, to, buf, pos);
    // With columns increasing in every row, the view's entries are one run of it.
    let k = indptr[i];
    const last = indptr[i + 1];
    if (increasing) while (k < last && indices[k] < start) k++;
    for (; k < last; k++) {
      const j = indices[k];
      if (increasing && j >= end) break;
      // A zero (or -0) is not written, as csrSliceColumns did not keep it before.
      if (j < start || j >= end || values[k] === 0) continue;
      buf[pos++] = SPACE;
      pos = writeDigits(buf, pos, j - start + 1, 1);
      buf[pos++] = COLON;
      pos = texts.write(buf, pos, values[k]);
    }
    buf[pos++] = NEWLINE;
    out.fill[q] = pos;
  }
  return out;
}

/**
 * The lines in order, in groups of buckets of at most MAX_BUFFER_BYTES (one for 1e6 rows): a
 * group's buffer takes its lines in order and, after them, the text of the bucket being copied,
 * so that every line is copied by copyWithin inside one buffer: 1e6 lines of 67 bytes took about
 * 45 ms so, against 90-280 by Buffer.copy and 160-220 byte by byte.
 */
function joinLines(b: Buckets, lines: number, scratch: Scratch): Buffer[] {
  const out: Buffer[] = [];
  const slot = new Int32Array(1 << b.shift);
  const buckets = b.text.length;
  for (let q0 = 0; q0 < buckets; ) {
    let q1 = q0;
    let total = 0;
    let widest = 0;
    for (; q1 < buckets && (q1 === q0 || total + b.fill[q1] + Math.max(widest, b.fill[q1]) <= MAX_BUFFER_BYTES); q1++) {
      total += b.fill[q1];
      widest = Math.max(widest, b.fill[q1]);
    }
    // Only the first group may reuse the kept buffer: a later one would overwrite it.
    let buf = scratch.out;
    if (q0 > 0 || buf.length < total + widest) buf = Buffer.allocUnsafe(total + widest);
    if (q0 === 0) scratch.out = buf;
    let pos = 0;
    for (let q = q0; q < q1; q++) {
      const base = q << b.shift;
      const n = Math.min(lines - base, 1 << b.shift);
      for (let a = 0; a < n; a++) slot[b.line[base + a]] = a;
      const fill = b.fill[q];
      b.text[q].copy(buf, total, 0, fill);
      for (let r = 0; r < n; r++) {
        const a = slot[r];
        const from = b.start[base + a];
        const to = a + 1 < n ? b.start[base + a + 1] : fill;
        buf.copyWithin(pos, total + from, total + to);
        pos += to - from;
      }
    }
    out.push(buf.subarray(0, total));
    q0 = q1;
  }
  return out;
}

/** dest[i]: the line row i of the matrix goes to, -1 for a row not written; and how many lines. */
function destinations(rowCount: number, view: LibsvmView): { dest: Int32Array; lines: number } {
  const { rows, lineOfRow } = view;
  if (rows && lineOfRow) throw new RangeError('give rows or lineOfRow, not both');
  const dest = new Int32Array(rowCount);
  if (lineOfRow) {
    // Checked to be a permutation by marks in line order: a random row order costs no random
    // writes here (the inverse, from `rows`, is one per row).
    if (lineOfRow.length !== rowCount) throw new RangeError(`lineOfRow has length ${lineOfRow.length}, expected ${rowCount}`);
    const seen = new Uint8Array(rowCount);
    for (let i = 0; i < rowCount; i++) {
      const r = lineOfRow[i];
      if (!(r >= 0 && r < rowCount && r === Math.floor(r)) || seen[r] !== 0) throw new RangeError(`lineOfRow is not a permutation of 0..${rowCount - 1} (line ${r} of row ${i})`);
      seen[r] = 1;
      dest[i] = r;
    }
    return { dest, lines: rowCount };
  }
  if (!rows) {
    for (let i = 0; i < rowCount; i++) dest[i] = i;
    return { dest, lines: rowCount };
  }
  dest.fill(-1);
  for (let r = 0; r < rows.length; r++) {
    const i = rows[r];
    if (!(i >= 0 && i < rowCount && i === Math.floor(i))) throw new RangeError(`row ${i} out of range 0..${rowCount - 1}`);
    if (dest[i] >= 0) throw new RangeError(`row ${i} is listed twice`);
    dest[i] = r;
  }
  return { dest, lines: rows.length };
}

/**
 * Whether every row's columns increase, as Csr says they do: checked once (about 25 ms for 24e6
 * entries), not taken on trust, since an entry skipped on the strength of it would be lost.
 */
function columnsIncrease(X: Csr): boolean {
  const { indptr, indices } = X;
  for (let i = 0; i < X.rows; i++) for (let k = indptr[i] + 1; k < indptr[i + 1]; k++) if (indices[k] <= indices[k - 1]) return false;
  return true;
}

/**
 * LIBSVM text with the sample id as the first token (`ids: 'first'`) for each view of X in
 * turn, handed to `each` as UTF-8 chunks to write one after the other (writeFileAtomic takes
 * them): each line `ids[i] j:v ...` for a row i of X (see LibsvmView for which and in which
 * order), with the entries of the view's columns only, renumbered from 1. A value is written as
 * String(v), as a template string would. The ids are encoded once for all views, and the
 * buffers kept: a view's chunks are valid until `each` returns (the next view may overwrite them).
 */
export function formatLibsvmViews(ids: readonly string[], X: Csr, views: readonly LibsvmView[], each: (chunks: Buffer[], view: number) => void): void {
  if (ids.length !== X.rows) throw new RangeError(`${ids.length} ids for ${X.rows} rows`);
  const encoded = encodeIds(ids);
  const scratch: Scratch = { slab: Buffer.alloc(0), out: Buffer.alloc(0) };
  const increasing = columnsIncrease(X);
  views.forEach((view, v) => {
    const [start, end] = view.columns ?? [0, X.cols];
    if (!(start >= 0 && start <= end && end <= X.cols)) throw new RangeError(`columns [${start}, ${end}) out of range 0..${X.cols}`);
    const { dest, lines } = destinations(X.rows, view);
    // No rows: a lone newline, as the joined lines were.
    each(lines === 0 ? [Buffer.from('\n')] : joinLines(formatLines(encoded, X, start, end, dest, lines, scratch, increasing), lines, scratch), v);
  });
}

/** formatLibsvmViews of one view, its chunks returned (no later view overwrites them). */
export function formatLibsvmWithIds(ids: readonly string[], X: Csr, view: LibsvmView = {}): Buffer[] {
  let out: Buffer[] = [];
  formatLibsvmViews(ids, X, [view], (chunks) => (out = chunks));
  return out;
}
