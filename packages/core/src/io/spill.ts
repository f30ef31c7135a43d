// Data a process keeps for later but does not need in memory meanwhile, kept in a temporary
// file instead: a party's points of the intersection (for a repeated psi), and a sparse data
// file's matrix (for the rows a set-up selects). A million-row party holds 64 MB of points and
// 70 MB of CSR that way outside its resident memory, through the intersection, the set-up and
// every round (docs/scaling.md, a party's memory).
//
// The file (mode 0600, in the system's temporary folder) is removed as soon as it is written
// and stays open: nothing is left behind however the process ends. Where no temporary file can
// be written, or an open one cannot be removed, the data stays in memory.
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SparseSink } from '../linalg/block.js';
import { type Csr, CsrBuilder, MAX_NNZ, csrSelectRowsInto, csrSelectedEntries } from '../linalg/csr.js';

/** Bytes read or written at a time (a selection copies its rows out of each piece). */
const PIECE_BYTES = 1 << 20;

/** Closes the file of a TempFile no longer referenced (a label set replaced by a new one), which frees its space. */
const closer = new FinalizationRegistry<number>((fd) => {
  try {
    closeSync(fd);
  } catch {
    /* already closed */
  }
});

/** A temporary file already removed, written once; undefined where none can be made. */
class TempFile {
  private constructor(private readonly fd: number) {
    closer.register(this, fd);
  }

  /** A file holding `parts` one after the other, or undefined. */
  static of(parts: readonly ArrayBufferView[]): TempFile | undefined {
    const file = TempFile.empty();
    try {
      let at = 0;
      for (const p of parts) {
        const bytes = new Uint8Array(p.buffer, p.byteOffset, p.byteLength);
        file?.write(bytes, at);
        at += bytes.length;
      }
      return file;
    } catch {
      return undefined;
    }
  }

  /** An empty file, already removed, to write into; undefined where none can be made. */
  static empty(): TempFile | undefined {
    let dir: string | undefined;
    let fd: number | undefined;
    try {
      dir = mkdtempSync(join(tmpdir(), 'admm-spill-'));
      fd = openSync(join(dir, 'data'), 'wx+', 0o600);
      // Removed while open: where the system refuses (an open file cannot be removed there),
      // the file is given up, and the data stays in memory.
      rmSync(dir, { recursive: true });
      return new TempFile(fd);
    } catch {
      if (fd !== undefined) closeSync(fd);
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
      return undefined;
    }
  }

  /** Writes `bytes` at byte `at` of the file. */
  write(bytes: Uint8Array, at: number): void {
    for (let k = 0; k < bytes.length; ) k += writeSync(this.fd, bytes, k, Math.min(PIECE_BYTES, bytes.length - k), at + k);
  }

  /** Fills `into` with the file's bytes from byte `at`. */
  read(into: Uint8Array, at: number): void {
    for (let k = 0; k < into.length; ) {
      const got = readSync(this.fd, into, k, into.length - k, at + k);
      if (got === 0) throw new Error(`a temporary file ended at byte ${at + k}, before the ${into.length} bytes asked for from ${at}`);
      k += got;
    }
  }
}

/** Bytes kept in a temporary file, and read back, a piece at a time, when asked for. */
export class SpilledBytes {
  private readonly file: TempFile | undefined;
  private readonly kept: Uint8Array | undefined;
  readonly length: number;

  constructor(bytes: Uint8Array | { length: number; file: TempFile | undefined; kept: Uint8Array | undefined }) {
    this.length = bytes.length;
    if (bytes instanceof Uint8Array) {
      this.file = TempFile.of([bytes]);
      this.kept = this.file ? undefined : bytes;
    } else ({ file: this.file, kept: this.kept } = bytes);
  }

  /**
   * `length` bytes written a piece at a time, at any offsets (`write`), then read as a
   * SpilledBytes (`done`): the whole never needs to be in memory, except where no temporary
   * file can be made (then they are kept in an array).
   */
  static writer(length: number): { write(at: number, bytes: Uint8Array): void; done(): SpilledBytes } {
    const file = TempFile.empty();
    const kept = file ? undefined : new Uint8Array(length);
    return {
      write(at, bytes) {
        if (at < 0 || at + bytes.length > length) throw new RangeError(`bytes ${at} to ${at + bytes.length} written to ${length}`);
        if (kept) kept.set(bytes, at);
        else file!.write(bytes, at);
      },
      done: () => new SpilledBytes({ length, file, kept }),
    };
  }

  /** Whether the bytes are in a file (not kept in memory). */
  get spilled(): boolean {
    return this.file !== undefined;
  }

  /** Bytes `at` to `at + into.length` copied into `into`. */
  readAt(at: number, into: Uint8Array): void {
    if (at < 0 || at + into.length > this.length) throw new RangeError(`bytes ${at} to ${at + into.length} asked of ${this.length}`);
    if (this.kept) into.set(this.kept.subarray(at, at + into.length));
    else this.file!.read(into, at);
  }
}

