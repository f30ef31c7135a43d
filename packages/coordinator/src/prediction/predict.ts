/**
 * Prediction with a trained model, the coordinator's side: the parties join with their model
 * files (checked against the job description, job.json), their ids are intersected with the
 * ids to score by the same private set intersection as training, each party scores the rows it
 * holds, and the coordinator combines the parts as training did.
 *   batch (admm-coordinator predict): one intersection of every id to score, one `score` per
 *     party, predictions.csv written atomically, the parties closed with 'done'.
 *   online (admm-coordinator serve, serve.ts): the parties stay connected; each HTTP request
 *     is a `lookup` of its ids and a `score` of the rows found, per party.
 */
import { accessSync, constants, mkdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { type LabelTable, ConfigError, DataError, labelKey, numericLabels, readIdFile, readJsonFile, readLabelFile, sigmoidNeg, writeFileAtomic, z, csvField } from '@admm-share/core';
import { type Classes, ENVELOPE_BYTES, POINT_BYTES, encode } from '@admm-share/protocol';
import { noTraffic } from '../bytes.js';
import type { PartyConnection } from '../connections/party-connection.js';
import { PartyPort, checkCredentials, maxRowsFor } from '../connections/party-port.js';
import type { ServerTls } from '../connections/server.js';
import type { LabelOptions } from '../job/labels.js';
import type { PartyIndex } from '../alignment/psi.js';
import type { PsiCacheFlags } from '@admm-share/runtime';
import { type JobDescription, combineScores, modelMismatch, readJobFile } from '../output/job-file.js';
import { nameSchema as name } from '../output/fields.js';
import { idColumnName } from '../output/model-report.js';
import { testMetrics, testMetricsSchema } from '../output/test-metrics.js';
import { alignmentWork } from '../output/summary.js';

/** What to do with an id that a party does not hold: refuse the job (or request), or score it without that party's part. */
export const MISSING_POLICIES = ['error', 'partial'] as const;
export type MissingPolicy = (typeof MISSING_POLICIES)[number];

export interface ScoringNetConfig {
  host: string;
  port: number;
  tls?: ServerTls;
  credentials?: Record<string, string>;
  /** This prediction job's id (a party's scoring budget is per job). */
  jobId: string;
  /** The trained job's description (job.json). */
  model: string;
  missing: MissingPolicy;
  helloTimeoutMs: number;
  /** A party must answer each request within this time. */
  requestTimeoutMs: number;
  heartbeatMs: number;
  /** A party may declare at most this many rows (batch: times the ids to score, plus slack). */
  maxRows: number;
  /** --psi-cache: keep the intersection's keys and points per party between jobs. */
  psiCache?: PsiCacheFlags;
}

export interface PredictConfig extends Omit<ScoringNetConfig, 'maxRows'> {
  /** The ids to score (CSV with an id column, or LIBSVM). */
  ids: string;
  /** The ids file carries labels too: report metrics. */
  labels: boolean;
  idOptions: LabelOptions;
  /** predictions.csv; its summary goes next to it (.json). */
  out: string;
  maxRowsFactor: number;
}

/** A prediction job's summary (predictions.json next to predictions.csv). */
export const predictSummarySchema = z.strictObject({
  jobId: name,
  modelJob: name,
  rows: z.int().min(1),
  /** Ids each party does not hold (scored without its part with --missing partial). */
  missing: z.record(name, z.int().min(0)),
  positiveClass: z.string().nullable(),
  metrics: testMetricsSchema.nullable(),
  /** Each party's scoring budget spent (0 without noise). */
  epsilonSpent: z.record(name, z.number().min(0)),
  seconds: z.strictObject({ total: z.number().min(0), alignment: z.number().min(0) }),
  /** The coordinator's work in the intersection (as in a training summary). */
  alignment: z.strictObject(alignmentWork).optional(),
  files: z.strictObject({ predictions: z.string() }),
});
export type PredictSummary = z.output<typeof predictSummarySchema>;

/** Read a prediction job's summary back (predictions.json), every field checked. */
export function readPredictSummary(path: string): PredictSummary {
  return readJsonFile(predictSummarySchema, path, 'prediction summary');
}

/** The network side shared by batch and online scoring: the parties' port (connections/party-port.ts) for the model's parties. */
export class ScoringNet {
  readonly description: JobDescription;
  readonly traffic = noTraffic();
  private readonly port: PartyPort;
  private failure: ((err: Error) => void) | undefined;

  constructor(
    readonly cfg: ScoringNetConfig,
    readonly log: Logger,
    ids: readonly string[],
    opts: { onIndex?: (p: PartyConnection, index: PartyIndex) => void; onFailure: (err: Error) => void },
  ) {
    this.description = readJobFile(cfg.model);
    const d = this.description;
    const parties = d.parties.map((p) => p.id);
    checkCredentials(parties, cfg.credentials, log);
    this.failure = opts.onFailure;
    this.port = new PartyPort({
      ids: parties,
      policy: { credentials: cfg.credentials, jobId: cfg.jobId, maxRows: cfg.maxRows, modelMismatch: (hello) => modelMismatch(d, hello.partyId, hello.features, hello.model) },
      psiIds: { train: ids, test: undefined },
      psiCache: cfg.psiCache,
      progressNames: { psi: (_set, what) => `ids to score: ${what}`, party: (party) => `${party} ids` },
      // Never used: a party that drops before the job ends may join again.
      rejoinTimeoutMs: 0,
      roundTimeoutMs: cfg.requestTimeoutMs,
      heartbeatMs: cfg.heartbeatMs,
      log,
      traffic: this.traffic,
      onFailure: (err) => this.failure?.(err),
      onIndex: opts.onIndex,
    });
  }

  get parties() {
    return this.port.parties;
  }

  get psi() {
    return this.port.psi;
  }

  /** Begins the points of the ids to score while the parties start (PartyPort.prepare). */
  prepare(fail: (err: Error) => void): void {
    this.port.prepare(['train'], fail);
  }

  async listen(labelRows: number): Promise<number> {
    const { cfg, log } = this;
    // The largest frame: a party's ids (up to maxRows points, and one point per id to score) or its scores.
    const maxPayload = (this.cfg.maxRows + labelRows) * POINT_BYTES + ENVELOPE_BYTES;
    const port = await this.port.listen({ host: cfg.host, port: cfg.port, tls: cfg.tls, maxPayload, helloTimeoutMs: cfg.helloTimeoutMs });
    log.info({ port, host: cfg.host, jobId: cfg.jobId, modelJob: this.description.jobId, parties: this.description.parties.map((p) => p.id), maxPayload }, 'listening');
    return port;
  }

  /**
   * One party's part of the scores of the rows at `positions` of its ids (in that order). A row
   * named twice (two ids that the party's `found` answer put on one row) is asked for once: a
   * party refuses a `score` that repeats a row.
   */
  async score(p: PartyConnection, positions: Uint32Array): Promise<{ scores: Float64Array; epsilonSpent: number }> {
    const jobId = this.cfg.jobId;
    const { rows, at } = distinctRows(positions);
    const reply = await p.request(encode({ type: 'score', jobId, rows }), ['partial'], { jobId, n: rows.length });
    return { scores: at ? Float64Array.from(at, (k) => reply.scores[k]) : reply.scores, epsilonSpent: reply.epsilonSpent };
  }

  /** End the job: every party closed with 'done', the server shut down. */
  async close(detail: string): Promise<void> {
    this.parties.closeAll(detail);
    this.parties.stop();
    this.failure = undefined;
    await this.port.close();
  }

  abort(err: Error): void {
    this.parties.abort(err);
    this.failure = undefined;
    void this.port.close();
  }
}

/** `positions` without repeats (in first-seen order), and where each position is among them (undefined: no repeat). */
export function distinctRows(positions: Uint32Array): { rows: Uint32Array; at: Uint32Array | undefined } {
  // The usual case, no repeat, with a byte per row rather than a map (a batch has millions).
  const seen = new Uint8Array(positions.reduce((m, v) => Math.max(m, v + 1), 0));
  let i = 0;
  while (i < positions.length && !seen[positions[i]]) seen[positions[i++]] = 1;
  if (i === positions.length) return { rows: positions, at: undefined };
  const first = new Map<number, number>();
  const at = new Uint32Array(positions.length);
  for (let i = 0; i < positions.length; i++) {
    const k = first.get(positions[i]) ?? first.size;
    if (k === first.size) first.set(positions[i], k);
    at[i] = k;
  }
  return { rows: Uint32Array.from(first.keys()), at };
}

/**
 * The rows held by each party, from its positions per row to score (-1: not held): the
 * positions to send it, and which rows lack which parties. With --missing error any gap fails
 * the job, naming the party and a few of the ids.
 */
export function planRows(parties: readonly string[], positions: readonly Int32Array[], ids: readonly string[], missing: MissingPolicy, where: string): { rows: Uint32Array[]; lacking: string[][] } {
  const lacking: string[][] = ids.map(() => []);
  const rows = positions.map((pos, m) => {
    const held: number[] = [];
    for (let i = 0; i < pos.length; i++) {
      if (pos[i] >= 0) held.push(pos[i]);
      else lacking[i].push(parties[m]);
    }
    return Uint32Array.from(held);
  });
  if (missing === 'error') {
    const gaps = parties
      .map((party, m) => {
        const absent = ids.filter((_, i) => positions[m][i] < 0);
        return absent.length ? `party ${party} does not hold ${absent.length} of the ids (${absent.slice(0, 3).map((id) => `'${id.slice(0, 40)}'`).join(', ')}${absent.length > 3 ? ', ...' : ''})` : '';
      })
      .filter((g) => g !== '');
    if (gaps.length) throw new DataError(where, undefined, `${gaps.join('; ')}; score them without that party's part with --missing partial`);
  }
  return { rows, lacking };
}

/** Each party's part as a full-length vector over the rows to score (0 where it holds no row), by party id. */
export function spreadParts(parties: readonly string[], positions: readonly Int32Array[], parts: readonly Float64Array[]): Map<string, Float64Array> {
  const out = new Map<string, Float64Array>();
  parties.forEach((party, m) => {
    const full = new Float64Array(positions[m].length);
    let k = 0;
    for (let i = 0; i < full.length; i++) if (positions[m][i] >= 0) full[i] = parts[m][k++];
    out.set(party, full);
  });
  return out;
}

/** The probability of the positive class for a score: 1 / (1 + e^-s). */
export function probability(s: number): number {
  return sigmoidNeg(-s);
}

/** The class sign of a raw label under the job's mapping (numbers compare as numbers, as in training). */
export function labelSign(raw: string, classes: Classes, file: string, line: number): number {
  const k = labelKey(raw);
  if (k === labelKey(classes.positive)) return 1;
  if (k === labelKey(classes.negative)) return -1;
  throw new DataError(file, line, `label '${raw.slice(0, 40)}' is neither class of the model ('${classes.negative}', '${classes.positive}')`);
}

/**
 * predictions.csv: the id (under the user's id column name: `idColumn`), score, probability of
 * the positive class, its raw label, and the parties whose part is missing.
 */
export function formatPredictions(ids: readonly string[], scores: Float64Array, classes: Classes | null, lacking: readonly string[][], idColumn = 'id'): string {
  const lines = [`${csvField(idColumn)},score,probability,positive_class,missing`];
  for (let i = 0; i < ids.length; i++) {
    const prob = classes ? String(probability(scores[i])) : '';
    lines.push(`${csvField(ids[i])},${scores[i]},${prob},${classes ? csvField(classes.positive) : ''},${lacking[i].join(';')}`);
  }
  return lines.join('\n') + '\n';
}

/** Run a batch prediction job to its end. */
export async function predict(cfg: PredictConfig, log: Logger): Promise<PredictSummary> {
  const started = performance.now();
  // The output's folder is made and checked before anyone joins: the scores must not be lost at the end.
  try {
    mkdirSync(dirname(cfg.out), { recursive: true });
    accessSync(dirname(cfg.out), constants.W_OK);
  } catch (err) {
    throw new ConfigError(`--out ${cfg.out}: its folder cannot be created or written to (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const labelled: LabelTable | undefined = cfg.labels ? readLabelFile(cfg.ids, cfg.idOptions) : undefined;
  const ids = labelled ? labelled.ids : readIdFile(cfg.ids, cfg.idOptions).ids;
  if (ids.length === 0) throw new DataError(cfg.ids, undefined, 'no ids to score');
  let fail!: (err: Error) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => undefined);
  const net = new ScoringNet({ ...cfg, maxRows: maxRowsFor(cfg.maxRowsFactor, ids.length) }, log, ids, { onFailure: (err) => fail(err) });
  const d = net.description;
  const y = labelled && labelsFor(labelled, d);
  try {
    const guard = <T>(p: Promise<T>) => Promise.race([p, failed]);
    await net.listen(ids.length);
    // Once listening (the parties start meanwhile), before any hello is handled.
    net.prepare(fail);
    const matched = await guard(net.parties.allJoined());
    const alignment = (performance.now() - started) / 1000;
    const names = net.parties.list.map((p) => p.id);
    const positions = matched.map((m) => m.train!);
    const { rows, lacking } = planRows(names, positions, ids, cfg.missing, cfg.ids);
    const parts = await guard(Promise.all(net.parties.list.map((p, m) => net.score(p, rows[m]))));
    const scores = combineScores(d, spreadParts(names, positions, parts.map((r) => r.scores)), ids.length);
    writeFileAtomic(cfg.out, formatPredictions(ids, scores, d.labels, lacking, idColumnName(cfg.ids, cfg.idOptions)));
    const summary: PredictSummary = {
      jobId: cfg.jobId,
      modelJob: d.jobId,
      rows: ids.length,
      missing: Object.fromEntries(names.map((party, m) => [party, positions[m].reduce((k, v) => k + (v < 0 ? 1 : 0), 0)])),
      positiveClass: d.labels?.positive ?? null,
      metrics: y ? testMetrics(d.loss, scores, y) : null,
      epsilonSpent: Object.fromEntries(names.map((party, m) => [party, parts[m].epsilonSpent])),
      seconds: { total: (performance.now() - started) / 1000, alignment },
      alignment: net.psi.report(),
      files: { predictions: cfg.out },
    };
    writeFileAtomic(summaryPath(cfg.out), JSON.stringify(summary, null, 2) + '\n');
    // The PSI caches are written in the background meanwhile: the job ends once they are on disk.
    await guard(net.parties.cachesWritten());
    await net.close('predictions written');
    log.info({ rows: ids.length, missing: summary.missing, metrics: summary.metrics, seconds: summary.seconds }, 'predictions written');
    return summary;
  } catch (err) {
    net.abort(err as Error);
    throw err;
  }
}

/** predictions.csv -> predictions.json */
export function summaryPath(out: string): string {
  return join(dirname(out), basename(out).replace(/(\.csv)?$/, '.json'));
}

/** The labels of the ids file as +1 / -1 under the trained job's mapping (logistic), or as numbers (squared). */
function labelsFor(t: LabelTable, d: JobDescription): Float64Array {
  if (d.loss === 'logistic') {
    if (!d.labels) throw new DataError(t.file, undefined, 'the job description has no label mapping');
    return Float64Array.from(t.raw, (raw, i) => labelSign(raw, d.labels!, t.file, t.lines[i]));
  }
  return numericLabels(t);
}

/** The line `admm-coordinator predict` ends with. */
export function predictLine(s: PredictSummary): string {
  const m = s.metrics;
  const f = (v: number | undefined) => (v ?? NaN).toFixed(4);
  const metrics = m ? (m.rmse !== undefined ? `, RMSE ${f(m.rmse)}` : `, log loss ${f(m.logLoss)}, accuracy ${f(m.accuracy)}, AUC ${f(m.auc)}`) : '';
  const missing = Object.entries(s.missing).filter(([, k]) => k > 0).map(([p, k]) => `${k} without ${p}`);
  const noised = Object.entries(s.epsilonSpent).filter(([, e]) => e > 0).map(([p, e]) => `${p} noised its scores (epsilon ${e.toPrecision(3)})`);
  return `prediction job ${s.jobId} scored ${s.rows} rows with the model of job ${s.modelJob} (${s.seconds.total.toFixed(1)} s)${metrics}${missing.length ? `; ${missing.join(', ')}` : ''}${noised.length ? `; ${noised.join(', ')}` : ''}; predictions in ${s.files.predictions}`;
}
