import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  type ClassificationMetrics,
  type Csr,
  type LabelledSet,
  AdmmError,
  EXIT,
  PeerError,
  binaryLabels,
  classificationMetrics,
  csrSliceColumns,
  fitCentral,
  gisetteLikeDataset,
  logistic,
  predictScores,
  readLibsvm,
  syntheticDataset,
  writeFileAtomic,
} from '@admm-share/core';
import type { Summary, TestMetrics } from '@admm-share/coordinator';
import type { AlgorithmName, MechanismName, Variant } from '@admm-share/protocol';
import type { DatasetName } from './names.js';
import { type Child, binPath, killAll, spawnNode } from './processes.js';
import { Progress } from './progress.js';
import { spamDataset } from './spam.js';
import { type SplitFiles, parseSplit, writeVerticalSplit } from './split.js';
import { tokenPath, writeCredentials } from './credentials.js';

export interface SimulateOptions {
  /** A built-in data set, used when `data` is not given. */
  dataset?: DatasetName;
  /** spam: use only this many messages (a seeded subsample); gisette: training rows (test: a sixth). */
  rows?: number;
  data?: string;
  test?: string;
  /** Block sizes, e.g. "66,57"; default: the synthetic set's own blocks, or two halves. */
  split?: string;
  features?: number;
  lambda: number;
  rounds: number;
  variant: Variant;
  algorithm?: AlgorithmName;
  /** sgd: batch size, learning rate and its decay (coordinator defaults when absent). */
  sgd?: { batchSize?: number; lr?: number; lrDecay?: number };
  rho?: number;
  alpha: number;
  evalEvery: number;
  intercept: boolean;
  out?: string;
  /** Seed of the synthetic data set. */
  dataSeed: string;
  baselines: boolean;
  privacy: SimulatePrivacy;
}

/** Privacy flags passed to every party; no noise unless asked. */
export interface SimulatePrivacy {
  mechanism: MechanismName;
  epsilon?: number;
  delta: number;
  /** Noise seed (each party gets `${seed}/${party id}`): predictable, for experiments. */
  seed?: string;
  bx?: number;
  bw?: number;
  b1?: number;
  c1?: number;
}

export function describePrivacy(p: SimulatePrivacy): string {
  if (p.mechanism === 'none') return 'privacy: none (shares are sent without noise)';
  const noise = p.seed !== undefined ? `SEEDED noise ('${p.seed}'): predictable, for experiments only` : 'noise from the OS CSPRNG';
  const caveat = p.mechanism === 'paper' ? "; the paper's mechanism, guarantee NOT established" : '';
  return `privacy: ${p.mechanism}, epsilon ${p.epsilon}, delta ${p.delta} per party, ${noise}${caveat}; test scores are sent without noise for evaluation`;
}

function privacyArgs(p: SimulatePrivacy, party: string): string[] {
  if (p.mechanism === 'none') return ['--mechanism', 'none'];
  const args = ['--mechanism', p.mechanism, '--epsilon', String(p.epsilon), '--delta', String(p.delta), '--release-test-scores'];
  if (p.seed !== undefined) args.push('--seed', `${p.seed}/${party}`);
  for (const k of ['bx', 'bw', 'b1', 'c1'] as const) if (p[k] !== undefined) args.push(`--${k}`, String(p[k]));
  return args;
}

export interface Baseline {
  objective: number;
  test?: ClassificationMetrics;
}

export interface SimulateSummary extends Summary {
  baselines?: { central: Baseline; local: Baseline & { party: string } };
  files: { dir: string; logs: string; models: string[] };
}

class SimulationError extends AdmmError {
  override readonly name = 'SimulationError';
  constructor(
    message: string,
    override readonly exitCode: number,
  ) {
    super('ERR_SIMULATION', message);
  }
}

function loadLibsvmSet(path: string, features: number | undefined): LabelledSet {
  const t = readLibsvm(path, { ids: 'auto', features });
  const { y } = binaryLabels({ file: path, ids: t.ids, raw: t.firstTokens!, lines: t.lines });
  return { ids: t.ids, X: t.X, y };
}

function withCols(X: Csr, cols: number): Csr {
  return { ...X, cols };
}

