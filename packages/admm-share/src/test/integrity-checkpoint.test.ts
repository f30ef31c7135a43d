// A checkpoint from a real run, damaged or edited at rest, and `admm-coordinator --resume`: a
// flipped byte, zeroed bytes, a truncated file, an edited z and a share of the previous round
// put in place of the last one (the last two with a plain SHA-256 appended, as an editor who
// knows the format but not the key would) are each refused with exit 65, naming the file and
// without a stack trace; the untouched file resumes.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { gate, roundMessage } from './gate.js';
import { BIN, STACK_LINE, killAll, run, tempDir } from './procs.js';

after(killAll);

test('a checkpoint damaged or edited at rest is refused by --resume naming the file (exit 65, no stack); the untouched one resumes', async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 300, testRows: 50, seed: 'integrity-checkpoint' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const out = join(dir, 'out');
  const coordinatorArgs = ['--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', '40', '--tol-abs', '0', '--tol-rel', '0', '--job', 'integrity-job', '--checkpoint-every', '1000'];
  const first = run(BIN.coordinator, ['--port', '0', ...coordinatorArgs]);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  // SIGTERM as round 8 is sent (party-1 never gets it): the coordinator checkpoints round 7 and exits 130.
  const relay = await gate(port);
  t.after(() => relay.close());
  relay.before(roundMessage(8), () => {
    first.child.kill('SIGTERM');
    return 'drop';
  });
  const parties = files.parties.map((f, m) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${m === 0 ? relay.port : port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`), '--reconnect-timeout', '30000']),
  );
  assert.equal((await first.exit).code, 130, first.stderr());
  for (const p of parties) p.kill();
  await Promise.all(parties.map((p) => p.exit));

  const path = join(out, 'checkpoint.bin');
  const pristine = readFileSync(path);
  // The body is MessagePack with the checkpoint module's settings; an editor re-encodes it.
  const packr = new Packr({ moreTypes: true, useRecords: false });
  const body = pristine.subarray(0, pristine.length - 32);
  const resealed = (edit: (cp: { admm: { z: Float64Array }; replay: { shares: Float64Array[]; previousShares: Float64Array[] } }) => void) => {
    const cp = packr.unpack(body);
    edit(cp);
    const bytes = packr.pack(cp);
    return Buffer.concat([bytes, createHash('sha256').update(bytes).digest()]);
  };
  const flipped = Buffer.from(pristine);
  flipped[Math.floor(flipped.length / 2)] ^= 0x01;
  const zeroed = Buffer.from(pristine);
  zeroed.fill(0, Math.floor(zeroed.length / 3), Math.floor(zeroed.length / 3) + 64);
  const cases: [string, Buffer][] = [
    ['one byte flipped', flipped],
    ['64 bytes zeroed', zeroed],
    ['truncated', pristine.subarray(0, pristine.length - 100)],
    ['z edited', resealed((cp) => (cp.admm.z[0] += 1))],
    ['the previous round\'s share replayed', resealed((cp) => (cp.replay.shares[1] = cp.replay.previousShares[1]))],
  ];
  // Each case's outcome, all reported together.
  const outcomes: Record<string, string> = {};
  for (const [what, bytes] of cases) {
    writeFileSync(path, bytes);
    // Without the check, the coordinator resumes and waits for the parties, then gives up (69).
    const resume = run(BIN.coordinator, ['--port', '0', ...coordinatorArgs, '--resume', '--rejoin-timeout', '1000']);
    const { code } = await resume.exit;
    const err = resume.stderr();
    const refused = code === 65 && err.includes(`${path}: checkpoint: its content does not match its keyed digest`) && !STACK_LINE.test(err);
    const started = /resuming from checkpoint/.test(resume.stdout());
    outcomes[what] = refused ? 'refused' : `exit ${code}${started ? ', resumed' : ''}: ${err.split('\n')[0].slice(0, 160)}`;
  }
  assert.deepEqual(outcomes, Object.fromEntries(cases.map(([what]) => [what, 'refused'])));
  writeFileSync(path, pristine);
  const resumed = run(BIN.coordinator, ['--port', '0', ...coordinatorArgs, '--resume', '--rejoin-timeout', '1000']);
  const r = await resumed.waitFor((l) => l.msg === 'resuming from checkpoint; waiting for the parties to rejoin', 'resume');
  assert.equal(r.round, 7);
  resumed.kill();
  await resumed.exit;
});
