// A party reading a sparse file holds its matrix in a temporary file as it reads it, never whole
// in memory: the peak of a real party process when its data is loaded ('data loaded' logs it),
// for a file of 3 million entries (36 MB as CSR), is within a fraction of that of the same party
// on a file of ten rows. Read whole and spilled afterwards, it was above it by the whole matrix.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { PARTY_ENV, PARTY_NODE_FLAGS } from '../processes.js';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);
const dir = tempDir({ after }, 'admm-party-memory-');

/** A LIBSVM file with ids first: `rows` rows of `perRow` entries among 2000 columns. */
function sparseFile(name: string, rows: number, perRow: number): string {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    const start = (i * 37) % (2000 - perRow * 16);
    let line = `u${i}`;
    for (let k = 0; k < perRow; k++) line += ` ${start + 16 * k + 1}:0.${(i + k) % 9 + 1}`;
    lines.push(line);
    if (lines.length === 1000 || i === rows - 1) writeSync(fd, lines.splice(0).join('\n') + '\n');
  }
  closeSync(fd);
  return path;
}

/**
 * The party's peak when its data is loaded (it is killed then: no coordinator is needed), run
 * with the node flags and environment of its bin script and of simulate (without the 2 MB
 * semi-space, reading leaves young garbage of the order of this test's margin).
 */
async function peakAtLoad(data: string): Promise<number> {
  const [first, ...flags] = PARTY_NODE_FLAGS;
  const args = [...flags, BIN.party, '--coordinator', 'ws://127.0.0.1:9', '--id', 'p', '--data', data, '--ids', 'first', '--model', join(dir, 'model-p.json'), '--mechanism', 'none'];
  const p = run(first, args, { env: { ...process.env, ...PARTY_ENV, TMPDIR: dir } });
  const rec = await p.waitFor((r) => r.msg === 'data loaded', "'data loaded'");
  p.kill();
  await p.exit;
  assert.equal(typeof rec.peakMemoryBytes, 'number');
  return rec.peakMemoryBytes as number;
}

test("a party's sparse matrix goes to a temporary file as it is read, not through its memory", async () => {
  const entries = 3_000_000;
  const big = sparseFile('big.libsvm', entries / 60, 60);
  const small = sparseFile('small.libsvm', 10, 60);
  const bigPeak = await peakAtLoad(big);
  const smallPeak = await peakAtLoad(small);
  const csrBytes = 12 * entries;
  const MB = (b: number) => (b / 1e6).toFixed(1);
  assert.ok(bigPeak - smallPeak < csrBytes / 2, `the party reading ${entries} entries peaked ${MB(bigPeak - smallPeak)} MB above one reading ten rows (peaks ${MB(bigPeak)} and ${MB(smallPeak)} MB); the matrix is ${MB(csrBytes)} MB`);
});
