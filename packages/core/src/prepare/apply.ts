// Applying a fitted preparation to a table (the training rows, or new rows at scoring): per
// numeric value, missing -> fill (and its indicator), clip to the range, standardise; per
// categorical value, its one-hot column (an unseen category is all zeros, and counted).
import { DataError } from '../errors.js';
import type { BlockTable } from '../io/table.js';
import { selectIds } from '../io/packed-ids.js';
import { type Dense, sharedFloat64 } from '../linalg/dense.js';
import { isMissing, missingError } from './fit.js';
import type { Preparation } from './preparation.js';
import { PREPARE_FLAGS, MISSING_CODE, type RawColumn, type RawTable } from './types.js';

export interface Applied {
  /** The prepared rows: ids packed, X dense (in shared memory, as a party keeps a dense block), names of the prepared columns. */
  table: BlockTable & { X: Dense };
  /** Line of each prepared row in the file. */
  lines: Int32Array;
  /** Per categorical column, the rows whose category is not in the vocabulary (all zeros). */
  unseen: Record<string, number>;
  /** Per numeric column, the values clipped to its range. */
  clipped: Record<string, number>;
  /** Rows dropped for a missing value (`--missing drop`). */
  dropped: number;
}

/** The column of `t` that preparation input `name` is read from; its absence is an error naming the header. */
function columnOf(t: RawTable, file: string, name: string, kind: RawColumn['kind']): RawColumn {
  const c = t.columns.find((k) => k.name === name);
  if (c === undefined)
    throw new DataError(file, t.headerLine, `no column '${name}' read from this file, which the model's preparation needs (columns: ${t.header.join(', ')})`);
  if (c.kind !== kind)
    throw new DataError(file, t.headerLine, `column '${name}' was ${kind} when the model was trained: read it ${kind === 'categorical' ? `with ${PREPARE_FLAGS.categorical}` : `without ${PREPARE_FLAGS.categorical}`}`);
  return c;
}

/** Apply `p` to `t`; `where.file` names the file in error messages. */
export function applyPreparation(p: Preparation, t: RawTable, where: { file: string }): Applied {
  const cols = p.inputs.map((inp) => columnOf(t, where.file, inp.name, inp.kind));
  // Rows kept: with --missing drop, those with no missing value in a column the preparation reads.
  const order: number[] = [];
  for (let i = 0; i < t.rows; i++) {
    let missing = false;
    for (let j = 0; j < cols.length && !missing; j++) {
      if (!isMissing(cols[j], i)) continue;
      if (p.missing === null) throw missingError(where.file, t.lines[i], cols[j].name);
      missing = p.missing === 'drop';
    }
    if (!missing) order.push(i);
  }
  const rows = order.length;
  const d = p.outputs.length;
  const data = sharedFloat64(rows * d);
  const unseen: Record<string, number> = {};
  const clipped: Record<string, number> = {};
  let off = 0;
  p.inputs.forEach((inp, j) => {
    const col = cols[j];
    if (inp.kind === 'numeric' && col.kind === 'numeric') {
      const { fill, range, center, scale } = inp;
      const lo = range?.[0] ?? -Infinity;
      const hi = range?.[1] ?? Infinity;
      let n = 0;
      for (let r = 0; r < rows; r++) {
        let x = col.values[order[r]];
        const missing = Number.isNaN(x);
        // A fill of null is --missing drop, whose rows with a missing value are gone.
        if (missing) x = fill ?? 0;
        else if (x < lo || x > hi) n++;
        x = x < lo ? lo : x > hi ? hi : x;
        data[r * d + off] = (x - center) / scale;
        if (inp.indicator) data[r * d + off + 1] = missing ? 1 : 0;
      }
      if (range !== null) clipped[inp.name] = n;
      off += 1 + (inp.indicator ? 1 : 0);
    } else if (inp.kind === 'categorical' && col.kind === 'categorical') {
      // The file's codes to the vocabulary's positions (-1: not in it).
      const index = new Map(inp.vocabulary.map((v, k) => [v, k]));
      const slot = Int32Array.from(col.dictionary, (c) => index.get(c) ?? -1);
      const k = inp.vocabulary.length;
      let n = 0;
      for (let r = 0; r < rows; r++) {
        const code = col.codes[order[r]];
        const missing = code === MISSING_CODE;
        if (!missing) {
          if (slot[code] >= 0) data[r * d + off + slot[code]] = 1;
          else n++;
        }
        if (inp.indicator) data[r * d + off + k] = missing ? 1 : 0;
      }
      unseen[inp.name] = n;
      off += k + (inp.indicator ? 1 : 0);
    }
  });
  const ids = rows === t.rows ? t.ids : selectIds(t.ids, order);
  const lines = rows === t.rows ? t.lines : Int32Array.from(order, (i) => t.lines[i]);
  return {
    table: { file: where.file, ids, X: { rows, cols: d, data }, featureNames: p.outputs.map((o) => o.name) },
    lines,
    unseen,
    clipped,
    dropped: t.rows - rows,
  };
}