/** The data set and its blocks: the user's LIBSVM files, or the built-in synthetic set. */
function loadData(opts: SimulateOptions): { train: LabelledSet; test?: LabelledSet; blocks: number[]; source: string } {
  if (!opts.data) {
    if (opts.test) throw new SimulationError('--test needs --data', EXIT.config);
    if (opts.dataset === 'spam') {
      if (opts.split) throw new SimulationError('--split does not apply to --dataset spam: its blocks are headers | body | links', EXIT.config);
      const s = spamDataset({ seed: opts.dataSeed === 'admm-share' ? 'spam' : opts.dataSeed, limit: opts.rows });
      return { train: s.train, test: s.test, blocks: s.blocks, source: `SpamAssassin corpus (${s.names.map((n, k) => `${n} ${s.blocks[k]}`).join(' | ')} hashed features)` };
    }
    if (opts.dataset === 'gisette') {
      const g = gisetteLikeDataset({
        seed: opts.dataSeed === 'admm-share' ? 'gisette' : opts.dataSeed,
        ...(opts.rows ? { trainRows: opts.rows, testRows: Math.max(1, Math.round(opts.rows / 6)) } : {}),
      });
      return { train: g.train, test: g.test, blocks: opts.split ? parseSplit(opts.split, 5000) : g.blocks, source: 'synthetic gisette-shaped set (5000 dense features)' };
    }
    const s = syntheticDataset({ seed: opts.dataSeed });
    const d = s.train.X.cols;
    return { train: s.train, test: s.test, blocks: opts.split ? parseSplit(opts.split, d) : s.blocks, source: `synthetic (seed '${opts.dataSeed}')` };
  }
  const train = loadLibsvmSet(opts.data, opts.features);
  const test = opts.test ? loadLibsvmSet(opts.test, opts.features) : undefined;
  const d = Math.max(train.X.cols, test?.X.cols ?? 0);
  train.X = withCols(train.X, d);
  if (test) test.X = withCols(test.X, d);
  const half = Math.ceil(d / 2);
  return { train, test, blocks: parseSplit(opts.split ?? `${half},${d - half}`, d), source: opts.data };
}

/** The central model on all columns, or on columns [from, to) only (a party alone), with its test metrics. */
export function evaluateCentral(train: LabelledSet, test: LabelledSet | undefined, lambda: number, intercept: boolean, cols?: [number, number]): Baseline {
  const slice = (X: Csr) => (cols ? csrSliceColumns(X, cols[0], cols[1]) : X);
  const fit = fitCentral(slice(train.X), train.y, logistic, lambda, { intercept });
  return {
    objective: fit.objective,
    ...(test ? { test: classificationMetrics(predictScores(slice(test.X), fit.x, fit.intercept), test.y) } : {}),
  };
}

