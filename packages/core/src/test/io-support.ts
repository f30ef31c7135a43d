// Helpers of the io tests: files written to a temporary folder, and the checks on what reading them throws.
import { after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Csr, DataError } from '../index.js';
import { tempDir } from './support.js';

/** A temporary folder removed after this test file, and `file` that writes `text` to a fresh file in it and returns its path. */
export function testFiles(prefix: string): { dir: string; file: (text: string, ext?: string) => string } {
  const dir = tempDir({ after }, prefix);
  let counter = 0;
  const file = (text: string, ext = '.txt'): string => {
    const p = join(dir, `f${counter++}${ext}`);
    writeFileSync(p, text);
    return p;
  };
  return { dir, file };
}

/** Plain arrays of a CSR matrix, for deepEqual against hand-written expectations. */
export function plain(a: Csr) {
  return {
    rows: a.rows,
    cols: a.cols,
    indptr: Array.from(a.indptr),
    indices: Array.from(a.indices),
    values: Array.from(a.values),
  };
}

/** Asserts that fn throws a DataError naming `path` and (if given) `:line:`. */
export function throwsData(fn: () => unknown, path: string, line: number | undefined, detail?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof DataError, `expected DataError, got ${String(err)}`);
    assert.ok(err.message.includes(path), `message '${err.message}' does not name ${path}`);
    if (line !== undefined) {
      assert.ok(err.message.includes(`${path}:${line}:`), `message '${err.message}' does not name line ${line}`);
      assert.equal(err.line, line);
    } else {
      assert.equal(err.line, undefined);
      assert.ok(err.message.startsWith(`${path}: `), `message '${err.message}' should name no line`);
    }
    assert.equal(err.file, path);
    assert.equal(err.code, 'ERR_DATA');
    assert.equal(err.exitCode, 65);
    if (detail) assert.match(err.message, detail);
    return true;
  });
}

/**
 * Two different ASCII ids with the same 32-bit FNV-1a hash (the hash the search for repeats
 * sorts by, over an id's characters as over its UTF-8 bytes), found by brute force.
 */
export function fnvCollision(): [string, string] {
  const fnv = (s: string) => {
    let h = 0x811c9dc5;
    for (let k = 0; k < s.length; k++) h = Math.imul(h ^ s.charCodeAt(k), 16777619);
    return h >>> 0;
  };
  const byHash = new Map<number, string>();
  for (let i = 0; ; i++) {
    const id = `cust-${i}`;
    const other = byHash.get(fnv(id));
    if (other !== undefined) return [other, id];
    byHash.set(fnv(id), id);
  }
}

/** Spellings Number() accepts (or turns into 0 / Infinity) that a data file must not contain. */
export const NOT_DECIMAL = [
  '0x10', '0X1f', '0b1', '0B1', '0o7', '0O7', 'Infinity', '-Infinity', '+Infinity', 'NaN', '1_000', '1e', 'e5', '1e+',
  '.', '+', '-', '.e1', '1.2.3', '--1', '+-1', '1e5.5', '1,5', '1d', '0x', '\u00a01', '1\u00a0', '\v1', '1\f',
  '\u2003' + '1', '\uff11', '\u0661',
];

/**
 * Chunk sizes for the readers: small ones put a chunk boundary inside every multi-byte
 * character, CRLF, doubled quote and byte order mark somewhere in a file; undefined is the default.
 */
export const CHUNKS = [1, 2, 3, 4, 5, 7, 13, 64, 4096, undefined];

/** CSR arrays of dense rows, built directly (not with CsrBuilder): zeros are not stored. */
export function csrOf(dense: readonly (readonly number[])[], cols: number) {
  const indptr = [0];
  const indices: number[] = [];
  const values: number[] = [];
  for (const r of dense) {
    r.forEach((v, j) => {
      if (v !== 0) {
        indices.push(j);
        values.push(v);
      }
    });
    indptr.push(indices.length);
  }
  return { rows: dense.length, cols, indptr, indices, values };
}
