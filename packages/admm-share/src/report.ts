// What a simulation reports: the summary it returns (the coordinator's summary.json plus the
// baseline models and the file paths; simulate.ts writes what it adds to simulation.json), the
// baselines themselves (central on all features, party 1 alone), and the human-readable lines
// and result table.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  type ClassWeights,
  type Csr,
  type LabelledSet,
  classWeighted,
  classificationMetrics,
  csrSliceColumns,
  fitCentral,
  logistic,
  predictScores,
} from '@admm-share/core';
import { JOB_FILE, REPORT_FILE, REPORT_PAGE, TEST_SCORES_FILE, type Summary, type TestMetrics, baseRateMetrics, comparisonWarnings, labelPrivacyLine, readSummary } from '@admm-share/coordinator';
import type { SimulationData } from './datasets.js';
import { type Job, modelPath } from './launch.js';
import type { Progress } from '@admm-share/runtime';
import { type Baseline, SIMULATION_FILE, type Simulation } from './simulation-file.js';

export type { Baseline } from './simulation-file.js';

/** The coordinator's summary with what simulate adds (simulation.json's fields; its seconds are the summary's with `total` replaced). */
export interface SimulateSummary extends Summary, Omit<Simulation, 'seconds'> {}

/** Party 1's baseline, with its id. */
export type LocalBaselineFigures = NonNullable<Simulation['baselines']>['local'];

/** The central model on all columns, or on columns [from, to) only (a party alone), with its test metrics; with `classWeights`, of the class-weighted loss. */
export function evaluateCentral(train: LabelledSet, test: LabelledSet | undefined, lambda: number, intercept: boolean, cols?: [number, number], classWeights?: ClassWeights): Baseline {
  const slice = (X: Csr) => (cols ? csrSliceColumns(X, cols[0], cols[1]) : X);
  const fit = fitCentral(slice(train.X), train.y, classWeights ? classWeighted(logistic, classWeights) : logistic, lambda, { intercept });
  return {
    objective: fit.objective,
    ...(test ? { test: classificationMetrics(predictScores(slice(test.X), fit.x, fit.intercept), test.y) } : {}),
  };
}

/** Party 1 alone: the central model on its block of columns (the local-only baseline). */
export function localBaseline(data: SimulationData, job: Job, opts: { lambda: number; intercept: boolean; classWeights?: ClassWeights }): LocalBaselineFigures {
  const first = job.files.parties[0];
  return { party: first.id, ...evaluateCentral(data.train, data.test, opts.lambda, opts.intercept, [first.columns[0] - 1, first.columns[1]], opts.classWeights) };
}

/** The first line `simulate` prints: the data set, its rows and the parties' blocks. */
export function describeData({ source, train, test, blocks }: SimulationData): string {
  return `admm-share simulate: ${source}, ${train.ids.length} training rows${test ? `, ${test.ids.length} test rows` : ''}, ` +
    `${blocks.length} parties (${blocks.join(' | ')} features)\n`;
}

/**
 * The coordinator's summary.json with the file paths and, if asked, the baselines; `total`
 * seconds count from `started`. summary.json stays the coordinator's: simulate writes what it
 * adds to simulation.json.
 */
export function completeSummary(
  job: Job,
  data: SimulationData,
  opts: { lambda: number; intercept: boolean; baselines: boolean; classWeights?: ClassWeights },
  progress: Progress,
  started: number,
  partyPeaks: Record<string, number>,
  /** The local-only baseline if it was fitted before the job (for the dashboard). */
  local?: LocalBaselineFigures,
): SimulateSummary {
  const { dir, files } = job;
  const summary = readSummary(join(dir, 'summary.json'));
  const result: SimulateSummary = {
    ...summary,
    files: { dir, logs: job.logDir, models: files.parties.map((p) => modelPath(job, p.id)) },
    peakMemory: { coordinator: summary.peakMemoryBytes, ...Object.fromEntries(files.parties.filter((p) => partyPeaks[p.id] !== undefined).map((p) => [p.id, partyPeaks[p.id]])) },
  };
  if (opts.baselines) {
    progress.message('training the central and party-1-only baselines');
    result.baselines = {
      central: evaluateCentral(data.train, data.test, opts.lambda, opts.intercept, undefined, opts.classWeights),
      local: local ?? localBaseline(data, job, opts),
      ...(data.test ? { majority: { objective: NaN, test: baseRateMetrics(data.train.y, data.test.y) } } : {}),
    };
    progress.done();
    if (summary.privacy.some((q) => q.mechanism !== 'none')) result.warnings = [...privateWarnings(result), ...(summary.warnings ?? [])];
  } else if (summary.oneShot?.warnings.length || summary.warnings?.length) result.warnings = [...(summary.oneShot?.warnings ?? []), ...(summary.warnings ?? [])]; // the coordinator's: against the active party's own fit, and the report's
  result.seconds = { ...summary.seconds, total: (performance.now() - started) / 1000 };
  return result;
}

