/**
 * The job's Prometheus metrics (GET /metrics): a registry of the job's own, with the gauges
 * the monitor sets as rounds complete and the counters read from the connections when scraped.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Traffic } from '../bytes.js';
import type { CoordinatorConfig, Phase } from '../config.js';
import type { PartyConnection } from '../connections/party-connection.js';
import type { TestMetrics } from '../output/test-metrics.js';
import type { TraceLine } from '../output/trace.js';
import type { AlignmentStatus } from './alignment.js';

/** How a party stands, as the dashboard and the metrics say it. */
export const PARTY_STATES = ['waiting', 'connected', 'rejoining', 'gone'] as const;
export type PartyState = (typeof PARTY_STATES)[number];

const PHASES: readonly Phase[] = ['starting', 'waiting', 'setup', 'training', 'finishing', 'done', 'failed'];

/** What the metrics read from the monitor when scraped. */
export interface MetricReads {
  phase(): Phase;
  alignment(): AlignmentStatus;
  algorithm(): string;
  stateOf(p: PartyConnection): PartyState;
  epsilonSpent(m: number): number;
}

export class JobMetrics {
  readonly registry = new Registry();
  private readonly registered = new Set<Gauge>();
  readonly partyRoundSeconds: Histogram<'party'>;
  readonly rejected: Counter<'code' | 'reason'>;
  private readonly m: {
    rounds: Counter;
    round: Gauge;
    objective: Gauge;
    primal: Gauge;
    dual: Gauge;
    rho: Gauge;
    roundSeconds: Histogram;
    test: Gauge<'metric'>;
  };

