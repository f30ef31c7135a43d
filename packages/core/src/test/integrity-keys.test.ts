// The pieces of the integrity checks of files at rest: the key file (created once, 0600, the same
// key for processes that race to create it, refused when wrong), the keyed digest, and the
// bounds on a plausible number of label flips, checked against exact binomial tails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { execFile } from 'node:child_process';
import { chmodSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DataError, FLIP_COUNT_FALSE_REFUSAL, KEY_BYTES, drawFlips, existingKeyFile, flipProbability, keyFile, keyedDigest, osNoise, plausibleFlipCounts, sameDigest } from '../index.js';
import { tempDir } from './support.js';

/** ln P(X <= k) and ln P(X >= k) for X ~ Binomial(n, p), summed term by term from the pmf's recurrence. */
function binomialLogTails(n: number, p: number): { below: (k: number) => number; above: (k: number) => number } {
  const log = new Float64Array(n + 1);
  log[0] = n * Math.log1p(-p);
  for (let k = 0; k < n; k++) log[k + 1] = log[k] + Math.log((n - k) / (k + 1)) + Math.log(p / (1 - p));
  const lse = (from: number, to: number) => {
    let m = -Infinity;
    for (let k = from; k <= to; k++) m = Math.max(m, log[k]);
    let s = 0;
    for (let k = from; k <= to; k++) s += Math.exp(log[k] - m);
    return m + Math.log(s);
  };
  return { below: (k) => (k < 0 ? -Infinity : lse(0, k)), above: (k) => (k > n ? -Infinity : lse(k, n)) };
}

test('plausibleFlipCounts: outside [lo, hi] each exact binomial tail is below half the stated rate, and the bounds are not much wider than the exact ones', () => {
  const half = Math.log(FLIP_COUNT_FALSE_REFUSAL / 2);
  for (const [n, epsilon] of [[2000, 1], [100, 1], [4000, 0.1], [30000, 3], [500, 8]] as const) {
    const p = flipProbability(epsilon);
    const { lo, hi } = plausibleFlipCounts(n, p);
    const t = binomialLogTails(n, p);
    assert.ok(t.below(lo - 1) < half, `n ${n} p ${p}: P(X < ${lo}) = ${Math.exp(t.below(lo - 1))}`);
    assert.ok(t.above(hi + 1) < half, `n ${n} p ${p}: P(X > ${hi}) = ${Math.exp(t.above(hi + 1))}`);
    // The Chernoff bound is loose by a polynomial factor: the exact 1e-9 bounds are within 1.5 sd.
    const sd = Math.sqrt(n * p * (1 - p));
    let exactLo = lo;
    while (exactLo < n && t.below(exactLo) < half) exactLo++;
    let exactHi = hi;
    while (exactHi > 0 && t.above(exactHi) < half) exactHi--;
    assert.ok(exactLo - lo <= 1.5 * sd + 1 && hi - exactHi <= 1.5 * sd + 1, `n ${n} p ${p}: [${lo}, ${hi}] against exact [${exactLo}, ${exactHi}], sd ${sd}`);
  }
  // The edit of the issue: no flips among 2000 labels at epsilon 1 (p = 0.269) is refused, so is every flip.
  const { lo, hi } = plausibleFlipCounts(2000, flipProbability(1));
  assert.ok(lo > 0 && hi < 2000);
  // P(no flip) = (1 - p)^n, where the Chernoff bound is exact: 5.6e-10 for 68 labels, 4.1e-10 for 69.
  assert.equal(plausibleFlipCounts(68, flipProbability(1)).lo, 0);
  assert.ok(plausibleFlipCounts(69, flipProbability(1)).lo > 0);
  // Real draws fall inside.
  for (let r = 0; r < 20; r++) {
    const k = drawFlips(2000, flipProbability(1), osNoise()).length;
    assert.ok(k >= lo && k <= hi, `${k} flips`);
  }
});

test('keyFile: created once with mode 0600 and 32 random bytes, read back the same; a wrong size or mode is a DataError naming the key', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'party.key');
  const a = keyFile(path);
  assert.equal(a.length, KEY_BYTES);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.deepEqual(keyFile(path), a, 'not created again');
  assert.deepEqual(existingKeyFile(path, 'model.json'), a);
  assert.notDeepEqual(keyFile(join(dir, 'other.key')), a);
  assert.throws(() => existingKeyFile(join(dir, 'none.key'), join(dir, 'model.json')), (e: unknown) => e instanceof DataError && e.file === join(dir, 'model.json') && /its key .*none\.key is missing/.test(e.message));
  chmodSync(path, 0o644);
  assert.throws(() => keyFile(path), (e: unknown) => e instanceof DataError && e.file === path && /mode 0644 lets group or others read it; chmod 600 it/.test(e.message));
  chmodSync(path, 0o600);
  writeFileSync(path, readFileSync(path).subarray(0, 31));
  assert.throws(() => keyFile(path), (e: unknown) => e instanceof DataError && e.file === path && /31 bytes, expected 32/.test(e.message));
});

test('keyedDigest is HMAC-SHA256 of the parts in order; sameDigest compares', () => {
  const key = Buffer.alloc(32, 7);
  const want = createHmac('sha256', key).update('ab').update(Buffer.from([1, 2])).digest('hex');
  assert.equal(keyedDigest(key, 'a', 'b', Uint8Array.of(1, 2)), want);
  assert.ok(sameDigest(want, want));
  assert.ok(!sameDigest(want.slice(1), want));
  assert.ok(!sameDigest(undefined, want));
  assert.ok(!sameDigest(want.replace(/^./, want[0] === '0' ? '1' : '0'), want));
});

test('keyFile: a folder that does not exist fails as writeFileAtomic does (the checkpoint writer reports it as its own write)', (t) => {
  const path = join(tempDir(t), 'missing', 'coordinator.key');
  assert.throws(() => keyFile(path), (e: NodeJS.ErrnoException) => e.code === 'ENOENT');
});

test('keyFile: eight processes that create the same key at once all get the one key that is on disk', async (t) => {
  const path = join(tempDir(t), 'party.key');
  const module = new URL('../io/key-file.js', import.meta.url).href;
  const script = `const { keyFile } = await import(${JSON.stringify(module)}); process.stdout.write(keyFile(${JSON.stringify(path)}).toString('hex'));`;
  const run = () =>
    new Promise<string>((resolve, reject) => execFile(process.execPath, ['--input-type=module', '-e', script], (err, stdout) => (err ? reject(err) : resolve(stdout))));
  const keys = await Promise.all(Array.from({ length: 8 }, run));
  const onDisk = readFileSync(path).toString('hex');
  assert.equal(onDisk.length, 2 * KEY_BYTES);
  assert.deepEqual(keys, Array(8).fill(onDisk));
  assert.deepEqual(readdirSync(dirname(path)), ['party.key'], 'no temporary key left');
});
