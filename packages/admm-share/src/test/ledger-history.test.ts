// The privacy ledger keeps every job's history (issue 46, item 4) over real processes: job A,
// then job B, then A again with the same model folder; the third run finds A's entry and
// sends A's release again (the same vector, never a second draw), so the active party's
// combined model, a function of the releases it received, is A's first model bit for bit.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { BIN, run, killAll, tempDir } from './procs.js';

after(killAll);

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** A one-shot job over real processes: an active party-1 and passive party-2 and party-3, their models in `models`. */
async function oneShot(dir: string, job: string, models: string): Promise<{ released: Record<string, unknown>[] }> {
  const s = syntheticDataset({ trainRows: 600, testRows: 200, seed: 'ledger-history' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const coord = run(BIN.coordinator, ['--port', '0', '--job', job, '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', join(dir, `out-${job}`), '--active-party', 'party-1']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((f, m) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--model', join(models, `model-${f.id}.json`), ...(m === 0 ? ['--role', 'active'] : ['--epsilon', '2'])]),
  );
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  return { released: parties[1].records.filter((r) => r.msg === 'scores released') };
}

test('job A, then B, then A again with the same model folder: A\'s release is sent again (the same vector), B\'s is kept, nothing is drawn twice', async (t) => {
  const dir = tempDir(t);
  const models = join(dir, 'models');
  const releaseFile = join(models, 'model-party-2.release.bin');

  const a1 = await oneShot(dir, 'job-a', models);
  const modelA = readJson(join(models, 'model-party-1.json'));
  const vectorA = readFileSync(releaseFile);
  await oneShot(dir, 'job-b', models);
  const modelB = readJson(join(models, 'model-party-1.json'));
  assert.notDeepEqual(modelB.oneShot.weights, modelA.oneShot.weights, 'job B is a new release (another draw)');
  const a2 = await oneShot(dir, 'job-a', models);
  const modelA2 = readJson(join(models, 'model-party-1.json'));

  assert.deepEqual([a1.released[0].again, a2.released[0].again], [false, true], 'the third run sent the stored vector');
  assert.deepEqual(modelA2.oneShot.weights, modelA.oneShot.weights, "the active party's fit on A's releases is A's again");
  assert.deepEqual(modelA2.coefficients, modelA.coefficients);
  // The release file holds A's release, then B's; A's bytes are unchanged and nothing was added.
  const after3 = readFileSync(releaseFile);
  assert.equal(after3.length, 2 * vectorA.length, "A's and B's releases, no third");
  assert.ok(after3.subarray(0, vectorA.length).equals(vectorA), "A's release, unchanged");
  // The ledger keeps both jobs' histories, one booking each.
  const entries = readJson(join(models, 'model-party-2.ledger.json')).entries as { jobId: string; releases: number }[];
  assert.deepEqual(entries.map((e) => [e.jobId, e.releases]), [['job-a', 1], ['job-b', 1]]);
});
