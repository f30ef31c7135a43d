import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, DataError } from '@admm-share/core';
import { tempDir } from '@admm-share/core/test-support';
import { Packr } from 'msgpackr';
import { packedBound } from '@admm-share/protocol';
import type { Logger } from 'pino';
import { type Checkpoint, CheckpointWriter, DEFAULT_CHECKPOINT_SECONDS, checkpointDue, checkpointPolicy, readCheckpoint } from '../output/checkpoint.js';

/** A valid checkpoint of a one-party job over n samples whose vectors all hold `fill`. */
function checkpointOf(round: number, fill: number, n = 1000): Omit<Checkpoint, 'format'> {
  const v = () => new Float64Array(n).fill(fill);
  return {
    jobId: 'job-a',
    round,
    labelsDigest: 'd',
    samples: { labelRows: { train: Uint32Array.from({ length: n }, (_, i) => i), test: new Uint32Array(0) }, dropped: { train: 0, test: 0 } },
    evaluationSkipped: null,
    setup: { type: 'setup', jobId: 'job-a', lambda: 1e-4, loss: 'logistic', rounds: 100, rho: 0.5, parties: 1, algorithm: 'admm', labelFlip: 0 },
    admm: { rho: 0.5, c: v(), z: v(), dualVar: v(), sum: v(), a: v(), t: v(), slope: v(), curvature: v(), prevShares: [v()] },
    replay: { round, rho: 0.5, cs: [v()], previousShares: [v()], shares: [v()] },
    last: { stats: { primal: 0, dual: 0, epsPrimal: 1, epsDual: 1, rho: 0.5 }, penaltySq: 0, converged: false, test: undefined, seconds: 1, roundSeconds: 1, bytes: { toCoordinator: 0, fromCoordinator: 0 }, epsilonSpent: {} },
  };
}

test('checkpoints written in the background land in order, with the state as it was when each was queued, whether their buffer is fresh or kept; two buffers are kept', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'checkpoint.bin');
  // As each write lands, the file holds that round's state: a checkpoint queued behind
  // another is encoded into a buffer of its own, not into the one still being written.
  const landed: number[] = [];
  const log = {
    debug: ({ round }: { round: number }) => {
      const cp = readCheckpoint(path);
      assert.equal(cp.round, round, 'the file holds the round just written');
      if (round > 10) assert.equal(cp.admm.z[0], round, `round ${round}'s values`);
      landed.push(round);
    },
  } as unknown as Logger;
  const writer = new CheckpointWriter(path, log);
  const state = checkpointOf(10, 1);
  writer.write(state);
  // The caller's vectors go on changing at once: the queued checkpoint keeps round 10's values.
  state.admm.z.fill(99);
  await writer.flush();
  assert.equal(readCheckpoint(path).admm.z[0], 1);
  assert.equal(writer.allocations, 1);
  // Three at once: 20 reuses the first buffer, 30 gets the second kept one, and 40, with both
  // still being written, one of its own.
  for (const r of [20, 30, 40]) writer.write(checkpointOf(r, r));
  assert.equal(writer.allocations, 3);
  await writer.flush();
  const cp = readCheckpoint(path);
  assert.equal(cp.round, 40);
  assert.equal(cp.admm.z[0], 40);
  // Every write done: the next ones reuse the kept buffers, one while the other is written.
  writer.write(checkpointOf(50, 50));
  writer.write(checkpointOf(60, 60));
  await writer.flush();
  assert.equal(readCheckpoint(path).admm.z[0], 60);
  assert.equal(writer.allocations, 3, 'no buffer allocated while a kept one is free');
  assert.deepEqual(landed, [10, 20, 30, 40, 50, 60]);
  assert.deepEqual(readdirSync(dir).sort(), ['checkpoint.bin', 'coordinator.key'], 'no temporary file is left');
});

test('packedBound is at least the encoded size of a checkpoint and of awkward values, so the encoding never outgrows its buffer', () => {
  // The checkpoint module's encoder settings.
  const packr = new Packr({ moreTypes: true, useRecords: false });
  const values: unknown[] = [
    { format: 'admm-share-checkpoint/6', ...checkpointOf(3, 0.1, 5000) },
    { s: 'é€𝄞'.repeat(1000), numbers: [1, -1, 2 ** 40, -(2 ** 60), 0.1, NaN, true, null, undefined], arrays: [new Float32Array(7), new Uint8Array(3), new Int32Array(5), new Float64Array(0)], nested: { a: { b: { c: ['x', ''] } } } },
    'plain',
    12,
    [],
    {},
  ];
  for (const v of values) {
    const size = packr.pack(v).length;
    assert.ok(packedBound(v) >= size, `bound ${packedBound(v)} below the encoded ${size} bytes of ${JSON.stringify(v)?.slice(0, 80)}`);
  }
});

