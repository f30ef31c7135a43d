// LIBSVM files: `label-or-id [qid:ID] index:value ...`, one row a line.
import { BlockBuilder } from '../linalg/block.js';
import { type Csr } from '../linalg/csr.js';
import { DataError } from '../errors.js';
import { IdList, type IdSink } from './ids.js';
import { SharedLabels, chunkSize, detach, fileSize, forEachLine } from './lines.js';
import { parseDataNumber } from './numbers.js';
import { type FeatureTable, type ReadOptions, type Scanned, sparse } from './table.js';

const INDEX_RE = /^[0-9]+$/;

const SPACE = 0x20;
const TAB = 0x09;
const CR = 0x0d;

/**
 * Largest feature index accepted. Column indices are stored as Int32, and a party's model
 * holds one coefficient (and name) per column, so an absurd index in a file is an error,
 * not a 2^31-column allocation.
 */
export const MAX_FEATURES = 1 << 24;

/**
 * Splits `line` at spaces and tabs into `out` (cleared first), ignoring one trailing '\r' (CRLF)
 * and blanks at either end. Other whitespace stays inside a token (and is rejected there).
 */
export function splitBlanks(line: string, out: string[]): void {
  out.length = 0;
  let end = line.length;
  if (end > 0 && line.charCodeAt(end - 1) === CR) end--;
  let i = 0;
  while (i < end) {
    let c = line.charCodeAt(i);
    if (c === SPACE || c === TAB) {
      i++;
      continue;
    }
    const start = i;
    do c = line.charCodeAt(++i);
    while (i < end && c !== SPACE && c !== TAB);
    out.push(line.slice(start, i));
  }
}

export function readLibsvm(path: string, opts: ReadOptions = {}): FeatureTable {
  const ids = new IdList(path);
  const t = scanLibsvm(path, opts, true, false, ids);
  ids.done();
  return sparse(path, t, ids);
}

/**
 * readLibsvm (dense when allowed and the file is, see BlockBuilder); with `keepFeatures` false
 * every token is still checked, but no matrix is built (X is 0 x 0).
 */
export function scanLibsvm(path: string, opts: ReadOptions, keepFeatures: boolean, dense: boolean, ids: IdSink): Scanned {
  let mode = opts.ids ?? 'auto';
  const firstTokens: string[] = [];
  const labels = new SharedLabels();
  // An entry is at least 'j:v' and a blank before it.
  const b = new BlockBuilder(opts.features, keepFeatures ? fileSize(path) : 0, 4, dense);
  const tokens: string[] = [];
  // One row's entries, reused from row to row.
  const cols: number[] = [];
  const vals: number[] = [];
  const order: number[] = [];
  let row = 0;
  forEachLine(path, chunkSize(opts.chunkBytes), (text, lineNo) => {
    splitBlanks(text, tokens);
    if (tokens.length === 0 || tokens[0].startsWith('#')) return;
    const fail = (detail: string): never => {
      throw new DataError(path, lineNo, detail);
    };
    let t = 1;
    if (mode === 'auto') mode = tokens.length > 1 && tokens[1].startsWith('qid:') ? 'qid' : 'row';
    row++;
    let id: string;
    if (mode === 'first') {
      id = tokens[0];
      if (id.includes(':')) fail(`expected a sample id as the first token, found '${id}'`);
      id = detach(id);
    } else if (mode === 'qid') {
      if (tokens.length < 2 || !tokens[1].startsWith('qid:')) fail(`expected 'qid:ID' as the second token`);
      id = detach(tokens[1].slice(4));
      if (id === '') fail(`empty qid`);
      t = 2;
      firstTokens.push(labels.get(detach(tokens[0])));
    } else {
      id = String(row);
      firstTokens.push(labels.get(detach(tokens[0])));
    }
    if (tokens[0].includes(':')) fail(`first token '${tokens[0]}' looks like index:value; a label or id must come first`);
    ids.add(id, lineNo);
    cols.length = 0;
    vals.length = 0;
    let sorted = true;
    for (; t < tokens.length; t++) {
      const tok = tokens[t];
      const colon = tok.indexOf(':');
      if (colon <= 0) fail(`token ${t + 1} '${tok}' is not index:value`);
      const idxText = tok.slice(0, colon);
      const valText = tok.slice(colon + 1);
      if (!INDEX_RE.test(idxText)) fail(`token ${t + 1} '${tok}': index '${idxText}' is not a positive integer`);
      const idx = Number(idxText);
      if (idx < 1) fail(`token ${t + 1} '${tok}': indices start at 1`);
      if (idx > MAX_FEATURES) fail(`token ${t + 1} '${tok}': index ${idx} exceeds the limit of ${MAX_FEATURES} features`);
      if (opts.features !== undefined && idx > opts.features)
        fail(`token ${t + 1} '${tok}': index ${idx} exceeds the ${opts.features} features declared`);
      const val = parseDataNumber(valText);
      if (typeof val === 'string') fail(`token ${t + 1} '${tok}': value ${val}`);
      if (cols.length > 0 && idx - 1 <= cols[cols.length - 1]) sorted = false;
      cols.push(idx - 1);
      vals.push(val as number);
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

/** LIBSVM text with the sample id as the first token (`ids: 'first'`). */
export function formatLibsvmWithIds(ids: readonly string[], X: Csr): string {
  const out: string[] = [];
  for (let i = 0; i < X.rows; i++) {
    let line = ids[i];
    for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) line += ` ${X.indices[k] + 1}:${X.values[k]}`;
    out.push(line);
  }
  return out.join('\n') + '\n';
}
