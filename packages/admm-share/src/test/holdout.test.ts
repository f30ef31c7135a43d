// Evaluation the label holder controls: two parties, one CSV file each (ids overlapping the
// labels in part, rows in their own order), and a coordinator that chooses its test rows among
// the aligned ids (--holdout with a seed, or --test-ids) and trains on the rest. The choice is
// recomputed here from the ids alone, and the job's test metrics and training objective from
// the parties' model files alone, for ADMM, SGD and the one-shot training with a private
// passive party.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { gate, roundMessage } from './gate.js';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';

after(killAll);

const ROWS = 600;
/** Columns of party-1 (the first) and party-2 (the rest). */
const SPLIT = 6;
const s = syntheticDataset({ trainRows: ROWS, testRows: 1, blocks: [SPLIT, 5], seed: 'holdout-test' });
const dense = (i: number): number[] => {
  const row = new Array<number>(s.train.X.cols).fill(0);
  for (let k = s.train.X.indptr[i]; k < s.train.X.indptr[i + 1]; k++) row[s.train.X.indices[k]] = s.train.X.values[k];
  return row;
};
const rowOf = new Map(s.train.ids.map((id, i) => [id, i]));
// The labels lack every 17th id; party-1 every 10th (from the 4th); party-2 every 13th (from the
// 6th), and it holds ids nobody else has.
const labelIds = s.train.ids.filter((_, i) => i % 17 !== 0);
const partyIds = [s.train.ids.filter((_, i) => i % 10 !== 3), s.train.ids.filter((_, i) => i % 13 !== 5)];
const aligned = labelIds.filter((id) => partyIds.every((ids) => ids.includes(id)));
const label = (id: string) => s.train.y[rowOf.get(id)!];

function writeFiles(dir: string) {
  const labels = join(dir, 'labels.csv');
  writeFileSync(labels, ['id,label', ...labelIds.map((id) => `${id},${label(id) > 0 ? 'yes' : 'no'}`)].join('\n') + '\n');
  const parties = partyIds.map((ids, m) => {
    const [from, to] = m === 0 ? [0, SPLIT] : [SPLIT, s.train.X.cols];
    const names = Array.from({ length: to - from }, (_, j) => `f${from + j + 1}`);
    const rows = ids.map((id) => [id, ...dense(rowOf.get(id)!).slice(from, to)].join(','));
    const extra = m === 1 ? Array.from({ length: 20 }, (_, j) => [`only-2-${j}`, ...names.map((_, c) => ((j * 7 + c) % 5) - 2)].join(',')) : [];
    const path = join(dir, `party-${m + 1}.csv`);
    // party-2 writes its rows backwards: positions in its file are not those of the labels.
    writeFileSync(path, ['id,' + names.join(','), ...(m === 1 ? [...rows, ...extra].reverse() : rows)].join('\n') + '\n');
    return { id: `party-${m + 1}`, path, from, to };
  });
  return { labels, parties };
}

/** The holdout, recomputed from the documented rule: the round(f n) aligned ids of smallest SHA-256(seed, 0, id). */
function heldOut(seed: string, fraction: number): Set<string> {
  const key = (id: string) => createHash('sha256').update(`${seed}\0${id}`).digest('hex');
  const k = Math.round(fraction * aligned.length);
  return new Set([...aligned].sort((a, b) => (key(a) < key(b) ? -1 : 1)).slice(0, k));
}

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
const softplus = (t: number) => (t > 0 ? t + Math.log1p(Math.exp(-t)) : Math.log1p(Math.exp(t)));

/** Log loss, accuracy and AUC (by counting pairs) of scores against the labels of `ids`. */
function metrics(ids: string[], score: (id: string) => number) {
  const t = ids.map(score);
  const y = ids.map(label);
  let pairs = 0;
  let wins = 0;
  for (let i = 0; i < ids.length; i++)
    for (let j = 0; j < ids.length; j++)
      if (y[i] > 0 && y[j] < 0) {
        pairs++;
        wins += t[i] > t[j] ? 1 : t[i] === t[j] ? 0.5 : 0;
      }
  return { logLoss: t.reduce((a, v, i) => a + softplus(-y[i] * v), 0) / ids.length, accuracy: t.filter((v, i) => (v > 0 ? 1 : -1) === y[i]).length / ids.length, auc: wins / pairs };
}

/** x . row over a party's columns of the sample `id`, its row first scaled to norm <= 1 with `unit`. */
function partScore(id: string, p: { from: number; to: number }, x: number[], unit = false): number {
  const row = dense(rowOf.get(id)!).slice(p.from, p.to);
  const norm = Math.sqrt(row.reduce((a, v) => a + v * v, 0));
  const dot = row.reduce((a, v, j) => a + v * x[j], 0);
  return unit && norm > 1 ? dot / norm : dot;
}

