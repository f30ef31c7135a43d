/**
 * What the job's HTTP port shows (status-server.ts): the job's status for the dashboard and
 * its JSON API, and the Prometheus metrics. It is fed by hooks that cost a few field updates
 * per round (a trace line, each party's answer) or per chunk of the alignment's ids
 * (alignment.ts), and reads everything else (the phase, each
 * party's state, bytes and rejoins, the traffic) when asked; the Prometheus metrics are
 * metrics.ts. Only job-level numbers are kept:
 * the objective, residuals and test metrics of each round, per party its answer times, bytes
 * and privacy budget; never a vector or a per-sample value.
 */
import type { PartyMessage, ValidationContext } from '@admm-share/protocol';
import type { CoordinatorConfig, Phase } from '../config.js';
import type { Traffic } from '../bytes.js';
import type { PartyConnection } from '../connections/party-connection.js';
import type { Summary, TestMetrics, TraceLine } from '../output/summary.js';
import { AlignmentProgress, type AlignmentStatus } from './alignment.js';
import { JobMetrics, type PartyState } from './metrics.js';

export { PARTY_STATES, type PartyState } from './metrics.js';
export type { AlignmentPhase, AlignmentStatus, AlignmentStep } from './alignment.js';

/** Answers to a training request (an ADMM round, an SGD step or epoch, a one-shot release or fit): their latency is a party's round time. */
const ROUND_REPLIES: ReadonlySet<PartyMessage['type']> = new Set(['share', 'exhausted', 'batchScores', 'released', 'fitted']);

/**
 * Rounds kept for the charts. Beyond it every other point of the older half is dropped, so a
 * job of any length keeps its whole curve at a coarser step, in bounded memory.
 */
export const MAX_HISTORY_POINTS = 20_000;

/** One round as the charts draw it. */
export interface RoundPoint {
  round: number;
  objective: number;
  primal?: number;
  dual?: number;
  rho?: number;
  /** Seconds since training began, and this round's. */
  seconds: number;
  roundSeconds: number;
  /** Each party's answer time this round, in job order (null: not measured, e.g. SGD's epochs). */
  partySeconds: (number | null)[];
  test?: TestMetrics;
}

export interface PartyStatus {
  id: string;
  role: 'active' | 'passive';
  state: PartyState;
  features: number;
  rows: number;
  /** Bytes received from and sent to the party, over all its connections since it first said hello. */
  bytesIn: number;
  bytesOut: number;
  /** Its last answer to a training request: seconds and bytes each way. */
  lastRound: { round: number | null; seconds: number; bytesIn: number; bytesOut: number } | null;
  rejoins: number;
  /** Privacy budget: spent so far and the total it reported (null: the party adds no noise). */
  epsilonSpent: number;
  epsilonBudget: number | null;
  mechanism: string | null;
}

/** The job's outcome and the comparisons the summary holds (the local-only model of a one-shot job). */
export interface JobResult {
  reason: Summary['reason'];
  rounds: number;
  converged: boolean;
  objective: number;
  objectiveFrom: Summary['objectiveFrom'];
  test: TestMetrics | null;
  evaluationSkipped: string | null;
  seconds: Summary['seconds'];
  local: { party: string; objective: number; test: TestMetrics | null } | null;
  baseline: TestMetrics | null;
  warnings: string[];
}

export interface JobStatus {
  job: {
    id: string;
    algorithm: string;
    variant: string;
    loss: string;
    maxRounds: number;
    rows: number | null;
    testRows: number | null;
    activeParty: string | null;
    /** Label differential privacy at the coordinator (--label-epsilon), or null. */
    labelEpsilon: number | null;
    startedAt: string;
  };
  phase: Phase;
  elapsedSeconds: number;
  /** The private set intersection's progress, step by step, and its seconds (alignment.ts). */
  alignment: AlignmentStatus;
  round: number;
  latest: RoundPoint | null;
  /** The last evaluation on the test set. */
  test: { round: number; metrics: TestMetrics } | null;
  parties: PartyStatus[];
  bytes: { received: number; sent: number };
  result: JobResult | null;
  error: string | null;
}

export interface JobInfo {
  algorithm: string;
  rows: number;
  testRows: number;
  maxRounds: number;
}

interface LastReply {
  round: number | null;
  seconds: number;
  bytesIn: number;
  bytesOut: number;
}

