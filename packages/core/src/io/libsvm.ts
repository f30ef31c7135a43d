// LIBSVM files: `label-or-id [qid:ID] index:value ...`, one row a line.
import { BlockBuilder, type SparseSink } from '../linalg/block.js';
import { DataError } from '../errors.js';
import { COLON, CR, DOT, HASH, MINUS, NINE, PLUS, POW10, SPACE, TAB, ZERO } from './ascii.js';
import { IdList, type IdSink } from './ids.js';
import { SharedLabels, chunkSize, detach, fileSize, forEachLine } from './lines.js';
import { parseDataNumber } from './numbers.js';
import { type FeatureTable, type ReadOptions, type Scanned, sparse } from './table.js';

const INDEX_RE = /^[0-9]+$/;


/**
 * Largest feature index accepted. Column indices are stored as Int32, and a party's model
 * holds one coefficient (and name) per column, so an absurd index in a file is an error,
 * not a 2^31-column allocation.
 */
export const MAX_FEATURES = 1 << 24;


function skipBlanks(text: string, i: number, end: number): number {
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c !== SPACE && c !== TAB) break;
    i++;
  }
  return i;
}

function tokenEnd(text: string, i: number, end: number): number {
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c === SPACE || c === TAB) break;
    i++;
  }
  return i;
}

/** fastEntry's result when it returns an end (module state: no object per token). */
let fastIndex = 0;
let fastValue = 0;

/**
 * The common entry `j:v` read where it stands in the line: j of at most 8 digits, from 1 to
 * `limit`; v an optional sign and at most 15 digits around an optional point, no exponent.
 * Such a v is M / 10^f with M < 2^53 and f <= 15, both exact, so the one division is correctly
 * rounded: the same number as Number(v) (Clinger's fast path). Sets fastIndex and fastValue and
 * returns where the token ends, or -1 for anything else (the caller's full checks then take it:
 * other forms, and every error with its message).
 */
function fastEntry(text: string, i: number, end: number, limit: number): number {
  const start = i;
  let idx = 0;
  let c = text.charCodeAt(i);
  while (c >= ZERO && c <= NINE && i < end) {
    idx = idx * 10 + (c - ZERO);
    c = text.charCodeAt(++i);
  }
  if (i === start || i - start > 8 || i >= end || c !== COLON || idx < 1 || idx > limit) return -1;
  c = text.charCodeAt(++i);
  let negative = false;
  if (c === MINUS || c === PLUS) {
    negative = c === MINUS;
    c = text.charCodeAt(++i);
  }
  let m = 0;
  let digits = 0;
  let fraction = -1;
  while (i < end) {
    if (c >= ZERO && c <= NINE) {
      m = m * 10 + (c - ZERO);
      digits++;
      if (fraction >= 0) fraction++;
    } else if (c === DOT && fraction < 0) fraction = 0;
    else break;
    c = text.charCodeAt(++i);
  }
  if (digits === 0 || digits > 15 || (i < end && c !== SPACE && c !== TAB)) return -1;
  const v = fraction > 0 ? m / POW10[fraction] : m;
  fastIndex = idx;
  fastValue = negative ? -v : v;
  return i;
}

export function readLibsvm(path: string, opts: ReadOptions = {}): FeatureTable {
  const ids = new IdList(path);
  const t = scanLibsvm(path, opts, true, false, ids);
  ids.done();
  return sparse(path, t, ids);
}

/**
 * readLibsvm (dense when allowed and the file is, see BlockBuilder; sparse rows past the first
 * to `spill` when given); with `keepFeatures` false every token is still checked, but no matrix
 * is built (X is 0 x 0).
 */