function job(dir: string, coordinatorArgs: string[], partyArgs: (m: number) => string[]) {
  mkdirSync(dir, { recursive: true });
  const files = writeFiles(dir);
  const out = join(dir, 'out');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', 'party-1,party-2', '--out', out, ...coordinatorArgs]);
  const parties = coord.waitFor((r) => r.msg === 'listening').then((r) =>
    files.parties.map((f, m) => run(BIN.party, ['--coordinator', `ws://127.0.0.1:${(r as { port: number }).port}`, '--id', f.id, '--data', f.path, '--no-prepare', '--model', join(out, `model-${f.id}.json`), ...partyArgs(m)])),
  );
  return { files, out, coord, parties };
}

async function finished(coord: Proc, parties: Promise<Proc[]>): Promise<Proc[]> {
  const ps = await parties;
  // A party that fails leaves the coordinator waiting for it: stopped, so that the test fails rather than hangs.
  await Promise.all(ps.map((p) => p.exit.then((e) => e.code !== 0 && coord.child.kill())));
  for (const p of [...ps, coord]) assert.equal((await p.exit).code, 0, p.stderr());
  return ps;
}

function assertClose(got: Record<string, number>, want: Record<string, number>, what: string): void {
  for (const k of Object.keys(want)) assert.ok(Math.abs(got[k] - want[k]) < 1e-9, `${what} ${k}: the job's ${got[k]}, recomputed ${want[k]}`);
}

test('--holdout with ADMM: the seeded choice among the aligned ids, metrics and objective recomputed from the model files on the held-out and the other rows', async (t) => {
  const dir = tempDir(t);
  const { files, out, coord, parties } = job(dir, ['--algorithm', 'admm', '--holdout', '0.25', '--holdout-seed', 'bank-2026', '--rounds', '30', '--tol-abs', '0', '--tol-rel', '0', '--job', 'holdout-admm'], () => ['--mechanism', 'none']);
  await finished(coord, parties);
  const summary = readJson(join(out, 'summary.json'));
  const testIds = heldOut('bank-2026', 0.25);
  const trainIds = aligned.filter((id) => !testIds.has(id));
  assert.ok(aligned.length > 400 && aligned.length < labelIds.length, `${aligned.length} aligned ids`);
  assert.deepEqual(summary.testSelection, { method: 'holdout', fraction: 0.25, seed: 'bank-2026', aligned: aligned.length, test: testIds.size, train: trainIds.length });
  assert.deepEqual(summary.rows, { train: trainIds.length, test: testIds.size });
  assert.equal(summary.droppedRows, labelIds.length - aligned.length);
  const models = files.parties.map((f) => readJson(join(out, `model-${f.id}.json`)));
  for (const m of models) assert.equal(m.rows, trainIds.length, 'each party trained on the rows not held out');
  const score = (id: string) => files.parties.reduce((a, p, m) => a + partScore(id, p, models[m].coefficients), 0);
  // The job's test rows are the ids chosen here: its metrics are theirs, from the model files.
  assertClose(summary.test, metrics([...testIds], score), 'test');
  // And it trained on the others: its objective is the mean loss over them plus the ridge term.
  const penalty = models.reduce((a, m) => a + m.coefficients.reduce((b: number, v: number) => b + v * v, 0), 0);
  const objective = trainIds.reduce((a, id) => a + softplus(-label(id) * score(id)), 0) / trainIds.length + (summary.lambda / 2) * penalty;
  assert.ok(Math.abs(objective - summary.objective) < 1e-9 * Math.abs(objective), `objective: the job's ${summary.objective}, recomputed ${objective}`);
  const line = coord.records.find((r) => typeof r.msg === 'string' && r.msg.startsWith('test rows:'));
  assert.equal(line?.msg, `test rows: ${testIds.size} of the ${aligned.length} aligned ids held out of training (--holdout 0.25, seed bank-2026); training on the other ${trainIds.length}`);
});