export class Monitor {
  /** The Prometheus metrics of the job (metrics.ts), read by GET /metrics. */
  readonly metrics: JobMetrics;
  /** The intersection's steps, fed by the parties' port (PartyPortOptions.watch). */
  readonly alignment: AlignmentProgress;
  private readonly history: RoundPoint[] = [];
  /**
   * Each kept point as JSON, made when first asked for (never on the training path) and kept
   * with it: a page of the status API or an event is a join of these, not a serialization.
   */
  private readonly historyJson: (string | undefined)[] = [];
  private readonly startedAt = new Date();
  private readonly t0 = performance.now();
  private info: JobInfo;
  private readonly lastReply: (LastReply | undefined)[];
  /** Each party's answer time per round, until that round's trace line takes them. */
  private readonly roundSeconds = new Map<number, (number | null)[]>();
  private readonly epsilonSpent: number[];
  private lastTest: { round: number; metrics: TestMetrics } | null = null;
  private result: JobResult | null = null;
  private error: string | null = null;
  /** When the job ended (the elapsed time stops there). */
  private endedAt: number | undefined;

  constructor(
    private readonly cfg: CoordinatorConfig,
    private readonly parties: readonly PartyConnection[],
    private readonly traffic: Traffic,
    /** The job's phase now (coordinator.ts). */
    readonly phase: () => Phase,
  ) {
    this.info = { algorithm: cfg.algorithm, rows: NaN, testRows: NaN, maxRounds: cfg.maxRounds };
    this.lastReply = parties.map(() => undefined);
    this.epsilonSpent = parties.map(() => 0);
    this.alignment = new AlignmentProgress(cfg.resume);
    this.metrics = new JobMetrics(cfg, parties, traffic, {
      phase,
      alignment: () => this.alignmentStatus(),
      algorithm: () => this.info.algorithm,
      stateOf: (p) => this.stateOf(p),
      epsilonSpent: (m) => this.epsilonSpent[m],
    });
  }

  /** The job's algorithm and size, once the parties have joined. */
  jobStarted(info: JobInfo): void {
    this.info = info;
  }

  /** A round's trace line: the charts' point and the round gauges. */
  traced(line: TraceLine): void {
    const partySeconds = this.roundSeconds.get(line.round) ?? this.parties.map(() => null);
    for (const r of this.roundSeconds.keys()) if (r <= line.round) this.roundSeconds.delete(r);
    const point: RoundPoint = {
      round: line.round,
      objective: line.objective,
      ...(line.primal !== undefined ? { primal: line.primal, dual: line.dual } : {}),
      ...(line.rho !== undefined ? { rho: line.rho } : {}),
      seconds: line.seconds,
      roundSeconds: line.roundSeconds,
      partySeconds,
      ...(line.test ? { test: line.test } : {}),
    };
    this.history.push(point);
    this.historyJson.push(undefined);
    if (this.history.length > MAX_HISTORY_POINTS) {
      thin(this.history);
      thin(this.historyJson);
    }
    this.metrics.traced(line);
    if (line.test) this.tested(line.round, line.test);
    if (line.epsilonSpent) this.parties.forEach((p, i) => (this.epsilonSpent[i] = line.epsilonSpent?.[p.id] ?? this.epsilonSpent[i]));
  }

  /** A party answered a request: its round time (for training requests), bytes, and the budget it reports. */
  replied(p: PartyConnection, msg: PartyMessage, ctx: ValidationContext, seconds: number, bytes: Traffic): void {
    if ('epsilonSpent' in msg && typeof msg.epsilonSpent === 'number') this.epsilonSpent[p.index] = msg.epsilonSpent;
    if (!ROUND_REPLIES.has(msg.type)) return;
    const round = msg.type === 'share' || msg.type === 'exhausted' ? (ctx.round ?? null) : null;
    this.lastReply[p.index] = { round, seconds, bytesIn: bytes.in, bytesOut: bytes.out };
    this.metrics.partyRoundSeconds.observe({ party: p.id }, seconds);
    if (round !== null) {
      let row = this.roundSeconds.get(round);
      if (!row) this.roundSeconds.set(round, (row = this.parties.map(() => null)));
      row[p.index] = seconds;
    }
  }

  /** A connection refused before or at its hello. */
  refused(code: number, reason: string): void {
    this.metrics.rejected.inc({ code: String(code), reason });
  }

  /** The job completed: its result and the comparisons in its summary. */
  finished(s: Summary): void {
    const o = s.oneShot;
    this.result = {
      reason: s.reason,
      rounds: s.rounds,
      converged: s.converged,
      objective: s.objective,
      objectiveFrom: s.objectiveFrom,
      test: s.test ?? null,
      evaluationSkipped: s.evaluation?.skipped ?? null,
      seconds: s.seconds,
      local: o?.local ? { party: o.local.party, objective: o.local.objective, test: o.local.test ?? null } : (this.cfg.http?.localBaseline ?? null),
      baseline: o?.baseline ?? null,
      warnings: [...(o?.warnings ?? []), ...(s.research ? [s.research] : [])],
    };
    for (const q of s.privacy) {
      const m = this.parties.findIndex((p) => p.id === q.party);
      if (m >= 0) this.epsilonSpent[m] = q.epsilonSpent;
    }
    if (s.test) this.tested(s.rounds, s.test);
    this.endedAt ??= performance.now();
  }

