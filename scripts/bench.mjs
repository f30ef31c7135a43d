#!/usr/bin/env node
// Per-round wall time of ADMM sharing on a9a (split 66 | 57, lambda 1e-4) with a real
// coordinator and two real party processes over loopback WebSockets, and each process's CPU
// time a round (from /proc), whose sum over the cores is the least a round can take however
// well the processes overlap. Prints figures; asserts nothing (timings on a shared machine are
// noisy).
//   npm run bench [-- --runs 3 --rounds 100]
// --scale: the large case instead, N rows (default 1e6) x 4 parties of 100 sparse features
// (about 6 non-zeros per party and row; seeded, written once to runs/bench-scale/): per-round
// median and p90, setup and alignment seconds, bytes per round, each process's peak resident
// memory (VmHWM) and CPU time a round (both sampled from /proc while the job runs), and the same
// rounds computed in one process without the network (the product's RidgeXUpdate and
// AdmmStep), as a ratio, with that process's CPU time a round.
//   npm run bench -- --scale [--scale-rows 1000000] [--rounds 20] [--psi-warm]
// --psi-warm: the run keeps PSI caches (simulate --psi-cache), and a second run follows on the
// same rows plus 1 % new ones (new ids) with the caches warm: its alignment seconds, the ids
// the coordinator blinded and reused, and every process's peak memory, with the caches' size on
// disk.
// --case gisette | spam: a built-in data set through `admm-share simulate` (gisette-shaped:
// 6000 rows x 5000 dense features, 2000 | 2000 | 1000; spam: 2048 | 4096 | 1024 sparse hashed
// features): per-round median and p90, set-up seconds, each party's factorisation form and
// time, each process's peak resident memory against its block's size, and the same rounds in
// one process (the product's RidgeXUpdate and AdmmStep on the same blocks) as a ratio.
// --party-threads N passes each party N threads for its dense block (default: simulate's, 0 on
// 2 cores; docs/scaling.md, "Threads").
//   npm run bench -- --case gisette [--rounds 20] [--party-threads 1]
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { writeRows } from './lib/sparse-data.mjs';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    rounds: { type: 'string' },
    scale: { type: 'boolean', default: false },
    'scale-rows': { type: 'string', default: '1000000' },
    case: { type: 'string' },
    'party-threads': { type: 'string' },
    'psi-warm': { type: 'boolean', default: false },
  },
});
const root = new URL('..', import.meta.url).pathname;
const a9a = join(root, 'data', 'a9a');
const cli = join(root, 'packages', 'admm-share', 'bin', 'admm-share.js');
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
/** Bytes in both units: MiB (2^20 bytes, as the figures of docs/scaling.md) and MB (10^6, as simulate prints them). */
const memory = (b) => `${(b / 2 ** 20).toFixed(0)} MiB (${(b / 1e6).toFixed(0)} MB)`;
const WARMUP = 5; // rounds while the JIT compiles the hot loops
/** Clock ticks a second of /proc's CPU times (USER_HZ: 100 on Linux). */
const TICKS = 100;

if (values.case !== undefined) {
  if (!['gisette', 'spam'].includes(values.case)) {
    console.error(`bench: --case must be gisette or spam, got '${values.case}'`);
    process.exit(64);
  }
  await builtIn(values.case, Number(values.rounds ?? 20));
  process.exit(0);
}
if (values.scale) {
  await scale(Number(values['scale-rows']), Number(values.rounds ?? 20));
  process.exit(0);
}
values.rounds ??= '100';