test('--test-ids with SGD and label privacy: listed ids among the aligned ones are the test rows, the others are counted; metrics against the true labels, recomputed from the model files', async (t) => {
  const dir = tempDir(t);
  // Every fifth aligned id, one the labels have but party-1 lacks, and one nobody has.
  const listed = [...aligned.filter((_, i) => i % 5 === 2), s.train.ids[3], 'nobody'];
  assert.ok(labelIds.includes(s.train.ids[3]) && !aligned.includes(s.train.ids[3]));
  const idsFile = join(dir, 'test-ids.txt');
  writeFileSync(idsFile, listed.join('\n') + '\n');
  const { files, out, coord, parties } = job(dir, ['--algorithm', 'sgd', '--test-ids', idsFile, '--rounds', '5', '--job', 'holdout-sgd', '--label-epsilon', '1', '--label-seed', 'flips'], () => ['--mechanism', 'none']);
  await finished(coord, parties);
  const summary = readJson(join(out, 'summary.json'));
  const testIds = aligned.filter((_, i) => i % 5 === 2);
  assert.deepEqual(summary.testSelection, { method: 'test-ids', file: idsFile, listed: listed.length, notAligned: 2, aligned: aligned.length, test: testIds.length, train: aligned.length - testIds.length });
  assert.deepEqual(summary.rows, { train: aligned.length - testIds.length, test: testIds.length });
  // The training labels were flipped (about one in four); the test rows are scored against the true ones (label() here).
  assert.ok(summary.labelPrivacy.flipped > 0.15 * summary.rows.train, `${summary.labelPrivacy.flipped} flipped`);
  const models = files.parties.map((f) => readJson(join(out, `model-${f.id}.json`)));
  assertClose(summary.test, metrics(testIds, (id) => files.parties.reduce((a, p, m) => a + partScore(id, p, models[m].coefficients), 0)), 'test');
});