export function scanLibsvm<S extends { cols: number } = never>(path: string, opts: ReadOptions, keepFeatures: boolean, dense: boolean, ids: IdSink, spill?: () => SparseSink<S>): Scanned<S> {
  let mode = opts.ids ?? 'auto';
  const firstTokens: string[] = [];
  const labels = new SharedLabels();
  // An entry is at least 'j:v' and a blank before it.
  const b = new BlockBuilder<S>(opts.features, keepFeatures ? fileSize(path) : 0, 4, dense, keepFeatures ? spill : undefined);
  // One row's entries, reused from row to row.
  const cols: number[] = [];
  const vals: number[] = [];
  const order: number[] = [];
  let row = 0;
  const limit = Math.min(MAX_FEATURES, opts.features ?? MAX_FEATURES);
  forEachLine(path, chunkSize(opts.chunkBytes), (text, lineNo) => {
    // Tokens are read in place (no string per token); see fastEntry.
    let end = text.length;
    if (end > 0 && text.charCodeAt(end - 1) === CR) end--;
    const s0 = skipBlanks(text, 0, end);
    if (s0 === end || text.charCodeAt(s0) === HASH) return;
    const fail = (detail: string): never => {
      throw new DataError(path, lineNo, detail);
    };
    const e0 = tokenEnd(text, s0, end);
    const first = text.slice(s0, e0);
    let pos = skipBlanks(text, e0, end);
    let t = 1;
    if (mode === 'auto') mode = pos < end && text.startsWith('qid:', pos) ? 'qid' : 'row';
    row++;
    let id: string;
    if (mode === 'first') {
      id = first;
      if (id.includes(':')) fail(`expected a sample id as the first token, found '${id}'`);
      id = detach(id);
    } else if (mode === 'qid') {
      if (pos === end || !text.startsWith('qid:', pos)) fail(`expected 'qid:ID' as the second token`);
      const e1 = tokenEnd(text, pos, end);
      id = detach(text.slice(pos + 4, e1));
      if (id === '') fail(`empty qid`);
      pos = skipBlanks(text, e1, end);
      t = 2;
      firstTokens.push(labels.get(detach(first)));
    } else {
      id = String(row);
      firstTokens.push(labels.get(detach(first)));
    }
    if (first.includes(':')) fail(`first token '${first}' looks like index:value; a label or id must come first`);
    ids.add(id, lineNo);
    cols.length = 0;
    vals.length = 0;
    let sorted = true;
    for (; pos < end; t++) {
      let stop = fastEntry(text, pos, end, limit);
      let idx: number;
      let val: number;
      if (stop >= 0) {
        idx = fastIndex;
        val = fastValue;
      } else {
        // Anything the fast path does not take, with the messages of the full checks.
        stop = tokenEnd(text, pos, end);
        const tok = text.slice(pos, stop);
        const colon = tok.indexOf(':');
        if (colon <= 0) fail(`token ${t + 1} '${tok}' is not index:value`);
        const idxText = tok.slice(0, colon);
        const valText = tok.slice(colon + 1);
        if (!INDEX_RE.test(idxText)) fail(`token ${t + 1} '${tok}': index '${idxText}' is not a positive integer`);
        idx = Number(idxText);
        if (idx < 1) fail(`token ${t + 1} '${tok}': indices start at 1`);
        if (idx > MAX_FEATURES) fail(`token ${t + 1} '${tok}': index ${idx} exceeds the limit of ${MAX_FEATURES} features`);
        if (opts.features !== undefined && idx > opts.features)
          fail(`token ${t + 1} '${tok}': index ${idx} exceeds the ${opts.features} features declared`);
        const v = parseDataNumber(valText);
        if (typeof v === 'string') fail(`token ${t + 1} '${tok}': value ${v}`);
        val = v as number;
      }
      if (cols.length > 0 && idx - 1 <= cols[cols.length - 1]) sorted = false;
      cols.push(idx - 1);
      vals.push(val);
      pos = skipBlanks(text, stop, end);
    }
    // Files usually list a row's indices in increasing order; sort only when they are not.
    order.length = cols.length;
    for (let k = 0; k < cols.length; k++) order[k] = k;
    if (!sorted) order.sort((p, q) => cols[p] - cols[q]);
    for (let k = 0; k < order.length; k++) {
      const j = cols[order[k]];
      if (k > 0 && j === cols[order[k - 1]]) fail(`feature index ${j + 1} appears twice`);
      if (keepFeatures) b.push(j, vals[order[k]]);
    }
    if (keepFeatures) b.endRow(text.length + 1);
  }, opts.encoding);
  if (row === 0) throw new DataError(path, undefined, 'no data rows');
  // Row numbers are distinct by construction (the caller's done() checks the others).
  if (mode === 'row') ids.distinct();
  const X = keepFeatures ? b.build(opts.features) : { rows: 0, cols: 0, indptr: new Int32Array(1), indices: new Int32Array(0), values: new Float64Array(0) };
  const featureNames = Array.from({ length: X.cols }, (_, j) => String(j + 1));
  return { X, featureNames, firstTokens: mode === 'first' ? undefined : firstTokens };
}