/** Where a SpilledCsr's entries are: its indices from the start of one file, its values from `valuesAt` of another (or the same). */
interface EntryFiles {
  indices: TempFile;
  values: TempFile;
  valuesAt: number;
}

/**
 * A CSR matrix whose entries wait in a temporary file (its indices, then its values): only its
 * row pointers stay in memory (4 bytes a row). A selection of rows is read back piece by piece,
 * in file order, straight into the arrays it is used from.
 */
export class SpilledCsr {
  readonly rows: number;
  readonly cols: number;
  private readonly indptr: Int32Array;
  private readonly files: EntryFiles | undefined;
  /** The matrix itself where no temporary file could be written. */
  private readonly kept: Csr | undefined;

  /** `a` spilled; or (from SpillingCsrBuilder) entries already in files, with row pointers from 0. */
  constructor(a: Csr | { rows: number; cols: number; indptr: Int32Array; files: EntryFiles }) {
    this.rows = a.rows;
    this.cols = a.cols;
    if ('files' in a) {
      this.indptr = a.indptr;
      this.files = a.files;
      return;
    }
    const first = a.indptr[0];
    const nnz = a.indptr[a.rows] - first;
    this.indptr = a.indptr.map((p) => p - first);
    const file = TempFile.of([a.indices.subarray(first, first + nnz), a.values.subarray(first, first + nnz)]);
    this.files = file ? { indices: file, values: file, valuesAt: 4 * nnz } : undefined;
    this.kept = this.files ? undefined : { ...a, indptr: this.indptr, indices: a.indices.subarray(first, first + nnz), values: a.values.subarray(first, first + nnz) };
  }

  /** Whether the entries are in a file (not kept in memory). */
  get spilled(): boolean {
    return this.files !== undefined;
  }

  /** Its stored entries. */
  nonzeros(): number {
    return this.indptr[this.rows];
  }

  /** The entries of the rows `order`; throws on a row out of range. */
  selectedEntries(order: ArrayLike<number>): number {
    return csrSelectedEntries({ rows: this.rows, indptr: this.indptr }, order);
  }

  /** Rows `order[0], order[1], ...` as a new CSR matrix (csrSelectRows). */
  selectCsr(order: ArrayLike<number>): Csr {
    const nnz = this.selectedEntries(order);
    const out = { rows: order.length, cols: this.cols, indptr: new Int32Array(order.length + 1), indices: new Int32Array(nnz), values: new Float64Array(nnz) };
    this.selectInto(out, order);
    return out;
  }

  /**
   * Rows `order` (each at most once) into `out`, whose arrays have the lengths order.length + 1
   * and selectedEntries(order) (csrSelectRowsInto).
   */
  selectInto(out: Csr, order: ArrayLike<number>): void {
    const { indptr, rows } = this;
    // at[r]: where row r goes, -1 for a row not selected.
    const at = new Int32Array(rows).fill(-1);
    out.indptr[0] = 0;
    for (let i = 0; i < order.length; i++) {
      const r = order[i];
      if (!(r >= 0 && r < rows)) throw new RangeError(`row ${r} out of range 0..${rows - 1}`);
      if (at[r] >= 0) throw new RangeError(`row ${r} selected twice`);
      at[r] = i;
    }
    if (this.kept) csrSelectRowsInto(out, this.kept, order);
    else {
      for (let i = 0; i < order.length; i++) out.indptr[i + 1] = out.indptr[i] + indptr[order[i] + 1] - indptr[order[i]];
      const nnz = this.nonzeros();
      const { indices, values, valuesAt } = this.files!;
      this.copyOut(out.indices, new Int32Array(PIECE_BYTES / 4), indices, 0, nnz, at, out.indptr);
      this.copyOut(out.values, new Float64Array(PIECE_BYTES / 8), values, valuesAt, nnz, at, out.indptr);
    }
  }

  /**
   * One of the two arrays (`from` its byte offset in the file, nnz entries) read a piece at a
   * time into `piece`, each selected row's part of the piece copied to its place in `to`.
   */
  private copyOut<T extends Int32Array | Float64Array>(to: T, piece: T, file: TempFile, from: number, nnz: number, at: Int32Array, outPtr: Int32Array): void {
    const { indptr } = this;
    const bytes = new Uint8Array(piece.buffer);
    let r = 0;
    for (let e0 = 0; e0 < nnz; e0 += piece.length) {
      const e1 = Math.min(nnz, e0 + piece.length);
      file.read(bytes.subarray(0, (e1 - e0) * piece.BYTES_PER_ELEMENT), from + e0 * piece.BYTES_PER_ELEMENT);
      // Rows overlapping [e0, e1): from the first that ends after e0 to the last that starts before e1.
      while (indptr[r + 1] <= e0) r++;
      for (let q = r; q < this.rows && indptr[q] < e1; q++) {
        if (at[q] < 0) continue;
        const lo = Math.max(indptr[q], e0);
        const hi = Math.min(indptr[q + 1], e1);
        // Rows are a few entries long: a loop, not a subarray each.
        for (let k = lo, d = outPtr[at[q]] + lo - indptr[q]; k < hi; k++, d++) to[d] = piece[k - e0];
      }
    }
  }
}

