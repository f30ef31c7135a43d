#!/usr/bin/env node
// The private bring-your-own-data figures of the README: the bank (active, holds the target)
// and the telecom (passive, --epsilon) of data/bank-telecom, each a coordinator and two party
// processes over loopback with the coordinator's --holdout, noise from the OS CSPRNG. Per run it
// prints the joint model's test AUC beside the bank's own model's (fitted in the same job on
// the same rows), with the telecom's data prepared as by default and, for comparison, with its
// numeric columns left in their units (--scale none). Asserts nothing.
//   npm run bench:prepare [-- --runs 5 --epsilon 2 --rows 10000]
// --rows other than the shipped 10,000 generates the set afresh (admm-share generate).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, epsilon: { type: 'string', default: '2' }, rows: { type: 'string' }, cases: { type: 'string', default: 'standard,none' } } });
const root = new URL('..', import.meta.url).pathname;
const BIN = { share: join(root, 'packages/admm-share/bin/admm-share.js'), coordinator: join(root, 'packages/coordinator/bin/admm-coordinator.js'), party: join(root, 'packages/party/bin/admm-party.js') };
const work = mkdtempSync(join(tmpdir(), 'admm-bench-prepare-'));

let data = join(root, 'data', 'bank-telecom');
if (values.rows !== undefined) {
  data = join(work, 'data');
  const g = spawnSync(process.execPath, [BIN.share, 'generate', '--dataset', 'bank-telecom', '--rows', values.rows, '--out', data], { encoding: 'utf8' });
  if (g.status !== 0) throw new Error(g.stderr);
}

/** Start a process; resolves with its exit code; `onLine` sees each JSON log line. */
function start(file, args, onLine) {
  const p = spawn(process.execPath, [file, ...args], { cwd: work, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(p);
  let buf = '';
  let err = '';
  p.stderr.on('data', (d) => (err += d));
  // The log (JSON lines) is on stdout when it is not a terminal.
  p.stdout.on('data', (d) => {
    buf += d;
    for (let k = buf.indexOf('\n'); k >= 0; k = buf.indexOf('\n')) {
      const line = buf.slice(0, k);
      buf = buf.slice(k + 1);
      try {
        onLine?.(JSON.parse(line));
      } catch {
        /* not a log line */
      }
    }
  });
  return new Promise((resolve) =>
    p.on('exit', (code) => {
      children.delete(p);
      resolve({ code, err });
    }),
  );
}

const children = new Set();
process.on('exit', () => children.forEach((c) => c.kill()));

/** One job; returns the summary. */
async function job(run, scale) {
  const out = join(work, `run-${scale}-${run}`);
  let listening;
  const port = new Promise((resolve) => (listening = resolve));
  const coordinator = start(BIN.coordinator, ['--labels', join(data, 'bank.csv'), '--id-column', 'customer_id', '--label-column', 'subscribed', '--parties', 'bank,telecom', '--active-party', 'bank', '--holdout', '0.2', '--holdout-seed', `run-${run}`, '--port', '0', '--out', out], (r) => r.msg === 'listening' && listening(r.port));
  const url = `ws://127.0.0.1:${await port}`;
  const common = ['--coordinator', url, '--id-column', 'customer_id', '--missing', 'mean'];
  const bank = start(BIN.party, [...common, '--id', 'bank', '--role', 'active', '--data', join(data, 'bank.csv'), '--exclude-columns', 'subscribed', '--categorical', 'region', '--model', join(out, 'bank.json')]);
  const telecom = start(BIN.party, [...common, '--id', 'telecom', '--epsilon', values.epsilon, '--data', join(data, 'telecom.csv'), '--categorical', 'plan', '--scale', scale, '--release-test-scores', '--model', join(out, 'telecom.json')]);
  // The first process to fail stops the run (the others would wait for it).
  await Promise.all(
    [['coordinator', coordinator], ['bank', bank], ['telecom', telecom]].map(([name, p]) =>
      p.then(({ code, err }) => {
        if (code !== 0) throw new Error(`${name} exited ${code}: ${err.slice(-2000)}`);
      }),
    ),
  );
  return JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
}

const rows = values.rows ?? '10000 (shipped)';
console.log(`bank-telecom, ${rows} rows a file, telecom at epsilon ${values.epsilon} (delta 1e-5), holdout 0.2, ${values.runs} runs per case, node ${process.version}`);
console.log('case                       run   joint test AUC   bank alone   telecom weight');
try {
  for (const scale of values.cases.split(',')) {
    const wins = [];
    for (let run = 1; run <= Number(values.runs); run++) {
      const s = await job(run, scale);
      const joint = s.test.auc;
      const alone = s.oneShot.local.test.auc;
      wins.push(joint > alone);
      const label = scale === 'standard' ? 'prepared (default)' : 'numeric in raw units';
      console.log(`${label.padEnd(25)} ${String(run).padStart(3)}   ${joint.toFixed(4).padStart(14)}   ${alone.toFixed(4).padStart(10)}   ${s.oneShot.weights.telecom.toPrecision(3).padStart(14)}`);
    }
    console.log(`  joint above the bank alone in ${wins.filter(Boolean).length} of ${wins.length} runs`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