test('a checkpoint that cannot be written fails the next write and flush, naming the file and the round', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'missing-dir', 'checkpoint.bin');
  const writer = new CheckpointWriter(path);
  writer.write(checkpointOf(10, 1));
  const named = (err: unknown) => err instanceof DataError && err.message.includes(path) && /cannot write the checkpoint of round 10 \(ENOENT\)/.test(err.message);
  await assert.rejects(writer.flush(), named);
  assert.throws(() => writer.write(checkpointOf(20, 2)), named);
});

test('checkpoints come by time unless --checkpoint-every is given: the flags\' policy, and which rounds are due', () => {
  assert.deepEqual(checkpointPolicy(undefined, undefined), { seconds: DEFAULT_CHECKPOINT_SECONDS });
  assert.deepEqual(checkpointPolicy(undefined, 2.5), { seconds: 2.5 });
  assert.deepEqual(checkpointPolicy(5, undefined), { rounds: 5 });
  assert.deepEqual(checkpointPolicy(0, undefined), { rounds: 0 });
  assert.throws(() => checkpointPolicy(5, 60), (e: Error) => e instanceof ConfigError && /not both/.test(e.message));
  for (const bad of [0, -1, NaN, Infinity]) assert.throws(() => checkpointPolicy(undefined, bad), (e: Error) => e instanceof ConfigError && e.message.includes('--checkpoint-seconds'));
  for (const bad of [-1, 2.5, NaN]) assert.throws(() => checkpointPolicy(bad, undefined), (e: Error) => e instanceof ConfigError && e.message.includes('--checkpoint-every'));
  // By rounds: every k-th (0: never), whatever the time.
  const due = (p: ReturnType<typeof checkpointPolicy>, rounds: number[], now = 0, last = 0) => rounds.filter((r) => checkpointDue(p, r, now, last));
  assert.deepEqual(due({ rounds: 5 }, [1, 4, 5, 6, 10, 12, 15]), [5, 10, 15]);
  assert.deepEqual(due({ rounds: 0 }, [1, 5, 10], 1e9, 0), []);
  // By time: once `seconds` have passed since the last one (ms, as performance.now()), whatever the round.
  assert.deepEqual(due({ seconds: 30 }, [1, 7], 29_999, 0), []);
  assert.deepEqual(due({ seconds: 30 }, [1, 7], 30_000, 0), [1, 7]);
  assert.equal(checkpointDue({ seconds: 0.5 }, 3, 1_700, 1_100), true);
  assert.equal(checkpointDue({ seconds: 0.5 }, 3, 1_500, 1_100), false);
});

test('a checkpoint is read only under the coordinator.key of its folder: a format-5 file, a missing key and another folder\'s key are refused naming the file', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'checkpoint.bin');
  const writer = new CheckpointWriter(path);
  writer.write(checkpointOf(4, 2, 10));
  await writer.flush();
  assert.equal(readCheckpoint(path).round, 4);
  const signedBytes = readFileSync(path);
  const refused = (re: RegExp) => (err: unknown) => err instanceof DataError && err.file === path && re.test(err.message);
  // The unsigned format 5 (no trailer): named as such, with what to do.
  const packr = new Packr({ moreTypes: true, useRecords: false });
  writeFileSync(path, packr.pack({ format: 'admm-share-checkpoint/5', ...checkpointOf(4, 2, 10) }));
  assert.throws(() => readCheckpoint(path), refused(/checkpoint: format 'admm-share-checkpoint\/5' has no keyed digest, so a change to it cannot be detected; it cannot be resumed: start the job again without --resume/));
  writeFileSync(path, Buffer.alloc(10));
  assert.throws(() => readCheckpoint(path), refused(/checkpoint: its content does not match its keyed digest/));
  // Signed under another folder's key.
  const other = tempDir(t);
  writeFileSync(path, signedBytes);
  const elsewhere = join(other, 'checkpoint.bin');
  writeFileSync(elsewhere, signedBytes);
  const w2 = new CheckpointWriter(join(other, 'another.bin'));
  w2.write(checkpointOf(1, 1, 10));
  await w2.flush();
  assert.throws(() => readCheckpoint(elsewhere), (err: unknown) => err instanceof DataError && err.file === elsewhere && /does not match its keyed digest/.test(err.message));
  rmSync(join(dir, 'coordinator.key'));
  assert.throws(() => readCheckpoint(path), refused(/its key .*coordinator\.key is missing/));
  // A format-5 checkpoint in an --out from before the keys: named as unsigned, not as keyless.
  writeFileSync(path, packr.pack({ format: 'admm-share-checkpoint/5', ...checkpointOf(4, 2, 10) }));
  assert.throws(() => readCheckpoint(path), refused(/format 'admm-share-checkpoint\/5' has no keyed digest/));
});
