#!/usr/bin/env node
// The private-training figures of issue 9 on a9a (split 66 | 57, lambda 1e-4, delta 1e-5),
// each a real `admm-share simulate` (coordinator and party processes over loopback, noise
// from the OS CSPRNG): the one-shot default with party 1 active at each epsilon, and the
// all-passive case. Prints mean, min and max test log loss over the runs; asserts nothing.
//   npm run bench:privacy [-- --runs 5 --epsilons 1,2,5,10 --passive 2,10 --prepare]
// --prepare: every party standardises its block (simulate --prepare; a passive party estimates
// the statistics with a tenth of its budget); the references stay on the data as it is.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, epsilons: { type: 'string', default: '1,2,5,10' }, passive: { type: 'string', default: '2,10' }, prepare: { type: 'boolean', default: false } } });
const root = new URL('..', import.meta.url).pathname;
const a9a = join(root, 'data', 'a9a');
const cli = join(root, 'packages', 'admm-share', 'bin', 'admm-share.js');
const runs = Number(values.runs);

/** One simulate; returns its summary (with baselines when asked). */
function simulate(args, baselines = false) {
  const out = mkdtempSync(join(tmpdir(), 'admm-private-'));
  try {
    const r = spawnSync(process.execPath, [cli, 'simulate', '--data', join(a9a, 'a9a'), '--test', join(a9a, 'a9a.t'), '--split', '66,57', '--out', out, ...(baselines ? [] : ['--no-baselines']), ...args], { encoding: 'utf8' });
    if (r.status !== 0) {
      console.error(r.stdout, r.stderr);
      process.exit(1);
    }
    // simulate writes its baselines beside the coordinator's summary, in simulation.json.
    const read = (name) => JSON.parse(readFileSync(join(out, name), 'utf8'));
    return { ...read('summary.json'), ...read('simulation.json') };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const stats = (xs) => ({ mean: xs.reduce((a, b) => a + b, 0) / xs.length, min: Math.min(...xs), max: Math.max(...xs) });
const f = (v) => v.toFixed(4);

const prepare = values.prepare ? ['--prepare'] : [];
const ref = simulate(prepare, true);
const alone = ref.baselines.local.test.logLoss;
console.log(`a9a, 66 | 57, lambda 1e-4, delta 1e-5, ${runs} runs per point${values.prepare ? ', --prepare' : ''}, node ${process.version}`);
if (values.prepare) console.log(`non-private with --prepare: training objective ${ref.objective}, test log loss ${f(ref.test.logLoss)}`);
console.log(`references: central ${f(ref.baselines.central.test.logLoss)}, party-1 alone ${f(alone)}, majority class ${f(ref.baselines.majority.test.logLoss)}`);
console.log('\ncase                       epsilon   sigma   test log loss mean [min, max]   runs better than party 1 alone');
for (const [label, extra, epsilons] of [
  ['one-shot, party-1 active', [], values.epsilons],
  ['one-shot, all passive', ['--active-party', 'none'], values.passive],
]) {
  for (const eps of epsilons.split(',').filter(Boolean)) {
    const losses = [];
    let sigma = 0;
    for (let k = 0; k < runs; k++) {
      const s = simulate(['--epsilon', eps, ...extra, ...prepare]);
      losses.push(s.test.logLoss);
      sigma = s.privacy.find((q) => q.mechanism !== 'none').sigma;
    }
    const st = stats(losses);
    console.log(`${label.padEnd(26)} ${eps.padStart(7)} ${sigma.toFixed(2).padStart(7)}   ${f(st.mean)} [${f(st.min)}, ${f(st.max)}]   ${losses.filter((l) => l < alone).length}/${runs}`);
  }
}