console.log(`a9a, 2 parties (66 | 57 features), lambda 1e-4, ${values.rounds} rounds x ${values.runs} runs, node ${process.version}`);
const all = [];
const cpus = [];
/** The runs' initial rho (simulate's default for a9a), for the same rounds in one process. */
let rhoInitial;
for (let run = 1; run <= Number(values.runs); run++) {
  const out = mkdtempSync(join(tmpdir(), 'admm-bench-'));
  try {
    const child = spawn(process.execPath, [cli, 'simulate', '--data', join(a9a, 'a9a'), '--split', '66,57', '--rounds', values.rounds, '--out', out, '--no-baselines'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exited = new Promise((res) => child.on('close', res));
    // Rounds of a few milliseconds: sampled every 50 ms (the trace, and two small files a process).
    const { samples } = await watchProcesses(child.pid, exited, out, 50);
    if ((await exited) !== 0) {
      console.error(output);
      process.exit(1);
    }
    const trace = readFileSync(join(out, 'trace.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    const ms = trace.slice(WARMUP).map((t) => t.roundSeconds * 1000);
    all.push(...ms);
    rhoInitial = summary.rho.initial;
    const bytes = trace[trace.length - 2].bytes;
    const cpu = cpuPerRound(samples, WARMUP);
    if (cpu) cpus.push(cpu);
    console.log(
      `run ${run}: median ${quantile(ms, 0.5).toFixed(2)} ms/round, p90 ${quantile(ms, 0.9).toFixed(2)} ms, ` +
        `training ${(summary.seconds.training * 1000 / summary.rounds).toFixed(2)} ms/round incl. warm-up, ` +
        `setup ${summary.seconds.setup.toFixed(2)} s, ${(bytes.toCoordinator / 1024).toFixed(0)} KiB up / ${(bytes.fromCoordinator / 1024).toFixed(0)} KiB down per round, ` +
        `objective ${summary.objective.toFixed(10)}`,
    );
    console.log(`  ${cpuLine(cpu)}`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
console.log(`all runs: median ${quantile(all, 0.5).toFixed(2)} ms/round, p10 ${quantile(all, 0.1).toFixed(2)}, p90 ${quantile(all, 0.9).toFixed(2)} (target < 5 ms)`);
if (cpus.length > 0) {
  const med = (f) => quantile(cpus.map(f), 0.5);
  console.log(`all runs, CPU a round (medians of the runs): ${[...cpus[0].cpu.keys()].sort().map((role) => `${role} ${med((c) => c.cpu.get(role) ?? NaN).toFixed(1)}`).join(', ')} ms; all ${med((c) => c.total).toFixed(1)} ms`);
}
{
  // The same rounds in one process (the same blocks, 66 | 57): what the arithmetic alone costs.
  const { blocks, y } = await libsvmBlocks(join(a9a, 'a9a'), [66, 57]);
  await oneProcess(blocks, y, 1e-4, rhoInitial, Number(values.rounds), WARMUP, quantile(all, 0.5));
}

/**
 * Every job process below `root` (the coordinator and the parties, by role), sampled from /proc
 * every `every` ms until `done`: its peak resident memory (VmHWM, bytes), and its CPU time
 * (user and system, all threads) with the number of lines in the job's trace so far
 * (`out`/trace.jsonl.partial, a line a round), for cpuPerRound.
 */
function watchProcesses(root, done, out, every = 200) {
  const peaks = new Map();
  const samples = [];
  const pids = new Map();
  const partial = join(out, 'trace.jsonl.partial');
  const roleOf = (cmd) => (cmd.includes('admm-coordinator') ? 'coordinator' : /--id\0([^\0]+)/.exec(cmd)?.[1] ?? null);
  // The processes below root, by pid; looked for until the trace begins (they all run by then).
  const find = () => {
    const parents = new Map();
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        parents.set(pid, stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      } catch {}
    }
    const below = (pid) => {
      for (let p = parents.get(pid); p && p !== '1'; p = parents.get(p)) if (p === String(root)) return true;
      return false;
    };
    for (const pid of parents.keys()) {
      if (pids.has(pid) || !below(pid)) continue;
      try {
        const role = roleOf(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
        if (role) pids.set(pid, role);
      } catch {}
    }
  };
  const sample = () => {
    let lines = 0;
    try {
      lines = readFileSync(partial, 'utf8').split('\n').length - 1;
    } catch {}
    if (lines === 0) find();
    const cpu = new Map();
    for (const [pid, role] of pids) {
      try {
        const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
        if (hwm) peaks.set(role, Math.max(peaks.get(role) ?? 0, Number(hwm) * 1024));
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        cpu.set(role, ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS);
      } catch {}
    }
    samples.push({ t: performance.now(), lines, cpu });
  };
  const timer = setInterval(sample, every);
  return done.then(() => {
    clearInterval(timer);
    return { peaks, samples };
  });
}

/**
 * Each process's CPU time a round, from the samples of watchProcesses over the rounds whose
 * trace lines were written from round `from` until the last but one (so the final evaluation
 * is left out; a checkpoint's encoding is in), and the wall time a round over the same span.
 * Undefined when fewer than two samples fall in it.
 */
function cpuPerRound(samples, from) {
  // The trace is renamed when the job ends: its line count falls to 0 then.
  const last = Math.max(0, ...samples.map((s) => s.lines));
  const a = samples.find((s) => s.lines >= from);
  const b = samples.findLast((s) => s.lines < last && s.lines > (a?.lines ?? Infinity));
  if (!a || !b) return undefined;
  const rounds = b.lines - a.lines;
  const cpu = new Map([...b.cpu].map(([role, ms]) => [role, (ms - (a.cpu.get(role) ?? ms)) / rounds]));
  const total = [...cpu.values()].reduce((x, y) => x + y, 0);
  return { cpu, total, wall: (b.t - a.t) / rounds, rounds };
}

/** cpuPerRound as one line, with the least time a round that much CPU needs on this machine's cores. */
function cpuLine(c) {
  if (!c) return 'CPU a round: too few samples';
  const cores = availableParallelism();
  const each = [...c.cpu].sort().map(([role, ms]) => `${role} ${ms.toFixed(1)}`).join(', ');
  return `CPU a round (${c.rounds} rounds, any checkpoint among them included): ${each} ms; all ${c.total.toFixed(1)} ms, so at least ${(c.total / cores).toFixed(1)} ms a round on ${cores} cores, against ${c.wall.toFixed(1)} ms a round over the same span (${(c.total / c.wall).toFixed(2)} cores busy)`;
}

async function scale(rows, rounds) {
  const dir = join(root, 'runs', 'bench-scale');
  mkdirSync(dir, { recursive: true });
  const data = join(dir, `train-${rows}.libsvm`);
  const t0 = performance.now();
  await writeRows(data, rows, 11);
  console.log(`${rows.toLocaleString('en')} rows x 4 parties of 100 sparse features (~6 non-zeros per party and row), ${rounds} rounds, lambda 1e-4, node ${process.version}; data ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (${data})`);
  const out = mkdtempSync(join(tmpdir(), 'admm-bench-scale-'));
  const caches = values['psi-warm'] ? join(out, 'psi-caches') : undefined;
  try {
    const { summary, net, warm } = await scaleRun(data, rounds, join(out, 'run'), caches);
    // The same rounds in one process: the product's update code, no network.
    const { blocks, y } = await libsvmBlocks(data, [100, 100, 100, 100]);
    await oneProcess(blocks, y, 1e-4, summary.rho.initial, rounds, warm, net);
    if (caches) {
      // The same rows and 1 % new ones after them: the generator is sequential, so the first
      // `rows` rows (and their ids, their row numbers) are those of the first run.
      const more = join(dir, `train-${rows}-plus-1pct.libsvm`);
      await writeRows(more, Math.round(rows * 1.01), 11);
      console.log(`second job, caches warm: the same ${rows.toLocaleString('en')} rows and ${Math.round(rows * 0.01).toLocaleString('en')} new ones`);
      await scaleRun(more, rounds, join(out, 'warm'), caches);
      const ids = Math.round(rows * 1.01);
      const perMillion = (b) => `${((b / ids) * 1e6 / 2 ** 20).toFixed(0)} MiB per 1e6 ids`;
      console.log(`PSI caches on disk: party-1's ${memory(folderBytes(join(caches, 'party-party-1')))} (${perMillion(folderBytes(join(caches, 'party-party-1')))}), the coordinator's ${memory(folderBytes(join(caches, 'coordinator')))} for 4 parties (${perMillion(folderBytes(join(caches, 'coordinator')) / 4)} a party)`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** One simulate run of the scale case: prints its figures, returns what the one-process comparison needs. */
async function scaleRun(data, rounds, out, caches) {
  const args = [cli, 'simulate', '--data', data, '--split', '100,100,100,100', '--rounds', String(rounds), '--out', out, '--no-baselines', ...(caches ? ['--psi-cache', caches] : [])];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.resume();
  const exited = new Promise((res) => child.on('close', res));
  mkdirSync(out, { recursive: true });
  const { peaks, samples } = await watchProcesses(child.pid, exited, out);
  if ((await exited) !== 0) throw new Error(`simulate failed: ${stderr.slice(-2000)}`);
  const trace = readFileSync(join(out, 'trace.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  const warm = Math.min(2, trace.length - 1);
  const ms = trace.slice(warm).map((t) => t.roundSeconds * 1000);
  // Bytes of one round (the last line also counts the final evaluation).
  const last = trace[Math.max(0, trace.length - 2)].bytes;
  const perRound = (b) => (b / 2 ** 20).toFixed(1);
  const net = quantile(ms, 0.5);
  const work = summary.alignment.ids ? `; the coordinator blinded ${summary.alignment.ids.blinded.toLocaleString('en')} ids and reused ${summary.alignment.ids.reused.toLocaleString('en')} from its caches` : '';
  console.log(`over the network: median ${net.toFixed(1)} ms/round, p90 ${quantile(ms, 0.9).toFixed(1)} ms (after ${warm} warm-up rounds); setup ${summary.seconds.setup.toFixed(1)} s; alignment (PSI) ${summary.alignment.seconds?.toFixed(1)} s${work}; ${perRound(last.toCoordinator)} MiB to / ${perRound(last.fromCoordinator)} MiB from the coordinator per round`);
  console.log(`peak resident memory: ${[...peaks].sort().map(([role, b]) => `${role} ${memory(b)}`).join(', ')}`);
  console.log(cpuLine(cpuPerRound(samples, warm)));
  return { summary, net, warm };
}

/** Bytes of the files under a folder. */
function folderBytes(dir) {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) total += e.isDirectory() ? folderBytes(join(dir, e.name)) : statSync(join(dir, e.name)).size;
  return total;
}

/** A built-in data set through simulate (real processes), then the same rounds in one process. */
async function builtIn(name, rounds) {
  const out = mkdtempSync(join(tmpdir(), `admm-bench-${name}-`));
  try {
    const threads = values['party-threads'];
    const args = [cli, 'simulate', '--dataset', name, '--rounds', String(rounds), '--out', out, '--no-baselines', ...(threads !== undefined ? ['--party-threads', threads] : [])];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.on('data', (d) => (stdout += d));
    const exited = new Promise((res) => child.on('close', res));
    const { peaks } = await watchProcesses(child.pid, exited, out);
    if ((await exited) !== 0) throw new Error(`simulate failed: ${stderr.slice(-2000)}`);
    console.log(stdout.split('\n')[0]);
    const trace = readFileSync(join(out, 'trace.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    const warm = Math.min(2, trace.length - 1);
    const ms = trace.slice(warm).map((t) => t.roundSeconds * 1000);
    const net = quantile(ms, 0.5);
    console.log(`over the network: median ${net.toFixed(1)} ms/round, p90 ${quantile(ms, 0.9).toFixed(1)} ms (${rounds} rounds, after ${warm} warm-up); setup ${summary.seconds.setup.toFixed(1)} s; objective ${summary.objective.toPrecision(8)}${summary.test ? `, test log loss ${summary.test.logLoss?.toFixed(4)}, accuracy ${summary.test.accuracy?.toFixed(4)}` : ''}`);
    // Each party's form and factorisation time, from its 'aligned and factorised' log line.
    for (const f of readdirSync(join(out, 'logs')).filter((f) => f.startsWith('party-')).sort()) {
      const rec = readFileSync(join(out, 'logs', f), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((r) => r.msg === 'aligned and factorised');
      const id = f.replace(/\.log$/, '');
      if (rec) console.log(`  ${id}: ${rec.rows} rows, form ${rec.form}${rec.dense ? ' (dense)' : ' (sparse)'}, ${rec.threads ?? 0} threads beside its own, set-up ${(rec.factorMs / 1000).toFixed(1)} s`);
    }
    console.log(`peak resident memory: ${[...peaks].sort().map(([role, b]) => `${role} ${memory(b)}`).join(', ')}`);

    // The same rounds in one process, on the same blocks (the data set is generated or read again).
    const [{ csrSliceColumns, preferDense }, { loadData }] = await Promise.all([import('@admm-share/core'), import(join(root, 'packages', 'admm-share', 'dist', 'datasets.js'))]);
    const data = loadData({ dataset: name, dataSeed: 'admm-share' });
    let start = 0;
    const blocks = data.blocks.map((w) => csrSliceColumns(data.train.X, start, (start += w)));
    start = 0;
    const testBlocks = data.test ? data.blocks.map((w) => csrSliceColumns(data.test.X, start, (start += w))) : [];
    const bytes = (b) => (preferDense(b) ? b.rows * b.cols * 8 : b.indices.length * 12);
    const sizes = blocks.map(bytes);
    const withTest = sizes.map((b, m) => b + (testBlocks[m] ? bytes(testBlocks[m]) : 0));
    const mb = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
    console.log(`  each block's data (dense: 8 bytes an entry; sparse: 12 a non-zero): ${sizes.map(mb).join(', ')}; with its test rows ${withTest.map(mb).join(', ')}`);
    // Issue 15's memory target (gisette-shaped data only), each party's peak under 3x its data:
    // against its training block, and against all the rows it holds.
    for (const [what, of] of [['block', sizes], ['block and test rows', withTest]]) {
      const ratios = of.map((b, m) => (peaks.get(`party-${m + 1}`) ?? NaN) / b);
      const verdict = name !== 'gisette' ? '' : ` (under 3x: ${ratios.every((r) => r < 3) ? 'all' : `not party ${ratios.flatMap((r, m) => (r < 3 ? [] : [m + 1])).join(', ')}`})`;
      console.log(`  peak / ${what}: ${ratios.map((r, m) => `party-${m + 1} ${r.toFixed(2)}x`).join(', ')}${verdict}`);
    }
    await oneProcess(blocks, data.train.y, summary.lambda, summary.rho.initial, rounds, warm, net);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** A LIBSVM file's labels and its columns split into blocks of the given widths, as simulate --split does. */
async function libsvmBlocks(file, widths) {
  const { binaryLabels, csrSliceColumns, readLibsvm } = await import('@admm-share/core');
  const t = readLibsvm(file, { features: widths.reduce((a, b) => a + b, 0) });
  const y = binaryLabels({ file, ids: t.ids, raw: t.firstTokens, lines: t.lines }).y;
  let start = 0;
  return { blocks: widths.map((w) => csrSliceColumns(t.X, start, (start += w))), y };
}

/**
 * The same rounds in one process, without the network: the product's RidgeXUpdate per block
 * (factored for the job's rho at set-up) and AdmmStep with the default Anderson acceleration, one party after the other.
 * Prints the median against `net`, the median over the network.
 */
async function oneProcess(blocks, y, lambda, rho, rounds, warm, net) {
  const [{ logistic }, { RidgeXUpdate }, { AdmmStep, DEFAULT_ANDERSON }] = await Promise.all([import('@admm-share/core'), import('@admm-share/party'), import('@admm-share/coordinator')]);
  const t0 = performance.now();
  // noiseFree, as a party without privacy runs: its x-update then works in place (updateInPlace).
  const parties = blocks.map((b) => new RidgeXUpdate(b, lambda, false, { rho, noiseFree: true }));
  // As the coordinator runs a job by default: with Anderson acceleration, each party its own vector.
  const co = new AdmmStep({ variant: 'exact', loss: logistic, y, parties: parties.length, lambda, rho, alpha: 1.6, anderson: DEFAULT_ANDERSON, tolerance: { abs: 0, rel: 0 } });
  const setup = (performance.now() - t0) / 1000;
  co.step(parties.map((p) => new Float64Array(p.share.length)), true);
  const local = [];
  let cpu;
  for (let r = 1; r <= rounds; r++) {
    if (r === warm + 1) cpu = process.cpuUsage();
    const r0 = performance.now();
    parties.forEach((p, m) => p.updateFromBroadcast(co.cFor(m), co.rho));
    co.step(parties.map((p) => p.share));
    local.push(performance.now() - r0);
  }
  const one = quantile(local.slice(warm), 0.5);
  // Every thread of this process (the step's worker thread too), over the rounds after the warm-up.
  const used = process.cpuUsage(cpu);
  const cpuMs = (used.user + used.system) / 1000 / (rounds - warm);
  console.log(`in one process: median ${one.toFixed(1)} ms/round, p90 ${quantile(local.slice(warm), 0.9).toFixed(1)} ms, CPU ${cpuMs.toFixed(1)} ms a round (all threads); set-up ${setup.toFixed(1)} s (forms ${parties.map((p) => p.form).join(', ')}); over the network / in one process: ${(net / one).toFixed(2)} per round`);
}