export async function simulate(opts: SimulateOptions, out: NodeJS.WriteStream = process.stdout): Promise<SimulateSummary> {
  const started = performance.now();
  const dir = resolve(opts.out ?? join('runs', new Date().toISOString().replace(/[:.]/g, '-')));
  const dataDir = join(dir, 'data');
  const logDir = join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const { train, test, blocks, source } = loadData(opts);
  const files: SplitFiles = writeVerticalSplit(dataDir, blocks, train, test);
  // Each party gets its own secret; the coordinator gets all of them.
  const credentialsFile = writeCredentials(dataDir, files.parties.map((p) => p.id), { overwrite: true });
  const jobId = `sim-${randomBytes(4).toString('hex')}`;
  const progress = new Progress();
  out.write(`admm-share simulate: ${source}, ${train.ids.length} training rows${test ? `, ${test.ids.length} test rows` : ''}, ` +
    `${blocks.length} parties (${blocks.join(' | ')} features)\n`);
  out.write(describePrivacy(opts.privacy) + '\n');

  const children = new Set<Child>();
  const cleanup = () => killAll(children);
  process.on('exit', cleanup);
  const onSignal = (sig: NodeJS.Signals) => {
    cleanup();
    progress.done();
    process.stderr.write(`admm-share: stopped by ${sig}\n`);
    process.exit(EXIT.interrupted);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    let resolvePort!: (p: number) => void;
    const portKnown = new Promise<number>((r) => (resolvePort = r));
    const coordArgs = [
      '--port', '0',
      '--host', '127.0.0.1',
      '--labels', files.labels,
      ...(files.testLabels ? ['--test-labels', files.testLabels] : []),
      '--parties', files.parties.map((p) => p.id).join(','),
      '--job', jobId,
      '--lambda', String(opts.lambda),
      '--rounds', String(opts.rounds),
      '--variant', opts.variant,
      '--algorithm', opts.algorithm ?? 'admm',
      ...(opts.sgd?.batchSize !== undefined ? ['--batch-size', String(opts.sgd.batchSize)] : []),
      ...(opts.sgd?.lr !== undefined ? ['--lr', String(opts.sgd.lr)] : []),
      ...(opts.sgd?.lrDecay !== undefined ? ['--lr-decay', String(opts.sgd.lrDecay)] : []),
      '--alpha', String(opts.alpha),
      '--eval-every', String(opts.evalEvery),
      '--out', dir,
      '--credentials', credentialsFile,
      ...(opts.rho !== undefined ? ['--rho', String(opts.rho)] : []),
    ];
    const coordinator = spawnNode('coordinator', binPath('coordinator', 'admm-coordinator'), coordArgs, join(logDir, 'coordinator.log'), (rec) => {
      if (rec.msg === 'listening' && typeof rec.port === 'number') resolvePort(rec.port);
      if (rec.msg === 'round' && typeof rec.round === 'number') progress.update(rec.round, Number(rec.maxRounds), Number(rec.objective));
    });
    children.add(coordinator);
    const port = await Promise.race([
      portKnown,
      coordinator.exited.then((e) => {
        throw failure(coordinator, e.code);
      }),
    ]);
    progress.message(`coordinator listening on port ${port}; starting ${files.parties.length} parties`);
    const parties = files.parties.map((p, m) => {
      const args = [
        '--coordinator', `ws://127.0.0.1:${port}`,
        '--id', p.id,
        '--job', jobId,
        '--data', p.train,
        ...(p.test ? ['--test', p.test] : []),
        '--ids', 'first',
        '--token-file', tokenPath(dataDir, p.id),
        '--features', String(p.features),
        '--model', join(dir, `model-${p.id}.json`),
        ...(opts.intercept && m === 0 ? ['--intercept'] : []),
        ...privacyArgs(opts.privacy, p.id),
      ];
      const c = spawnNode(p.id, binPath('party', 'admm-party'), args, join(logDir, `${p.id}.log`));
      children.add(c);
      return c;
    });
    // The first process to fail decides the error; the rest are then stopped.
    await Promise.all(
      [coordinator, ...parties].map(async (c) => {
        const e = await c.exited;
        children.delete(c);
        if (e.code !== 0) {
          killAll(children);
          throw failure(c, e.code);
        }
      }),
    );
    progress.done();
    const summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8')) as Summary;
    const result: SimulateSummary = {
      ...summary,
      files: { dir, logs: logDir, models: files.parties.map((p) => join(dir, `model-${p.id}.json`)) },
    };
    if (opts.baselines) {
      progress.message('training the central and party-1-only baselines');
      const first = files.parties[0];
      result.baselines = {
        central: evaluateCentral(train, test, opts.lambda, opts.intercept),
        local: { party: first.id, ...evaluateCentral(train, test, opts.lambda, opts.intercept, [first.columns[0] - 1, first.columns[1]]) },
      };
      progress.done();
    }
    result.seconds = { ...summary.seconds, total: (performance.now() - started) / 1000 };
    writeFileAtomic(join(dir, 'summary.json'), JSON.stringify(result, null, 2) + '\n');
    out.write(formatTable(result));
    out.write(`\nwritten to ${dir} (summary.json, trace.jsonl, model-*.json, logs/)\n`);
    return result;
  } finally {
    progress.done();
    killAll(children);
    process.off('exit', cleanup);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function failure(c: Child, code: number | null): Error {
  const tail = c.stderrTail().trim();
  const exitCode = code === EXIT.config || code === EXIT.data ? code : EXIT.peer;
  if (code === null) return new PeerError(`${c.name} could not be started or was killed`);
  return new SimulationError(`${c.name} exited with code ${code}${tail ? `: ${tail.split('\n').pop()}` : ''}`, exitCode);
}

function fmt(v: number | undefined, digits = 4): string {
  return v === undefined || Number.isNaN(v) ? '-' : v.toFixed(digits);
}

export function formatTable(s: SimulateSummary): string {
  const method = s.algorithm === 'sgd' ? 'SGD' : `ADMM (${s.variant})`;
  const rows: [string, number, TestMetrics | undefined][] = [[`${method}, ${s.parties.length} parties`, s.objective, s.test]];
  if (s.baselines) {
    rows.push(['central, all features', s.baselines.central.objective, s.baselines.central.test]);
    rows.push([`${s.baselines.local.party} features only`, s.baselines.local.objective, s.baselines.local.test]);
  }
  const head = ['model', 'train objective', 'test log loss', 'accuracy', 'AUC'];
  const body = rows.map(([name, obj, t]) => [name, fmt(obj, 10), fmt(t?.logLoss), fmt(t?.accuracy), fmt(t?.auc)]);
  const widths = head.map((h, j) => Math.max(h.length, ...body.map((r) => r[j].length)));
  const line = (r: string[]) => r.map((c, j) => (j === 0 ? c.padEnd(widths[j]) : c.padStart(widths[j]))).join('  ') + '\n';
  const gap = s.baselines ? (s.objective - s.baselines.central.objective) / s.baselines.central.objective : undefined;
  return (
    '\n' +
    line(head) +
    line(widths.map((w) => '-'.repeat(w))) +
    body.map(line).join('') +
    `\n${s.rounds} ${s.algorithm === 'sgd' ? 'epochs' : 'rounds'} (${s.reason}), ${(s.seconds.perRound * 1000).toFixed(2)} ms/${s.algorithm === 'sgd' ? 'epoch' : 'round'}, ` +
    `${(s.bytes.toCoordinator / 1e6).toFixed(1)} MB to / ${(s.bytes.fromCoordinator / 1e6).toFixed(1)} MB from the coordinator` +
    (gap !== undefined && s.objectiveFrom === 'shares' ? `, objective gap to central ${gap.toExponential(2)}` : '') +
    (s.objectiveFrom === 'noisy shares' ? ', ADMM objective computed from the noisy shares' : '') +
    (s.droppedRows ? `, ${s.droppedRows} rows dropped in alignment` : '') +
    '\n'
  );
}