/** Entries a SpillingCsrBuilder holds before it writes them (12 bytes each). */
const SINK_ENTRIES = 1 << 16;

/**
 * Builds a SpilledCsr row by row, as CsrBuilder builds a CSR matrix, writing its entries to two
 * temporary files as they come: the matrix is never whole in memory, only its row pointers and
 * the last SINK_ENTRIES entries. A million-row party read its file's 71 MB of entries into memory
 * and spilled them afterwards; now its reading peaks that much lower (docs/scaling.md). Where no
 * temporary file can be made or written, the entries are kept in memory (a CsrBuilder).
 */
export class SpillingCsrBuilder implements SparseSink<SpilledCsr> {
  private indptr = new Int32Array(1 << 12);
  private rows = 0;
  /** Entries pushed, and of them written to the files. */
  private nnz = 0;
  private written = 0;
  private readonly indices = new Int32Array(SINK_ENTRIES);
  private readonly values = new Float64Array(SINK_ENTRIES);
  private files: { indices: TempFile; values: TempFile } | undefined;
  private memory: CsrBuilder | undefined;

  constructor(private cols = 0) {
    const indices = TempFile.empty();
    const values = indices && TempFile.empty();
    if (indices && values) this.files = { indices, values };
    else this.memory = new CsrBuilder(cols);
  }

  push(col: number, value: number): void {
    if (this.memory) return this.memory.push(col, value);
    if (value === 0) return;
    if (this.nnz === MAX_NNZ) throw new RangeError(`more than ${MAX_NNZ} stored entries`);
    const k = this.nnz - this.written;
    this.indices[k] = col;
    this.values[k] = value;
    this.nnz++;
    if (col + 1 > this.cols) this.cols = col + 1;
    if (this.nnz - this.written === SINK_ENTRIES) this.flush();
  }

  endRow(): void {
    if (this.memory) return this.memory.endRow();
    if (this.rows + 2 > this.indptr.length) {
      const bigger = new Int32Array(2 * this.indptr.length);
      bigger.set(this.indptr);
      this.indptr = bigger;
    }
    this.indptr[++this.rows] = this.nnz;
  }

  /** The matrix; its row pointers are a view of the array they were written into (its room beyond was never written: no memory). */
  build(cols?: number): SpilledCsr {
    if (this.files) this.flush();
    if (this.memory) return new SpilledCsr(this.memory.build(cols));
    const c = cols ?? this.cols;
    if (c < this.cols) throw new RangeError(`matrix has a column ${this.cols - 1}, more than the ${c} declared`);
    return new SpilledCsr({ rows: this.rows, cols: c, indptr: this.indptr.subarray(0, this.rows + 1), files: { ...this.files!, valuesAt: 0 } });
  }

  /** The entries held written out (or, if a write fails, all of them moved to memory). */
  private flush(): void {
    const n = this.nnz - this.written;
    if (n === 0) return;
    const { indices, values } = this.files!;
    try {
      indices.write(new Uint8Array(this.indices.buffer, 0, 4 * n), 4 * this.written);
      values.write(new Uint8Array(this.values.buffer, 0, 8 * n), 8 * this.written);
      this.written += n;
    } catch {
      this.toMemory();
    }
  }

  /** Every entry so far, written or held, into a CsrBuilder that takes the rest. */
  private toMemory(): void {
    const b = new CsrBuilder(this.cols);
    const { indptr, rows, nnz, written } = this;
    const files = this.files!;
    const idx = new Int32Array(SINK_ENTRIES);
    const val = new Float64Array(SINK_ENTRIES);
    let r = 0;
    for (let e0 = 0; e0 < nnz; e0 += SINK_ENTRIES) {
      const n = Math.min(SINK_ENTRIES, nnz - e0);
      if (e0 < written) {
        files.indices.read(new Uint8Array(idx.buffer, 0, 4 * n), 4 * e0);
        files.values.read(new Uint8Array(val.buffer, 0, 8 * n), 8 * e0);
      } else {
        idx.set(this.indices.subarray(0, n));
        val.set(this.values.subarray(0, n));
      }
      for (let k = 0; k < n; k++) {
        // Rows that end at or before this entry (empty ones included) ended before it.
        while (r < rows && indptr[r + 1] <= e0 + k) {
          b.endRow();
          r++;
        }
        b.push(idx[k], val[k]);
      }
    }
    for (; r < rows; r++) b.endRow();
    this.memory = b;
    this.files = undefined;
  }
}