/**
 * With noise on: the private model against party 1 alone (the better of this simulation's
 * baseline and the active party's own fit) and against the majority class.
 */
function privateWarnings(s: SimulateSummary): string[] {
  const b = s.baselines!;
  const own = s.oneShot?.local?.test?.logLoss;
  const local = own !== undefined && own < (b.local.test?.logLoss ?? Infinity) ? s.oneShot!.local! : { party: b.local.party, objective: b.local.objective, test: b.local.test };
  return comparisonWarnings(s.test, local, b.majority?.test);
}

function fmt(v: number | undefined, digits = 4): string {
  return v === undefined || Number.isNaN(v) ? '-' : v.toFixed(digits);
}

export function formatTable(s: SimulateSummary): string {
  const method =
    s.algorithm === 'sgd'
      ? 'SGD'
      : s.algorithm === 'one-shot'
        ? `one-shot private${s.oneShot?.activeParty ? ` (${s.oneShot.activeParty} active)` : ' (all passive)'}`
        : `ADMM (${s.variant})${s.research ? ', per-round noise (RESEARCH)' : ''}`;
  const rows: [string, number, TestMetrics | undefined][] = [[`${method}, ${s.parties.length} parties`, s.objective, s.test]];
  const own = s.oneShot?.local;
  if (own) rows.push([`${own.party} alone, its own fit in the job`, own.objective, own.test]);
  if (s.baselines) {
    // With label privacy the baselines are the references without it: trained on the true labels.
    const truth = s.labelPrivacy ? ', true labels' : '';
    rows.push([`central, all features${truth}`, s.baselines.central.objective, s.baselines.central.test]);
    rows.push([`${s.baselines.local.party} features only${truth}`, s.baselines.local.objective, s.baselines.local.test]);
    if (s.baselines.majority) rows.push(['majority class (base rate)', NaN, s.baselines.majority.test]);
  }
  const head = ['model', 'train objective', 'test log loss', 'accuracy', 'AUC'];
  const body = rows.map(([name, obj, t]) => [name, fmt(obj, 10), fmt(t?.logLoss), fmt(t?.accuracy), fmt(t?.auc)]);
  const widths = head.map((h, j) => Math.max(h.length, ...body.map((r) => r[j].length)));
  const line = (r: string[]) => r.map((c, j) => (j === 0 ? c.padEnd(widths[j]) : c.padStart(widths[j]))).join('  ') + '\n';
  // The corrected objective on flipped labels is not comparable with the central one on the true labels.
  const gap = s.baselines && !s.labelPrivacy ? (s.objective - s.baselines.central.objective) / s.baselines.central.objective : undefined;
  return (
    '\n' +
    line(head) +
    line(widths.map((w) => '-'.repeat(w))) +
    body.map(line).join('') +
    (s.algorithm === 'one-shot'
      ? `\none-shot: one release per passive party and one fit, ${s.seconds.training.toFixed(2)} s, `
      : `\n${s.rounds} ${s.algorithm === 'sgd' ? 'epochs' : 'rounds'} (${s.reason}), ${(s.seconds.perRound * 1000).toFixed(2)} ms/${s.algorithm === 'sgd' ? 'epoch' : 'round'}, `) +
    `${(s.bytes.toCoordinator / 1e6).toFixed(1)} MB to / ${(s.bytes.fromCoordinator / 1e6).toFixed(1)} MB from the coordinator` +
    (gap !== undefined && s.objectiveFrom === 'shares' && s.algorithm !== 'one-shot' ? `, objective gap to central ${gap.toExponential(2)}` : '') +
    (s.objectiveFrom === 'noisy shares' ? ', ADMM objective computed from the noisy shares' : '') +
    (s.droppedRows ? `, ${s.droppedRows} rows dropped in alignment` : '') +
    '\n' +
    `peak memory: ${Object.entries(s.peakMemory).map(([who, b]) => `${who} ${(b / 1e6).toFixed(0)} MB`).join(', ')}\n` +
    labelPrivacyLine(s, '') +
    (s.labelPrivacy ? '\n' : '') +
    (s.warnings ?? []).map((w) => `WARNING: ${w}\n`).join('')
  );
}

/** The last line: where the files are (local-baseline.json only when simulate fitted it for the dashboard). */
export function writtenTo(dir: string, localBaselineFile?: string): string {
  const report = existsSync(join(dir, REPORT_FILE)) ? [REPORT_FILE, REPORT_PAGE, TEST_SCORES_FILE] : [];
  const files = ['summary.json', 'trace.jsonl', JOB_FILE, SIMULATION_FILE, ...report, ...(localBaselineFile ? [localBaselineFile] : []), 'model-*.json', 'data/', 'logs/'];
  return `\nwritten to ${dir} (${files.join(', ')})\n`;
}