test('--holdout with the one-shot training: a private passive party with --release-test-scores releases over the training rows only; without the flag it refuses', async (t) => {
  const dir = tempDir(t);
  const args = ['--holdout', '0.3', '--active-party', 'party-1', '--job', 'holdout-oneshot'];
  const { files, out, coord, parties } = job(dir, args, (m) => (m === 0 ? ['--role', 'active', '--intercept'] : ['--epsilon', '2', '--release-test-scores']));
  const [, passive] = await finished(coord, parties);
  const summary = readJson(join(out, 'summary.json'));
  assert.equal(summary.algorithm, 'one-shot');
  const testIds = heldOut('1', 0.3); // the default seed
  const n = aligned.length - testIds.size;
  assert.deepEqual(summary.testSelection, { method: 'holdout', fraction: 0.3, seed: '1', aligned: aligned.length, test: testIds.size, train: n });
  // The release (row numbers, then values) covers the training rows, not the held-out ones.
  assert.equal(readFileSync(join(out, 'model-party-2.release.bin')).length, 2 * 8 * n);
  assert.ok(passive.records.some((r) => r.level === 40 && /held-out test rows are scored without noise .* not covered by the privacy guarantee/.test(String(r.msg))), 'the passive party says its test scores are not covered');
  assert.deepEqual(readJson(join(out, 'model-party-2.privacy.json')).testScores, { rows: testIds.size, from: 'rows the coordinator held out of the training file', guarantee: 'not covered: sent without noise (--release-test-scores)' });
  assert.equal(readJson(join(out, 'model-party-1.privacy.json')).testScores, undefined, 'the active party has no budget: nothing to report');
  const [active, model2] = files.parties.map((f) => readJson(join(out, `model-${f.id}.json`)));
  const [p1, p2] = files.parties;
  const score = (id: string) =>
    partScore(id, p1, active.coefficients, true) + active.intercept + active.oneShot.weights['party-2'] * Math.max(-model2.oneShot.clip, Math.min(model2.oneShot.clip, partScore(id, p2, model2.coefficients, true)));
  assertClose(summary.test, metrics([...testIds], score), 'test');

  // The same passive party without --release-test-scores: un-noised test scores are not sent; it stops and says why.
  const again = job(join(dir, 'refused'), [...args, '--job', 'holdout-refused'], (m) => (m === 0 ? ['--role', 'active', '--intercept'] : ['--epsilon', '2']));
  const [, refusing] = await again.parties;
  assert.equal((await refusing.exit).code, 64);
  assert.match(refusing.stderr(), /holds out \d+ of this party's rows as test rows .*pass --release-test-scores/);
  assert.notEqual((await again.coord.exit).code, 0);
});

test('bad --holdout fractions and flags that conflict: exit 64 with a message naming the flags', async () => {
  const cases: [string[], RegExp][] = [
    [['--holdout', '0'], /--holdout must be a fraction strictly between 0 and 1 .*got 0/],
    [['--holdout', '1'], /--holdout must be a fraction strictly between 0 and 1 .*got 1/],
    [['--holdout', '1.5'], /got 1\.5/],
    [['--holdout', 'half'], /got NaN/],
    [['--holdout', '0.2', '--test-labels', 'test.csv'], /--holdout and --test-labels both give the test rows/],
    [['--test-ids', 'ids.txt', '--test-labels', 'test.csv'], /--test-ids and --test-labels both give the test rows/],
    [['--holdout', '0.2', '--test-ids', 'ids.txt'], /--holdout and --test-ids both choose the test rows/],
    [['--holdout-seed', '7'], /--holdout-seed needs --holdout/],
    // A flag without its value is not silently dropped.
    [['--holdout'], /Not enough arguments following: holdout/],
    [['--test-ids'], /Not enough arguments following: test-ids/],
  ];
  await Promise.all(
    cases.map(async ([flags, message]) => {
      const p = run(BIN.coordinator, ['--labels', 'labels.csv', '--parties', 'a,b', '--port', '0', ...flags]);
      assert.equal((await p.exit).code, 64, flags.join(' '));
      assert.match(p.stderr(), message, flags.join(' '));
    }),
  );
});

test('--holdout through a restarted party and a resumed coordinator: the held-out rows stay out of training; --resume with another seed is refused before it listens', async (t) => {
  const dir = tempDir(t);
  const files = writeFiles(dir);
  const out = join(dir, 'out');
  const holdout = ['--algorithm', 'admm', '--holdout', '0.2', '--holdout-seed', 'resumed', '--rounds', '30', '--tol-abs', '0', '--tol-rel', '0', '--job', 'holdout-resume', '--eval-every', '5'];
  const coordinator = (port: number, extra: string[]) => run(BIN.coordinator, ['--port', String(port), '--labels', files.labels, '--parties', 'party-1,party-2', '--out', out, ...holdout, ...extra]);
  const first = coordinator(0, []);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  const party = (m: number, url: string) =>
    run(BIN.party, ['--coordinator', url, '--id', files.parties[m].id, '--data', files.parties[m].path, '--no-prepare', '--model', join(out, `model-party-${m + 1}.json`), '--mechanism', 'none', '--reconnect-timeout', '60000']);
  // party-1 goes through a relay: before round 6 reaches it party-2 is killed (and started
  // again, so it intersects and is set up anew); before round 12 the coordinator is stopped.
  const relay = await gate(port);
  t.after(() => relay.close());
  const parties: Proc[] = [];
  relay.before(roundMessage(6), () => void parties[1].child.kill('SIGKILL'));
  relay.before(roundMessage(12), () => {
    first.child.kill('SIGTERM');
    return 'drop';
  });
  parties.push(party(0, `ws://127.0.0.1:${relay.port}`), party(1, `ws://127.0.0.1:${port}`));
  assert.equal((await parties[1].exit).signal, 'SIGKILL');
  const restarted = party(1, `ws://127.0.0.1:${port}`);
  await first.waitFor((r) => r.msg === 'party rejoined' && r.party === 'party-2', 'party-2 rejoining');
  assert.equal((await first.exit).code, 130);
  // Resumed with another seed: other test rows, refused before the parties are let in (they keep trying).
  const wrong = run(BIN.coordinator, ['--port', String(port), '--labels', files.labels, '--parties', 'party-1,party-2', '--out', out, ...holdout, '--holdout-seed', 'other', '--resume']);
  assert.equal((await wrong.exit).code, 64);
  assert.match(wrong.stderr(), /--resume: --holdout 0\.2 --holdout-seed other choose other test rows than the checkpointed job held out/);
  const second = coordinator(port, ['--resume']);
  await finished(second, Promise.resolve([parties[0], restarted]));
  const summary = readJson(join(out, 'summary.json'));
  const testIds = heldOut('resumed', 0.2);
  const trainIds = aligned.filter((id) => !testIds.has(id));
  assert.equal(summary.rounds, 30);
  assert.deepEqual(summary.testSelection, { method: 'holdout', fraction: 0.2, seed: 'resumed', aligned: aligned.length, test: testIds.size, train: trainIds.length });
  const models = files.parties.map((f) => readJson(join(out, `model-${f.id}.json`)));
  const score = (id: string) => files.parties.reduce((a, p, m) => a + partScore(id, p, models[m].coefficients), 0);
  assertClose(summary.test, metrics([...testIds], score), 'test');
  const penalty = models.reduce((a, m) => a + m.coefficients.reduce((b: number, v: number) => b + v * v, 0), 0);
  const objective = trainIds.reduce((a, id) => a + softplus(-label(id) * score(id)), 0) / trainIds.length + (summary.lambda / 2) * penalty;
  assert.ok(Math.abs(objective - summary.objective) < 1e-9 * Math.abs(objective), `objective: the job's ${summary.objective}, recomputed ${objective}`);
});
