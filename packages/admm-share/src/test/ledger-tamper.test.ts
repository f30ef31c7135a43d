// State at rest that cannot be rewound (issue 46, item 4) over real processes: after a
// one-shot job, party-2's privacy ledger edited to "releases 0, spent 0" with its digest
// recomputed without the party's key, and the ledger deleted while its release file is
// still there, are both refused naming the files (exit 65, no stack trace) instead of
// drawing a second release; and a scoring ledger reset to 0 is refused instead of granting
// a second noised request on a budget of one.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { BIN, type Proc, STACK_LINE, killAll, run, tempDir } from './procs.js';

after(killAll);

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
const JOB = 'tamper-job';

/** JSON with sorted keys, as an operator's script would seal an entry (the MAC's input). */
const sorted = (v: unknown): string =>
  Array.isArray(v) ? `[${v.map(sorted).join(',')}]` : v !== null && typeof v === 'object' ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${sorted((v as Record<string, unknown>)[k])}`).join(',')}}` : JSON.stringify(v);

/**
 * Set a ledger's count of the job back to 0 (and what it spent), as an operator would with an
 * editor: the last entry of a chained ledger, resealed with a key of the operator's own (not
 * the party's), or the fields of an unchained one.
 */
function rewind(path: string, fields: Record<string, unknown>): void {
  const l = readJson(path);
  if (Array.isArray(l.entries)) {
    const last = l.entries.at(-1);
    const { mac: _, ...body } = { ...last, ...fields };
    l.entries[l.entries.length - 1] = { ...body, mac: createHmac('sha256', randomBytes(32)).update(sorted(body)).digest('hex') };
  } else if (l.jobs) Object.assign(Object.values(l.jobs).at(-1) as object, fields);
  else Object.assign(l, fields);
  writeFileSync(path, JSON.stringify(l));
}

const shared = tempDir({ after });
const s = syntheticDataset({ trainRows: 600, testRows: 200, seed: 'ledger-tamper' });
const files = writeVerticalSplit(join(shared, 'data'), s.blocks, s.train, s.test);

/** The one-shot job over real processes, party-2 passive with a budget; its processes, party-2's first. */
async function oneShot(out: string, rejoinTimeout = '60000'): Promise<{ coord: Proc; parties: Proc[] }> {
  const coord = run(BIN.coordinator, ['--port', '0', '--job', JOB, '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--active-party', 'party-1', '--rejoin-timeout', rejoinTimeout]);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((f, m) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--model', join(out, `model-${f.id}.json`), ...(m === 0 ? ['--role', 'active'] : ['--epsilon', '2'])]),
  );
  return { coord, parties };
}

/** The job run once: its folder, copied by each test before it attacks it. */
let trained: Promise<string>;
before(() => {
  trained = (async () => {
    const out = join(shared, 'trained');
    const { coord, parties } = await oneShot(out);
    for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
    return out;
  })();
  trained.catch(() => {}); // reported by the tests that await it
});

async function copy(t: { after(fn: () => void): void }): Promise<string> {
  const out = join(tempDir(t), 'run');
  cpSync(await trained, out, { recursive: true });
  return out;
}

/** The job run again on `out`: party-2 must stop with a data error whose message matches every pattern; the others are stopped. */
async function refusedAgain(out: string, patterns: RegExp[]): Promise<void> {
  const { coord, parties } = await oneShot(out, '0');
  const { code } = await parties[1].exit;
  for (const p of [coord, parties[0], parties[2]]) p.child.kill('SIGKILL');
  assert.equal(code, 65, parties[1].stderr());
  for (const re of patterns) assert.match(parties[1].stderr(), re);
  assert.doesNotMatch(parties[1].stderr(), STACK_LINE);
  assert.equal(parties[1].records.filter((r) => r.msg === 'scores released').length, 0, 'nothing released');
}

const quote = (path: string) => path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

test("a ledger edited to 'releases 0, spent 0' with its digest recomputed without the party's key is refused, naming the file", async (t) => {
  const out = await copy(t);
  const ledger = join(out, 'model-party-2.ledger.json');
  rewind(ledger, { releases: 0, epsilonSpent: 0, release: null });
  await refusedAgain(out, [new RegExp(`${quote(ledger)}: privacy ledger: .*MAC does not match`)]);
});

test('a ledger deleted while its release file exists is refused, naming both files', async (t) => {
  const out = await copy(t);
  const ledger = join(out, 'model-party-2.ledger.json');
  rmSync(ledger);
  await refusedAgain(out, [new RegExp(`${quote(ledger)}: privacy ledger: goes backwards: the release file ${quote(join(out, 'model-party-2.release.bin'))} holds`)]);
});

test('a scoring ledger reset to 0 is refused: no second noised request on a budget of one', async (t) => {
  const out = await copy(t);
  const predict = async () => {
    const coord = run(BIN.coordinator, ['predict', '--model', join(out, 'job.json'), '--labels', files.testLabels!, '--out', join(out, 'predictions.csv'), '--port', '0', '--job', 'scoring-1']);
    const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
    const parties = files.parties.map((f, m) =>
      run(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.test!, '--ids', 'first', '--model', join(out, `model-${f.id}.json`), ...(m === 1 ? ['--epsilon', '1'] : ['--mechanism', 'none'])]),
    );
    return { coord, parties };
  };
  const first = await predict();
  for (const p of [first.coord, ...first.parties]) assert.equal((await p.exit).code, 0, p.stderr());
  const path = join(out, 'model-party-2.scoring-ledger.json');
  rewind(path, { releases: 0, epsilonSpent: 0 });
  const second = await predict();
  const { code } = await second.parties[1].exit;
  for (const p of [second.coord, second.parties[0], second.parties[2]]) p.child.kill('SIGKILL');
  assert.equal(code, 65, second.parties[1].stderr());
  assert.match(second.parties[1].stderr(), new RegExp(`${quote(path)}: scoring ledger: .*MAC does not match`));
  assert.doesNotMatch(second.parties[1].stderr(), STACK_LINE);
});