  failed(message: string): void {
    this.alignment.failed();
    this.error ??= message;
    this.endedAt ??= performance.now();
  }

  private tested(round: number, metrics: TestMetrics): void {
    this.lastTest = { round, metrics };
    this.metrics.tested(metrics);
  }

  stateOf(p: PartyConnection): PartyState {
    const phase = this.phase();
    if (p.status === 'connected') return 'connected';
    if (p.status === 'away') return phase === 'failed' ? 'gone' : 'rejoining';
    if (p.status === 'closed') return 'gone';
    return phase === 'failed' || phase === 'done' ? 'gone' : 'waiting';
  }

  private alignmentStatus(): AlignmentStatus {
    return this.alignment.status(this.parties.map((p) => ({ id: p.id, joined: p.status !== 'absent' })));
  }

  /** The rounds kept for the charts (a copy). */
  rounds(from = 0): RoundPoint[] {
    return this.history.slice(this.firstAfter(from));
  }

  /**
   * At most `limit` of the kept rounds after round `from`, as a JSON array, and whether more
   * follow; with `every` > 1 only every such point (and the last), to draw a long curve coarser.
   */
  roundsJson(from: number, limit: number, every = 1): { json: string; count: number; last: number; more: boolean } {
    const start = this.firstAfter(from);
    const end = Math.min(this.history.length, start + limit * every);
    const parts: string[] = [];
    for (let i = start; i < end; i += every) parts.push(this.pointJson(i));
    if (every > 1 && end > start && (end - 1 - start) % every !== 0) parts.push(this.pointJson(end - 1));
    return { json: `[${parts.join(',')}]`, count: parts.length, last: end > start ? this.history[end - 1].round : from, more: end < this.history.length };
  }

  /** Rounds kept after round `from`. */
  roundsAfter(from: number): number {
    return this.history.length - this.firstAfter(from);
  }

  private pointJson(i: number): string {
    return (this.historyJson[i] ??= JSON.stringify(this.history[i]));
  }

  /** Index of the first kept round after `from` (rounds are kept in increasing order). */
  private firstAfter(from: number): number {
    let lo = 0;
    let hi = this.history.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.history[mid].round > from) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  get lastRound(): number {
    return this.history.at(-1)?.round ?? 0;
  }

  status(): JobStatus {
    const cfg = this.cfg;
    const info = this.info;
    return {
      job: {
        id: cfg.jobId,
        algorithm: info.algorithm,
        variant: cfg.variant,
        loss: cfg.loss,
        maxRounds: info.maxRounds,
        rows: Number.isNaN(info.rows) ? null : info.rows,
        testRows: Number.isNaN(info.testRows) ? null : info.testRows,
        activeParty: cfg.activeParty ?? null,
        labelEpsilon: cfg.labelPrivacy?.epsilon ?? null,
        startedAt: this.startedAt.toISOString(),
      },
      phase: this.phase(),
      elapsedSeconds: ((this.endedAt ?? performance.now()) - this.t0) / 1000,
      alignment: this.alignmentStatus(),
      round: this.lastRound,
      latest: this.history.at(-1) ?? null,
      test: this.lastTest,
      parties: this.parties.map((p, m) => ({
        id: p.id,
        role: p.id === cfg.activeParty ? 'active' : 'passive',
        state: this.stateOf(p),
        features: p.features,
        rows: p.fileRows.train,
        bytesIn: p.bytes.in,
        bytesOut: p.bytes.out,
        lastRound: this.lastReply[m] ?? null,
        rejoins: p.rejoins,
        epsilonSpent: this.epsilonSpent[m],
        epsilonBudget: p.privacy?.epsilon ?? null,
        mechanism: p.privacy?.mechanism ?? null,
      })),
      bytes: { received: this.traffic.in, sent: this.traffic.out },
      result: this.result,
      error: this.error,
    };
  }
}

/** Drop every other point of the older half (the newest half keeps every round). */
function thin<T>(points: T[]): void {
  const half = Math.floor(points.length / 2);
  let k = 0;
  for (let i = 0; i < half; i += 2) points[k++] = points[i];
  for (let i = half; i < points.length; i++) points[k++] = points[i];
  points.length = k;
}
