// The README's "bring your own data" block (after `<!-- readme-test:byod`), run as written in a
// temporary directory holding a copy of data/bank-telecom: credentials, then a training job (the
// coordinator and the two parties), then a prediction job (the coordinator's predict and the two
// parties'). As in readme.test.ts, only the ports change: each coordinator listens on port 0 of
// loopback and its parties connect to the port its `listening` line reports.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';
import { README, fencedCommands } from './readme-blocks.js';

after(killAll);

const BINS: Record<string, string> = { 'admm-share': BIN.share, 'admm-coordinator': BIN.coordinator, 'admm-party': BIN.party };
const DATA = new URL('../../../../data/bank-telecom', import.meta.url).pathname;

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
}

function withFlag(args: string[], name: string, value: string): string[] {
  const i = args.indexOf(name);
  assert.ok(i >= 0, `the README command has no ${name}: ${args.join(' ')}`);
  return [...args.slice(0, i + 1), value, ...args.slice(i + 2)];
}

/** A coordinator and the parties that joined it: all must exit 0. */
async function finish(phase: { name: string; proc: Proc }[]): Promise<void> {
  for (const { name, proc } of phase) assert.equal((await proc.exit).code, 0, `${name}: ${proc.stderr()}`);
}

test('README: bring your own data, from two CSV files to a report and scored new customers', async (t) => {
  const cwd = tempDir(t, 'admm-byod-');
  cpSync(DATA, join(cwd, 'data', 'bank-telecom'), { recursive: true });
  const commands = fencedCommands(readFileSync(README, 'utf8'), '<!-- readme-test:byod').map((c) => {
    assert.equal(c[0], 'npx');
    assert.ok(BINS[c[1]], `unknown program ${c[1]}`);
    return { program: c[1], args: c.slice(2) };
  });
  const jobs: { coordinator: string[]; parties: string[][] }[] = [];
  let phase: { name: string; proc: Proc }[] = [];
  let port = 0;
  for (const { program, args } of commands) {
    if (program === 'admm-share') {
      const p = run(BINS[program], args, { cwd });
      assert.equal((await p.exit).code, 0, p.stderr());
    } else if (program === 'admm-coordinator') {
      await finish(phase);
      const proc = run(BINS[program], withFlag(args, '--port', '0'), { cwd });
      port = ((await proc.waitFor((r) => r.msg === 'listening', 'listening')) as { port: number }).port;
      phase = [{ name: `admm-coordinator ${args[0]}`, proc }];
      jobs.push({ coordinator: args, parties: [] });
    } else {
      const url = new URL(flag(args, '--coordinator')!);
      assert.equal(url.hostname, '127.0.0.1');
      url.port = String(port);
      phase.push({ name: `admm-party ${flag(args, '--id')}`, proc: run(BINS[program], withFlag(args, '--coordinator', url.toString()), { cwd }) });
      jobs.at(-1)!.parties.push(args);
    }
  }
  await finish(phase);
  assert.equal(jobs.length, 2, 'a training job, then a prediction job');
  const [training, prediction] = jobs;

  // Training: evaluated on the coordinator's holdout, with the report and each party's own page.
  const out = join(cwd, flag(training.coordinator, '--out')!);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  const fraction = Number(flag(training.coordinator, '--holdout'));
  assert.ok(summary.rows.test > 0 && Math.abs(summary.rows.test / (summary.rows.test + summary.rows.train) - fraction) < 0.01, JSON.stringify(summary.rows));
  for (const k of ['logLoss', 'accuracy', 'auc']) assert.ok(Number.isFinite(summary.test[k]), k);
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
  assert.ok(Math.abs(report.classification.auc - summary.test.auc) < 1e-12, `${report.classification.auc} vs ${summary.test.auc}`);
  assert.deepEqual(report.contributions.map((c: { party: string }) => c.party).sort(), ['bank', 'telecom']);
  assert.match(readFileSync(join(out, 'report.html'), 'utf8'), /<svg/);
  // The private party's statistics were paid from its budget, and the summary says so.
  const telecom = summary.privacy.find((q: { party: string }) => q.party === 'telecom');
  assert.ok(telecom.preparation.mu > 0, JSON.stringify(telecom));
  for (const args of training.parties) {
    const model = join(cwd, flag(args, '--model')!);
    const m = JSON.parse(readFileSync(model, 'utf8'));
    const categorical = flag(args, '--categorical')!;
    assert.ok(m.featureNames.some((n: string) => n.startsWith(`${categorical}=`)), `${categorical} is one-hot: ${m.featureNames}`);
    assert.ok(!m.featureNames.includes('subscribed'), 'the target is not a feature');
    assert.ok(existsSync(model.replace(/\.json$/, '.report.html')));
    const privacy = JSON.parse(readFileSync(model.replace(/\.json$/, '.privacy.json'), 'utf8'));
    if (args.includes('--epsilon')) assert.deepEqual(privacy.total, { epsilon: Number(flag(args, '--epsilon')), delta: 1e-5 });
  }

  // Prediction: one line per new customer, under the file's own id column name.
  const predictions = readFileSync(join(cwd, flag(prediction.coordinator, '--out')!), 'utf8').trim().split('\n');
  assert.match(predictions[0], /^customer_id,/);
  const newIds = readFileSync(join(cwd, flag(prediction.coordinator, '--ids')!), 'utf8').trim().split('\n').length - 1;
  assert.equal(predictions.length - 1, newIds);
});
