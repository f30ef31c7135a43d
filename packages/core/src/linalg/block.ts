// A data file's matrix built dense or sparse by the file's own density, and a dense matrix whose
// rows a party selects in place: a dense file then never exists as CSR (12 bytes a non-zero
// against 8 an entry) and its aligned rows are not copied (docs/scaling.md, memory on gisette).
import { type Csr, CsrBuilder } from './csr.js';
import { type Dense, DENSE_DENSITY, csrToDense, preferDense, sharedFloat64 } from './dense.js';

/** Rows collected as CSR before the density decides the form of the rest. */
export const PROBE_ROWS = 64;

/**
 * Where a BlockBuilder puts its sparse rows once the first PROBE_ROWS are read, instead of a
 * CsrBuilder in memory (io's SpillingCsrBuilder writes them to a temporary file as they come).
 */
export interface SparseSink<S> {
  push(col: number, value: number): void;
  endRow(): void;
  build(cols?: number): S;
}

/** Largest dense capacity taken up front from the file size's estimate (8 bytes of address space each); beyond it, the array grows. */
const MAX_DENSE_CAPACITY = 2 ** 31;

/**
 * Builds a matrix row by row, like CsrBuilder, but dense when the data is: the first PROBE_ROWS
 * rows are collected as CSR, and if their non-zeros are at least DENSE_DENSITY of their rows x
 * columns the rest go straight into a row-major array in shared memory (the x-update's threads
 * read it without a copy). Its capacity in rows is estimated from the text read so far against
 * the whole file's; pages never written are not resident, so an estimate too large costs
 * address space only, and one too small a copy. A later row with a larger column index widens
 * the array (a copy), unless the wider matrix would no longer be dense: then the rest goes on
 * as CSR. A file that turns out sparse after all is stored as CSR at the end.
 */
export class BlockBuilder<S = never> {
  private csr: CsrBuilder | undefined;
  /** The sparse rows' sink past the probe, when the caller gave one (`spill`). */
  private sink: SparseSink<S> | undefined;
  private data: Float64Array = new Float64Array(0);
  private width = 0;
  private capacity = 0;
  private rows = 0;
  private nonzeros = 0;
  private chars = 0;

  /** An upper bound on the stored entries, for the CSR form's capacity. */
  private readonly entries: number;

  /**
   * @param features the declared number of columns, if any (the caller checks indices against it)
   * @param fileChars the size of the whole text (0: unknown), for the capacities
   * @param charsPerEntry the fewest characters an entry takes with its separator, for the CSR form's capacity
   * @param dense whether the dense form is allowed (false: always CSR, as CsrBuilder)
   * @param spill where sparse rows go from the end of the probe on (default: a CsrBuilder): a
   *   matrix of fewer than PROBE_ROWS rows, or a dense one, is still built in memory
   */
  constructor(
    private readonly features: number | undefined,
    private readonly fileChars: number,
    charsPerEntry: number,
    private dense: boolean,
    private readonly spill?: () => SparseSink<S>,
  ) {
    this.entries = Math.ceil(fileChars / charsPerEntry);
    // With a sink, the CsrBuilder holds the probe's rows only (or a file shorter than the probe).
    this.csr = new CsrBuilder(features ?? 0, spill ? 0 : this.entries);
  }

  push(col: number, value: number): void {
    if (this.sink) return this.sink.push(col, value);
    if (this.csr) return this.csr.push(col, value);
    if (value === 0) return;
    if (col >= this.width) {
      // A wider matrix that would no longer be dense (a file dense in its first rows, with
      // indices far beyond them later) goes on as CSR instead.
      if (this.nonzeros + 1 < DENSE_DENSITY * (this.rows + 1) * (col + 1)) {
        this.toCsr();
        return this.push(col, value);
      }
      this.relayout(this.capacity, col + 1);
    }
    this.data[this.rows * this.width + col] = value;
    this.nonzeros++;
  }

  /** The end of a row that took `chars` characters of the text (an estimate is enough). */
  endRow(chars: number): void {
    this.rows++;
    this.chars += chars;
    if (this.sink) this.sink.endRow();
    else if (this.csr) {
      this.csr.endRow();
      if (this.rows === PROBE_ROWS) {
        if (this.dense) this.probe();
        else this.toSink();
      }
    } else if (this.rows === this.capacity) this.relayout(Math.ceil(this.capacity * 1.5), this.width);
  }

  build(cols?: number): Csr | Dense | S {
    if (this.sink) {
      const s = this.sink.build(cols);
      this.sink = undefined;
      return s;
    }
    if (this.csr) {
      const a = this.csr.build(cols);
      this.csr = undefined;
      return this.dense && preferDense(a) ? csrToDense(a) : a;
    }
    const c = cols ?? this.width;
    if (c < this.width) throw new RangeError(`matrix has a column ${this.width - 1}, more than the ${c} declared`);
    if (c > this.width) this.relayout(this.rows, c);
    const d: Dense = { rows: this.rows, cols: c, data: this.data.subarray(0, this.rows * c) };
    this.data = new Float64Array(0);
    return this.nonzeros >= DENSE_DENSITY * d.rows * d.cols ? d : denseToCsr(d, this.nonzeros);
  }

  /** After PROBE_ROWS rows: dense from here on if they are. */
  private probe(): void {
    const csr = this.csr!;
    if (!(csr.columns > 0 && csr.entries >= DENSE_DENSITY * this.rows * csr.columns)) {
      this.dense = false;
      this.toSink();
      return;
    }
    const a = csr.build(this.features);
    this.csr = undefined;
    this.width = a.cols;
    const estimate = Math.ceil((1.25 * this.rows * this.fileChars) / Math.max(1, this.chars));
    this.capacity = Math.max(2 * this.rows, Math.min(estimate, Math.floor(MAX_DENSE_CAPACITY / this.width)));
    this.data = sharedFloat64(this.capacity * this.width);
    this.data.set(csrToDense(a).data);
    this.nonzeros = a.indices.length;
  }