  constructor(cfg: CoordinatorConfig, parties: readonly PartyConnection[], traffic: Traffic, reads: MetricReads) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: 'admm_job_info',
      help: 'The job: its id, algorithm (auto until the parties have joined), variant and loss; always 1',
      labelNames: ['job', 'algorithm', 'variant', 'loss'],
      registers,
      collect() {
        this.reset();
        this.set({ job: cfg.jobId, algorithm: reads.algorithm(), variant: cfg.variant, loss: cfg.loss }, 1);
      },
    });
    new Gauge({
      name: 'admm_phase',
      help: 'The job phase: 1 for the current one, 0 for the others',
      labelNames: ['phase'],
      registers,
      collect() {
        const now = reads.phase();
        for (const phase of PHASES) this.set({ phase }, phase === now ? 1 : 0);
      },
    });
    this.m = {
      rounds: new Counter({ name: 'admm_rounds_total', help: 'Training rounds completed by this process (SGD: epochs)', registers }),
      round: new Gauge({ name: 'admm_round', help: 'The last completed round (SGD: epoch)', registers }),
      // Registered at their first value (see `set`): before the first round there is no objective, not 0.
      objective: new Gauge({ name: 'admm_objective', help: 'The training objective after the last completed round', registers: [] }),
      primal: new Gauge({ name: 'admm_primal_residual', help: 'ADMM primal residual after the last completed round', registers: [] }),
      dual: new Gauge({ name: 'admm_dual_residual', help: 'ADMM dual residual after the last completed round', registers: [] }),
      rho: new Gauge({ name: 'admm_rho', help: 'ADMM penalty rho of the last completed round', registers: [] }),
      roundSeconds: new Histogram({
        name: 'admm_round_duration_seconds',
        help: "Wall time of a training round at the coordinator (sending, every party's answer, the update)",
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        registers,
      }),
      test: new Gauge({ name: 'admm_test_metric', help: 'Test-set metrics of the last evaluation (log_loss, accuracy, auc, rmse)', labelNames: ['metric'], registers }),
    };
    this.partyRoundSeconds = new Histogram({
      name: 'admm_party_round_duration_seconds',
      help: "Time from sending a party a training request (ADMM round, SGD step, one-shot release or fit) to its answer",
      labelNames: ['party'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.rejected = new Counter({
      name: 'admm_rejected_connections_total',
      help: 'Connections to the parties\' port refused before or at their hello, by WebSocket close code',
      labelNames: ['code', 'reason'],
      registers,
    });
    // Read when scraped: what the connections and the traffic counters hold.
    const seen = { in: new Map<string, number>(), out: new Map<string, number>(), rejoins: new Map<string, number>(), total: { in: 0, out: 0 } };
    /** A counter that follows a monotone number read from elsewhere: incremented by what it grew since the last scrape. */
    const follow = (counter: Counter<string>, last: Map<string, number>, labels: Record<string, string>, key: string, value: number) => {
      counter.inc(labels, Math.max(0, value - (last.get(key) ?? 0)));
      last.set(key, Math.max(value, last.get(key) ?? 0));
    };
    // The bytes pair each way: per party (its connections after its hello), then on the whole port.
    const ways = [['in', 'received', 'received from'], ['out', 'sent', 'sent to']] as const;
    for (const [way, word, toFrom] of ways)
      new Counter({
        name: `admm_party_bytes_${word}_total`,
        help: `Bytes ${toFrom} each party (WebSocket frames after its hello)`,
        labelNames: ['party'],
        registers,
        collect() {
          for (const p of parties) follow(this, seen[way], { party: p.id }, p.id, p.bytes[way]);
        },
      });
    for (const [way, word] of ways)
      new Counter({
        name: `admm_bytes_${word}_total`,
        help: `Bytes ${word} on the parties' port, every connection included`,
        registers,
        collect() {
          if (traffic[way] > seen.total[way]) this.inc(traffic[way] - seen.total[way]);
          seen.total[way] = traffic[way];
        },
      });
    new Counter({
      name: 'admm_party_reconnects_total',
      help: 'Times each party rejoined the job after losing its connection',
      labelNames: ['party'],
      registers,
      collect() {
        for (const p of parties) follow(this, seen.rejoins, { party: p.id }, p.id, p.rejoins);
      },
    });
    new Gauge({
      name: 'admm_party_state',
      help: `Each party's state (${PARTY_STATES.join(', ')}): 1 for the current one, 0 for the others`,
      labelNames: ['party', 'state'],
      registers,
      collect() {
        for (const p of parties) {
          const now = reads.stateOf(p);
          for (const state of PARTY_STATES) this.set({ party: p.id, state }, state === now ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: 'admm_epsilon_spent',
      help: 'Privacy budget each party reports spent (0 without noise)',
      labelNames: ['party'],
      registers,
      collect() {
        parties.forEach((p, m) => this.set({ party: p.id }, reads.epsilonSpent(m)));
      },
    });
    new Gauge({
      name: 'admm_epsilon_budget',
      help: 'Privacy budget (epsilon) of each party that adds noise, as its ready message reported it',
      labelNames: ['party'],
      registers,
      collect() {
        this.reset();
        for (const p of parties) if (p.privacy?.epsilon != null) this.set({ party: p.id }, p.privacy.epsilon);
      },
    });
    this.alignmentGauges(reads, registers);
    if (cfg.labelPrivacy)
      new Gauge({ name: 'admm_label_epsilon', help: 'Label differential privacy at the coordinator (--label-epsilon)', registers }).set(cfg.labelPrivacy.epsilon);
  }

  /**
   * The intersection's steps, read when scraped: ids done and the total per step, party
   * (empty: the coordinator's label ids) and set, the time left, and the alignment's seconds.
   */
  private alignmentGauges(reads: MetricReads, registers: Registry[]): void {
    const labelNames = ['step', 'party', 'set'] as const;
    const labels = (s: AlignmentStatus['steps'][number]) => ({ step: s.step, party: s.party ?? '', set: s.set });
    const perStep = (name: string, help: string, value: (s: AlignmentStatus['steps'][number]) => number | null) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          for (const s of reads.alignment().steps) {
            const v = value(s);
            if (v !== null) this.set(labels(s), v);
          }
        },
      });
    perStep('admm_alignment_ids_done', 'Ids done by each step of the private set intersection (party empty: the coordinator\'s label ids)', (s) => s.done);
    perStep('admm_alignment_ids_total', 'Ids each step of the private set intersection has to do, once it has reported', (s) => s.total);
    perStep('admm_alignment_eta_seconds', 'Estimated seconds left in each running step of the private set intersection (0 once done)', (s) => s.etaSeconds);
    new Gauge({
      name: 'admm_alignment_seconds',
      help: 'Seconds of the private set intersection: so far while it runs, its total once every party is aligned',
      registers,
      collect() {
        this.set(reads.alignment().seconds ?? 0);
      },
    });
    new Gauge({
      name: 'admm_alignment_running',
      help: 'Whether the private set intersection is running (1) or over (0: done, failed, or a resumed job)',
      registers,
      collect() {
        this.set(reads.alignment().phase === 'aligning' ? 1 : 0);
      },
    });
  }

  /** A round's trace line: the round gauges. */
  traced(line: TraceLine): void {
    const m = this.m;
    m.rounds.inc();
    m.round.set(line.round);
    this.set(m.objective, line.objective);
    if (line.primal !== undefined) this.set(m.primal, line.primal);
    if (line.dual !== undefined) this.set(m.dual, line.dual);
    if (line.rho !== undefined) this.set(m.rho, line.rho);
    m.roundSeconds.observe(line.roundSeconds);
  }

  tested(metrics: TestMetrics): void {
    const names: [keyof TestMetrics, string][] = [['logLoss', 'log_loss'], ['accuracy', 'accuracy'], ['auc', 'auc'], ['rmse', 'rmse']];
    for (const [k, metric] of names) if (metrics[k] !== undefined) this.m.test.set({ metric }, metrics[k]);
  }

  /** A gauge that has no value until its first: it joins the registry then (prom-client would report 0 before). */
  private set(g: Gauge, v: number): void {
    if (!this.registered.has(g)) {
      this.registry.registerMetric(g);
      this.registered.add(g);
    }
    g.set(v);
  }
}
