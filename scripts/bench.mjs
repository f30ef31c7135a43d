#!/usr/bin/env node
// Per-round wall time of ADMM sharing on a9a (split 66 | 57, lambda 1e-4) with a real
// coordinator and two real party processes over loopback WebSockets. Prints figures;
// asserts nothing (timings on a shared machine are noisy).
//   npm run bench [-- --runs 3 --rounds 100]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' }, rounds: { type: 'string', default: '100' } } });
const root = new URL('..', import.meta.url).pathname;
const a9a = join(root, 'data', 'a9a');
const cli = join(root, 'packages', 'admm-share', 'bin', 'admm-share.js');
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const WARMUP = 5; // rounds while the JIT compiles the hot loops

console.log(`a9a, 2 parties (66 | 57 features), lambda 1e-4, ${values.rounds} rounds x ${values.runs} runs, node ${process.version}`);
const all = [];
for (let run = 1; run <= Number(values.runs); run++) {
  const out = mkdtempSync(join(tmpdir(), 'admm-bench-'));
  try {
    const r = spawnSync(process.execPath, [cli, 'simulate', '--data', join(a9a, 'a9a'), '--split', '66,57', '--rounds', values.rounds, '--out', out, '--no-baselines'], { encoding: 'utf8' });
    if (r.status !== 0) {
      console.error(r.stdout, r.stderr);
      process.exit(1);
    }
    const trace = readFileSync(join(out, 'trace.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    const ms = trace.slice(WARMUP).map((t) => t.roundSeconds * 1000);
    all.push(...ms);
    const bytes = trace[trace.length - 2].bytes;
    console.log(
      `run ${run}: median ${quantile(ms, 0.5).toFixed(2)} ms/round, p90 ${quantile(ms, 0.9).toFixed(2)} ms, ` +
        `training ${(summary.seconds.training * 1000 / summary.rounds).toFixed(2)} ms/round incl. warm-up, ` +
        `setup ${summary.seconds.setup.toFixed(2)} s, ${(bytes.toCoordinator / 1024).toFixed(0)} KiB up / ${(bytes.fromCoordinator / 1024).toFixed(0)} KiB down per round, ` +
        `objective ${summary.objective.toFixed(10)}`,
    );
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
console.log(`all runs: median ${quantile(all, 0.5).toFixed(2)} ms/round, p10 ${quantile(all, 0.1).toFixed(2)}, p90 ${quantile(all, 0.9).toFixed(2)} (target < 5 ms)`);