  /** The probe's rows moved to the sink, which takes the rest (when there is one). */
  private toSink(): void {
    if (!this.spill) return;
    const a = this.csr!.build(this.features);
    this.csr = undefined;
    const sink = this.spill();
    for (let i = 0; i < a.rows; i++) {
      for (let k = a.indptr[i]; k < a.indptr[i + 1]; k++) sink.push(a.indices[k], a.values[k]);
      sink.endRow();
    }
    this.sink = sink;
  }

  /** From here on as CSR (or to the sink): the rows so far, and the entries of the one under way, copied over. */
  private toCsr(): void {
    const { data, width, rows } = this;
    const copy = (b: Pick<CsrBuilder, 'push' | 'endRow'>) => {
      for (let i = 0; i <= rows; i++) {
        pushDenseRow(b, data, i, width);
        if (i < rows) b.endRow();
      }
    };
    if (this.spill) copy((this.sink = this.spill()));
    else copy((this.csr = new CsrBuilder(this.features ?? 0, this.entries)));
    this.dense = false;
    this.data = new Float64Array(0);
  }

  /** The dense array again with `capacity` rows of `width` columns, the rows so far (and the one under way) copied over. */
  private relayout(capacity: number, width: number): void {
    const data = sharedFloat64(capacity * width);
    const rows = Math.min(this.rows + 1, this.capacity, capacity);
    if (width === this.width) data.set(this.data.subarray(0, rows * width));
    else for (let i = 0; i < rows; i++) data.set(this.data.subarray(i * this.width, (i + 1) * this.width), i * width);
    this.data = data;
    this.capacity = capacity;
    this.width = width;
  }
}

/** Row i of a row-major array `cols` wide, its non-zeros pushed to `b` (the row is not ended). */
function pushDenseRow(b: Pick<CsrBuilder, 'push'>, data: Float64Array, i: number, cols: number): void {
  for (let j = 0, o = i * cols; j < cols; j++) b.push(j, data[o + j]);
}

/** Rows `order[0], order[1], ...` of a dense matrix as CSR (its non-zeros only); `nonzeros` an upper bound, for the capacity. */
export function denseToCsr(a: Dense, nonzeros = 0, order?: ArrayLike<number>): Csr {
  const b = new CsrBuilder(a.cols, nonzeros);
  const n = order ? order.length : a.rows;
  for (let r = 0; r < n; r++) {
    const i = order ? order[r] : r;
    if (!(i >= 0 && i < a.rows)) throw new RangeError(`row ${i} out of range 0..${a.rows - 1}`);
    pushDenseRow(b, a.data, i, a.cols);
    b.endRow();
  }
  return b.build(a.cols);
}

/**
 * A dense matrix whose rows are selected in place: `front(order)` moves the rows `order[0],
 * order[1], ...` (numbered as in the matrix given, the file's order) to the top in that order,
 * swapping, and returns them as a view. The other rows stay below in some order, so a later
 * selection (a rejoin) works as well. A view handed out earlier sees its rows change then.
 */
export class DenseRows {
  /** at[r]: where the matrix's row r is now. */
  private readonly at: Uint32Array;
  /** rowAt[p]: the row now at position p. */
  private readonly rowAt: Uint32Array;

  constructor(private readonly a: Dense) {
    this.at = Uint32Array.from({ length: a.rows }, (_, i) => i);
    this.rowAt = this.at.slice();
  }

  get rows(): number {
    return this.a.rows;
  }

  get cols(): number {
    return this.a.cols;
  }

  /** The whole matrix, its rows where they are now (for a change to every row in place). */
  get matrix(): Dense {
    return this.a;
  }

  front(order: ArrayLike<number>): Dense {
    const { cols, data } = this.a;
    const tmp = new Float64Array(cols);
    const seen = new Uint8Array(this.a.rows);
    for (let p = 0; p < order.length; p++) {
      const r = order[p];
      if (!(r >= 0 && r < this.a.rows)) throw new RangeError(`row ${r} out of range 0..${this.a.rows - 1}`);
      if (seen[r]) throw new RangeError(`row ${r} selected twice`);
      seen[r] = 1;
      const q = this.at[r];
      if (q === p) continue;
      // Swap positions p and q (q > p: positions before p hold rows already placed).
      const pr = data.subarray(p * cols, (p + 1) * cols);
      const qr = data.subarray(q * cols, (q + 1) * cols);
      tmp.set(pr);
      pr.set(qr);
      qr.set(tmp);
      const displaced = this.rowAt[p];
      this.rowAt[p] = r;
      this.rowAt[q] = displaced;
      this.at[r] = p;
      this.at[displaced] = q;
    }
    return { rows: order.length, cols, data: data.subarray(0, order.length * cols) };
  }

  /** Rows `order[0], ...` (the matrix's numbering) as CSR, a copy; the matrix is not moved. */
  selectCsr(order: ArrayLike<number>): Csr {
    return denseToCsr(this.a, 0, Array.from(order, (r) => this.position(r)));
  }

  private position(r: number): number {
    if (!(r >= 0 && r < this.a.rows)) throw new RangeError(`row ${r} out of range 0..${this.a.rows - 1}`);
    return this.at[r];
  }

  /** Its non-zero entries. */
  nonzeros(): number {
    let n = 0;
    for (let j = 0; j < this.a.data.length; j++) if (this.a.data[j] !== 0) n++;
    return n;
  }
}
