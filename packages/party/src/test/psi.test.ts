// The party's side of the private set intersection, with the coordinator's side done here by
// hand (hash, blind with a key a, match): the positions the party's answer yields map back,
// through fileRows, to the rows of the party's file that hold those ids; a repeat is the same
// answer, a new coordinator key still gives the same rows, and bad label points are refused;
// with a PSI cache, both sets' points are kept and reused by a later process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PsiCache, PsiTeam, type SpilledBytes, blindPoints, hashToPoints, newPsiKey, packIds, pointKeys } from '@admm-share/core';
import { ProtocolError } from '@admm-share/protocol';
import { readAll, tempDir } from '@admm-share/core/test-support';
import { PartyPsi } from '../intersection/psi.js';

const quiet = () => () => undefined;

/** What a coordinator holding `labels` learns from the party's answer: label row -> the party's position. */
async function intersect(psi: PartyPsi, labels: string[], key = newPsiKey()): Promise<Map<number, number>> {
  const answer = await psi.answer('train', blindPoints(hashToPoints(labels), key));
  const mine = new Map(pointKeys(blindPoints(readAll(answer.points), key)).map((k, i) => [k, i]));
  const out = new Map<number, number>();
  pointKeys(readAll(answer.labelPoints)).forEach((k, j) => {
    const i = mine.get(k);
    if (i !== undefined) out.set(j, i);
  });
  return out;
}

test('the positions of the intersection map back to the file rows that hold the ids', async () => {
  const partyIds = Array.from({ length: 300 }, (_, i) => `cust-${(i * 7) % 300}`);
  const labels = Array.from({ length: 200 }, (_, i) => `cust-${i * 2}`); // 150 of them are the party's
  const psi = new PartyPsi(new PsiTeam(), { train: packIds(partyIds), test: undefined }, quiet);
  const matched = await intersect(psi, labels);
  assert.equal(matched.size, 150);
  const rows = psi.fileRows('train', Uint32Array.from(matched.values()));
  [...matched.keys()].forEach((j, k) => assert.equal(partyIds[rows[k]], labels[j]));
  // The order sent is the party's own shuffle, not its file order.
  const answer = await psi.answer('train', blindPoints(hashToPoints(labels), newPsiKey()));
  assert.notDeepEqual(readAll(answer.points), blindPoints(hashToPoints(partyIds), newPsiKey()));
  // Another coordinator key (a restarted coordinator): the same rows for the same label ids.
  const again = await intersect(psi, labels);
  assert.deepEqual([...again.entries()].sort((x, y) => x[0] - y[0]), [...matched.entries()].sort((x, y) => x[0] - y[0]));
});

test('a repeated psi gets the same answer; a label point off the curve, or a set the party lacks, is refused', async () => {
  const psi = new PartyPsi(new PsiTeam(), { train: packIds(['a', 'b', 'c']), test: undefined }, quiet);
  const labels = blindPoints(hashToPoints(['b', 'c', 'd']), newPsiKey());
  const read = (a: { points: SpilledBytes; labelPoints: SpilledBytes }) => ({ points: readAll(a.points), labelPoints: readAll(a.labelPoints) });
  const first = read(await psi.answer('train', labels.slice()));
  assert.deepEqual(read(await psi.answer('train', labels.slice())), first);
  const bad = labels.slice();
  bad.fill(0, 32, 64); // u = 0: the identity
  await assert.rejects(psi.answer('train', bad), (err: unknown) => err instanceof ProtocolError && err.kind === 'invalid' && /psi\.points: point 1 is the identity/.test(err.message));
  await assert.rejects(psi.answer('test', labels), (err: unknown) => err instanceof ProtocolError && /psi for the test set, but this party has no test set/.test(err.message));
  assert.throws(() => psi.fileRows('test', Uint32Array.of(0)), /never asked to intersect its test ids/);
  assert.deepEqual(psi.fileRows('test', new Uint32Array(0)), new Uint32Array(0));
});

test('with a cache, the points of both sets answered at once are all kept, and a later process blinds none of them again', async (t) => {
  const dir = tempDir(t);
  const train = Array.from({ length: 300 }, (_, i) => `t-${i}`);
  const test_ = Array.from({ length: 200 }, (_, i) => `s-${i}`);
  const ids = { train: packIds(train), test: packIds(test_) };
  const labels = blindPoints(hashToPoints(['t-1', 's-2']), newPsiKey());
  const cache = PsiCache.create(dir, { tables: ['own'], id: 'c'.repeat(32) });
  const psi = new PartyPsi(new PsiTeam(), ids, quiet);
  psi.useCache(cache);
  // Both sets' points are computed side by side, into one table.
  const [a, b] = await Promise.all([psi.answer('train', labels.slice()), psi.answer('test', labels.slice())]);
  psi.settle();
  await psi.written();
  assert.deepEqual(psi.costs.get('train'), { blinded: 300, reused: 0 });
  assert.deepEqual(psi.costs.get('test'), { blinded: 200, reused: 0 });
  const { cache: reopened } = PsiCache.open(dir, { tables: ['own'], maxAgeDays: 1 });
  assert.equal(reopened?.table('own').size, 500);
  const later = new PartyPsi(new PsiTeam(), ids, quiet);
  later.useCache(reopened);
  const [c, d] = await Promise.all([later.answer('train', labels.slice()), later.answer('test', labels.slice())]);
  assert.deepEqual(later.costs.get('train'), { blinded: 0, reused: 300 });
  assert.deepEqual(later.costs.get('test'), { blinded: 0, reused: 200 });
  // The same points (in each process's own order): the same key.
  const sorted = (x: SpilledBytes) => pointKeys(readAll(x)).sort();
  assert.deepEqual(sorted(c.points), sorted(a.points));
  assert.deepEqual(sorted(d.points), sorted(b.points));
});
