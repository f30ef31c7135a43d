/**
 * What a job reports: the per-round trace (trace.jsonl), the summary (summary.json), the
 * round's log line and the one human-readable result line a run ends with.
 */
import { closeSync, existsSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { writeFileAtomic } from '@admm-share/core';
import { peakMemoryBytes } from '@admm-share/runtime';
import type { AlgorithmName, Classes, LossName, PrivacyInfo, SolverStats, StopReason } from '@admm-share/protocol';
import type { Variant } from '../numerics/admm-step.js';
import type { TrainResult } from '../training/admm-loop.js';
import type { CoordinatorConfig, SgdConfig } from '../config.js';
import type { Job, Participation } from '../job/job.js';
import type { LabelPrivacyReport } from '../job/label-flips.js';
import type { PartyConnection, Traffic } from '../connections/party-connection.js';
import { readTrace } from './summary-read.js';

export interface PartySummary {
  id: string;
  features: number;
  rows: number;
  testRows: number;
}

export interface TestMetrics {
  logLoss?: number;
  accuracy?: number;
  auc?: number;
  rmse?: number;
}

/** What a one-shot job adds to its summary: the combination and the comparisons the user decides on. */
export interface OneShotReport {
  /** The label holder's own party, or null when every party is passive. */
  activeParty: string | null;
  /** The combined model's weight on each passive party's clipped score. */
  weights: Record<string, number>;
  /** Without an active party, the combination's intercept (fitted by the coordinator); null with one (its part holds it). */
  intercept: number | null;
  /** The active party's local-only model (fitted by it on its own features, no extra release). */
  local: { party: string; objective: number; test?: TestMetrics } | null;
  /** Predicting the training labels' base rate for every test row. */
  baseline?: TestMetrics;
  /** The comparisons that went against the private model, in words. */
  warnings: string[];
}

/** How a job with noise is labelled when it runs the per-round noisy ADMM. */
export const RESEARCH_MODE =
  'RESEARCH MODE: per-round noisy ADMM (--algorithm admm with noise); it is known to be worse than going alone at realistic N (docs/privacy.md, section 8); the default with privacy is --algorithm one-shot';

export interface Summary {
  jobId: string;
  algorithm: AlgorithmName;
  sgd?: SgdConfig;
  variant: Variant;
  loss: LossName;
  lambda: number;
  rho: { initial: number; final: number };
  alpha: number;
  /** Anderson acceleration of the ADMM rounds (docs/rho.md): its memory, and how many extrapolated points were kept and rejected; absent without it. */
  acceleration?: Acceleration;
  rounds: number;
  reason: StopReason;
  converged: boolean;
  objective: number;
  /**
   * The coordinator computes the objective from what it receives: with noise on, from the
   * noisy shares and without the parties' penalties (which they do not send then), which is
   * not the objective of the parties' models.
   */
  objectiveFrom: 'shares' | 'noisy shares';
  residuals: { primal: number; dual: number } | null;
  test?: TestMetrics;
  /** Present when the job has test labels but did not evaluate, with the reason. */
  evaluation?: { skipped: string };
  seconds: { total: number; setup: number; training: number; perRound: number };
  bytes: { toCoordinator: number; fromCoordinator: number };
  parties: PartySummary[];
  rows: { train: number; test: number };
  droppedRows: number;
  droppedTestRows: number;
  /** How rows were aligned. */
  alignment: AlignmentReport;
  /** logistic loss: which raw label became -1 and which +1 (the positive class of every probability); null otherwise. */
  classes: Classes | null;
  /** Each party's privacy setting as it reported it, and the budget it had spent at the end. */
  privacy: (PrivacyInfo & { party: string; epsilonSpent: number })[];
  /**
   * Label privacy at the coordinator (--label-epsilon): randomized response on the training
   * labels, how many of the job's training labels it flipped, and whether the flips were
   * seeded (predictable); null without.
   */
  labelPrivacy: LabelPrivacyReport | null;
  /** one-shot jobs only. */
  oneShot?: OneShotReport;
  /** Present (RESEARCH_MODE) when noisy shares were sent every round. */
  research?: string;
  /** The coordinator's peak resident memory when the job ended, in bytes (each party logs its own with 'model written'). */
  peakMemoryBytes: number;
}

export interface Acceleration {
  method: 'anderson';
  memory: number;
  extrapolated: number;
  rejected: number;
}

/** How rows were aligned: always the private set intersection (docs/privacy.md, section 11). */
export interface AlignmentReport {
  method: 'ecdh-psi';
  group: string;
  hashToCurve: string;
  /** Label ids the coordinator put into the intersection, per set (test: 0 without test labels). */
  labelIds: { train: number; test: number };
  /** From the coordinator's start until every party's ids were intersected; null for a resumed job (the parties were aligned as they rejoined). */
  seconds: number | null;
}

export const ALIGNMENT_METHOD = { method: 'ecdh-psi', group: 'X25519 (Curve25519)', hashToCurve: 'SHA-512, Elligator 2 twice, added (RFC 9380 random-oracle form), as a Montgomery u-coordinate' } as const;

/** One line of trace.jsonl. */
export interface TraceLine {
  round: number;
  objective: number;
  seconds: number;
  roundSeconds: number;
  bytes: { toCoordinator: number; fromCoordinator: number };
  primal?: number;
  dual?: number;
  rho?: number;
  epoch?: number;
  lr?: number;
  steps?: number;
  epsilonSpent?: Record<string, number>;
  /** Per party id: the x-update's conjugate gradient iterations and final relative residual (blocks too large to factor, no privacy). */
  solver?: Record<string, SolverStats>;
  test?: TestMetrics;
}

/**
 * The per-round trace, one JSON object per line. Written to `trace.jsonl.partial` as the
 * job runs and renamed to `trace.jsonl` when it completes, so a `trace.jsonl` is always whole.
 */
export class TraceWriter {
  private readonly fd: number;
  private readonly partial: string;

  /** `keepUpTo`: a resumed job keeps the lines of the rounds up to its checkpoint; `onLine` sees each new line (the job's monitor). */
  constructor(
    private readonly dir: string,
    private readonly log: Logger,
    private readonly maxRounds: number,
    keepUpTo?: number,
    private readonly onLine?: (line: TraceLine) => void,
  ) {
    mkdirSync(dir, { recursive: true });
    this.partial = join(dir, 'trace.jsonl.partial');
    const kept = keepUpTo !== undefined && existsSync(this.partial) ? keptLines(this.partial, keepUpTo) : '';
    this.fd = openSync(this.partial, 'w');
    if (kept) writeSync(this.fd, kept);
  }

  write(line: TraceLine): void {
    writeSync(this.fd, JSON.stringify(line) + '\n');
    this.log.info({ ...line, maxRounds: this.maxRounds }, 'round');
    this.onLine?.(line);
  }

  close(complete: boolean): void {
    closeSync(this.fd);
    if (complete) renameSync(this.partial, join(this.dir, 'trace.jsonl'));
  }
}

/** The lines of a partial trace up to round `keepUpTo`, each rebuilt by parseTraceLine. */
function keptLines(path: string, keepUpTo: number): string {
  return readTrace(path)
    .filter((line) => line.round <= keepUpTo)
    .map((line) => JSON.stringify(line) + '\n')
    .join('');
}

export function writeSummary(dir: string, summary: Summary): string {
  const path = join(dir, 'summary.json');
  writeFileAtomic(path, JSON.stringify(summary, null, 2) + '\n');
  return path;
}

const fmt = (v: number) => (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e6 ? v.toFixed(4) : v.toExponential(3));

/** The human-readable line a coordinator run ends with. */
export function resultLine(s: Summary, summaryPath: string): string {
  const how = s.reason === 'converged' ? `converged after ${s.rounds} rounds` : s.reason === 'budget' ? `stopped by a privacy budget after ${s.rounds} rounds` : `ran ${s.rounds} rounds`;
  const t = s.test;
  const test = t
    ? t.rmse !== undefined
      ? `, test RMSE ${fmt(t.rmse)}`
      : `, test accuracy ${fmt(t.accuracy ?? NaN)}, log loss ${fmt(t.logLoss ?? NaN)}, AUC ${fmt(t.auc ?? NaN)}`
    : s.evaluation
      ? `, no test metrics (${s.evaluation.skipped})`
      : '';
  const o = s.oneShot;
  const local = o?.local?.test?.logLoss !== undefined ? `; party ${o.local.party} alone: test log loss ${fmt(o.local.test.logLoss)}` : '';
  const warnings = [...(o?.warnings ?? []), ...(s.research ? [s.research] : [])].map((w) => `; WARNING: ${w}`).join('');
  const what = o ? `one-shot private training, ${o.activeParty ? `active party ${o.activeParty}` : 'every party passive'}` : `${s.algorithm}${s.algorithm === 'admm' ? ` ${s.variant}` : ''}`;
  const ran = o ? 'finished' : how;
  const objective = `${s.labelPrivacy ? 'corrected ' : ''}objective ${fmt(s.objective)}${s.objectiveFrom === 'noisy shares' ? ' (from noisy shares)' : ''}`;
  return `job ${s.jobId} ${ran} (${what}, ${s.rows.train} rows, ${s.parties.length} parties, ${s.seconds.total.toFixed(1)} s): ${objective}${test}${local}${labelPrivacyLine(s, '; ')}${warnings}; summary in ${summaryPath}`;
}

/** What the result lines say about label privacy: nothing without it. */
export function labelPrivacyLine(s: Pick<Summary, 'labelPrivacy' | 'rows'>, prefix: string): string {
  const l = s.labelPrivacy;
  if (!l) return '';
  return `${prefix}label privacy: label epsilon ${l.epsilon}, randomized response flipped ${l.flipped} of ${s.rows.train} training labels (probability ${l.flipProbability.toPrecision(4)}${l.seeded ? ', SEEDED: predictable, experiments only' : ''}), loss corrected for the flips`;
}

export interface SummaryInput {
  cfg: CoordinatorConfig;
  job: Job;
  result: TrainResult & { oneShot?: OneShotReport };
  participation: Participation;
  parties: readonly PartyConnection[];
  traffic: Traffic;
  setupSeconds: number;
  totalSeconds: number;
  alignment: AlignmentReport;
  classes: Classes | null;
}

export function buildSummary({ cfg, job, result: r, participation, parties, traffic, setupSeconds, totalSeconds, alignment, classes }: SummaryInput): Summary {
  return {
    jobId: job.jobId,
    algorithm: job.setup.algorithm,
    variant: cfg.variant,
    loss: job.setup.loss,
    lambda: job.setup.lambda,
    rho: r.rho,
    alpha: cfg.variant === 'exact' ? cfg.alpha : 1,
    ...(job.setup.algorithm === 'sgd' ? { sgd: cfg.sgd } : {}),
    ...(r.acceleration ? { acceleration: { method: 'anderson' as const, memory: r.acceleration.memory, extrapolated: r.acceleration.extrapolated, rejected: r.acceleration.rejected } } : {}),
    rounds: r.rounds,
    reason: r.reason,
    converged: r.reason === 'converged',
    objective: r.objective,
    objectiveFrom: participation.noisy && job.setup.algorithm !== 'one-shot' ? 'noisy shares' : 'shares',
    residuals: r.residuals,
    ...(r.metrics ? { test: r.metrics } : {}),
    ...(job.evaluationSkipped ? { evaluation: { skipped: job.evaluationSkipped } } : {}),
    seconds: { total: totalSeconds, setup: setupSeconds, training: r.trainingSeconds, perRound: r.trainingSeconds / Math.max(r.rounds, 1) },
    bytes: { toCoordinator: traffic.in, fromCoordinator: traffic.out },
    parties: parties.map((p) => ({ id: p.id, features: p.features, rows: p.fileRows.train, testRows: p.fileRows.test })),
    rows: { train: job.n, test: job.nTest },
    droppedRows: job.dropped.train,
    droppedTestRows: job.dropped.test,
    alignment,
    classes,
    privacy: participation.privacy.map((q) => ({ ...q, epsilonSpent: r.epsilonSpent[q.party] ?? 0 })),
    labelPrivacy: job.labelPrivacy,
    ...(r.oneShot ? { oneShot: r.oneShot } : {}),
    ...(participation.noisy && job.setup.algorithm === 'admm' ? { research: RESEARCH_MODE } : {}),
    peakMemoryBytes: peakMemoryBytes(),
  };
}
