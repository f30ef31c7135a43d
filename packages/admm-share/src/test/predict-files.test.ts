// admm-share predict's preparation (writePredictFiles): the coordinator's file and one LIBSVM
// file per party, each party's rows in a random order of its own, checked against the input
// file read line by line here; a malformed input is refused before any file is written.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '@admm-share/core';
import { seeded } from '@admm-share/core/test-support';
import { writePredictFiles } from '../predict.js';
import { tempDir } from './procs.js';

const PARTIES = [
  { id: 'party-1', features: 3, role: 'active' as const, rowScaling: false },
  { id: 'party-2', features: 5, role: 'passive' as const, rowScaling: false },
  { id: 'party-3', features: 2, role: 'passive' as const, rowScaling: false },
];

/** A LIBSVM file of `rows` rows over 10 columns, label first; values of every kind the readers accept. */
function input(path: string, rows: number): string[] {
  const rand = seeded('predict-files');
  const values = ['1', '-0.986', '0.5', '1e-300', '-1e100', '0.30000000000000004', '123456789012345', '7.25e-7', '42', '-3'];
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    let line = rand() < 0.5 ? '+1' : '-1';
    for (let j = 1; j <= 10; j++) if (rand() < 0.5) line += ` ${j}:${values[Math.floor(rand() * values.length)]}`;
    lines.push(line);
  }
  writeFileSync(path, lines.join('\n') + '\n');
  return lines;
}

/** Entries j:v of a line (after its first token) with j in [from, to], renumbered from 1, the values as doubles. */
function entries(tokens: string[], from: number, to: number): string {
  return tokens
    .map((t) => t.split(':'))
    .filter(([j]) => Number(j) >= from && Number(j) <= to)
    .map(([j, v]) => `${Number(j) - from + 1}:${Number(v)}`)
    .join(' ');
}

test('writePredictFiles: each party file holds every row once (its id, its columns renumbered, the same doubles), in a row order of its own; labels.csv in the input order', (t) => {
  const dir = tempDir(t, 'admm-predict-files-');
  const data = join(dir, 'new.libsvm');
  const lines = input(data, 400);
  const out = join(dir, 'predict');
  const r = writePredictFiles({ data, labels: true }, { parties: PARTIES }, out);
  assert.equal(r.rows, 400);
  assert.equal(r.rowsFile, join(out, 'labels.csv'));
  // Row ids are 1-based line numbers (ids 'auto' on a file with labels first).
  const labels = readFileSync(r.rowsFile, 'utf8').trimEnd().split('\n');
  assert.deepEqual(labels, ['id,label', ...lines.map((l, i) => `${i + 1},${l.startsWith('+1') ? 1 : -1}`)]);
  const orders: string[] = [];
  let from = 1;
  for (const [m, block] of r.blocks.entries()) {
    assert.equal(block.party.id, PARTIES[m].id);
    const to = from + PARTIES[m].features - 1;
    const got = readFileSync(block.file, 'utf8').trimEnd().split('\n');
    assert.equal(got.length, lines.length);
    const order = got.map((l) => l.split(' ')[0]);
    assert.deepEqual([...order].sort((a, b) => Number(a) - Number(b)), lines.map((_, i) => String(i + 1)), `${block.party.id}: every row once`);
    for (const l of got) {
      const [id, ...tokens] = l.split(' ');
      assert.equal(entries(tokens, 1, PARTIES[m].features), entries(lines[Number(id) - 1].split(' ').slice(1), from, to), `${block.party.id}, row ${id}`);
    }
    orders.push(order.join());
    from = to + 1;
  }
  // Orders of their own: neither the input's nor each other's (a coincidence has probability 1/400!).
  assert.equal(new Set([...orders, lines.map((_, i) => String(i + 1)).join()]).size, 4);
});

test('writePredictFiles: a malformed input file is a DataError naming the file and line, and no file is written', (t) => {
  const dir = tempDir(t, 'admm-predict-files-');
  const data = join(dir, 'bad.libsvm');
  writeFileSync(data, '+1 1:0.5 4:2\n-1 2:x\n');
  const out = join(dir, 'predict');
  assert.throws(
    () => writePredictFiles({ data, labels: false }, { parties: PARTIES }, out),
    (e: unknown) => e instanceof DataError && e.file === data && e.line === 2 && /token 2 '2:x'/.test(e.message),
  );
  assert.equal(existsSync(out), false);
  writeFileSync(data, '+1 1:0.5 11:2\n');
  assert.throws(() => writePredictFiles({ data, labels: false }, { parties: PARTIES }, out), (e: unknown) => e instanceof DataError && e.line === 1 && /exceeds the 10 features/.test(e.message));
});
