// simulate --prepare: every party standardises its block with the exact statistics of its own
// training file (no budget), keeps them in its model file, and party 1 fits the intercept that
// centred columns need. The statistics are recomputed here from the LIBSVM files simulate wrote.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

/** Column means and population standard deviations of a LIBSVM file (sample id first, then index:value pairs). */
function columnStats(path: string, cols: number): { mean: number[]; std: number[] } {
  const sum = new Array<number>(cols).fill(0);
  const sq = new Array<number>(cols).fill(0);
  const lines = readFileSync(path, 'utf8').trim().split('\n');
  for (const line of lines)
    for (const pair of line.trim().split(/\s+/).slice(1)) {
      const [j, v] = pair.split(':').map(Number);
      sum[j - 1] += v;
      sq[j - 1] += v * v;
    }
  const n = lines.length;
  const mean = sum.map((s) => s / n);
  return { mean, std: sq.map((s, j) => Math.sqrt(s / n - mean[j] ** 2)) };
}

test('simulate --prepare: each party standardises with its own exact statistics, saved in its model; party 1 has the intercept', async (t) => {
  const out = join(tempDir(t, 'admm-prepare-sim-'), 'run');
  const p = run(BIN.share, ['simulate', '--prepare', '--rounds', '30', '--no-baselines', '--out', out]);
  assert.equal((await p.exit).code, 0, p.stderr());
  for (const [m, id] of ['party-1', 'party-2', 'party-3'].entries()) {
    const model = JSON.parse(readFileSync(join(out, `model-${id}.json`), 'utf8'));
    assert.equal(model.format, 'admm-share-party-model/4');
    assert.equal(model.intercept !== null, m === 0, `${id}: the intercept is at party 1 only`);
    const inputs = model.preparation.inputs as { name: string; kind: string; center: number; scale: number; centerSource: string }[];
    const { mean, std } = columnStats(join(out, 'data', `${id}.train.libsvm`), inputs.length);
    inputs.forEach((c, j) => {
      assert.equal(c.kind, 'numeric');
      assert.equal(c.centerSource, 'exact');
      assert.ok(Math.abs(c.center - mean[j]) <= 1e-9 * Math.max(1, Math.abs(mean[j])), `${id} column ${c.name}: centre ${c.center} vs ${mean[j]}`);
      assert.ok(Math.abs(c.scale - std[j]) <= 1e-9 * Math.max(1, std[j]), `${id} column ${c.name}: scale ${c.scale} vs ${std[j]}`);
    });
  }
});
