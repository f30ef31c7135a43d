/**
 * The one-shot private training (docs/privacy.md, section 9), the coordinator's side:
 *   release   every passive party releases its noised, clipped score vector once (with its
 *             clipped test scores when it releases them)
 *   fit       the active party fits the combined model on [its features, the denoised
 *             releases, 1] and its local-only model, and returns the weights and its test
 *             scores; without an active party the coordinator fits [denoised releases, 1]
 *   evaluate  test score = active part (or intercept) + sum of weight x clipped test score
 * Each step is a request that a rejoining party answers again (the release is stored by the
 * party and sent again, never drawn again), so a lost connection is survived like in ADMM.
 */
import { type ClassificationMetrics, PeerError, classificationMetrics, csrWithColumns, denoiseRelease, fitCentral, trainingLoss } from '@admm-share/core';
import { type Fitted, type Released, encode } from '@admm-share/protocol';
import type { Participation } from '../job/job.js';
import type { PartyConnection } from '../connections/party-connection.js';
import type { OneShotReport } from '../output/one-shot-report.js';
import type { TestMetrics } from '../output/test-metrics.js';
import { TraceWriter } from '../output/trace.js';
import { trafficSince } from '../bytes.js';
import { type LoopContext, type OneShotResult, assertFinite } from './loop.js';
import { recordTestParts } from './evaluation.js';

export async function runOneShot({ cfg, job, parties, log, traffic, onTrace }: LoopContext, participation: Participation): Promise<OneShotResult> {
  const { jobId, n, nTest, y } = job;
  const start = performance.now();
  const active = cfg.activeParty === undefined ? undefined : parties.byId(cfg.activeParty);
  const passive = parties.list.filter((p) => p !== active);
  const sigmaOf = (p: PartyConnection) => participation.privacy.find((q) => q.party === p.id)!.sigma;
  log.info({ algorithm: 'one-shot', active: active?.id ?? null, passive: passive.map((p) => p.id) }, 'training: one release per passive party');

  const releaseBytes = encode({ type: 'release', jobId });
  const released: Released[] = await Promise.all(passive.map((p) => p.request(releaseBytes, ['released'], { jobId, n, nTest })));
  const testOf = (r: { testScores: Float64Array }, who: string) => {
    if (job.yTest && r.testScores.length !== nTest) throw new PeerError(`${who} sent no test scores in a job that evaluates`);
    return r.testScores;
  };

  let weights: Float64Array;
  let objective: number;
  let base: Float64Array | undefined;
  let intercept: number | null = null;
  let fitted: Fitted | undefined;
  if (active) {
    const releases = new Float64Array(n * passive.length);
    released.forEach((r, j) => releases.set(r.scores, j * n));
    fitted = await active.request(
      encode({ type: 'fit', jobId, parties: passive.map((p) => p.id), releases, sigmas: Float64Array.from(passive, sigmaOf) }),
      ['fitted'],
      { jobId, n, nTest, passive: passive.length },
    );
    weights = fitted.weights;
    objective = fitted.objective;
    base = job.yTest ? testOf(fitted, `party ${active.id}`) : undefined;
  } else {
    // No active party: denoise each release towards its mean (nothing else is known about
    // it here) and fit the combination with an intercept.
    const columns = released.map((r, j) => denoiseRelease(r.scores, new Float64Array(n).fill(mean(r.scores)), 1, sigmaOf(passive[j])).column);
    const fit = fitCentral(csrWithColumns(undefined, n, columns), y, trainingLoss(job.setup.loss, job.setup.labelFlip, job.setup.classWeights), job.setup.lambda, { intercept: true });
    weights = fit.x;
    objective = fit.objective;
    intercept = fit.intercept;
    base = job.yTest ? new Float64Array(nTest).fill(fit.intercept) : undefined;
  }
  assertFinite('the one-shot fit', 'weights', weights);

  let metrics: TestMetrics | undefined;
  let local: OneShotReport['local'] = null;
  if (job.yTest && base) {
    const total = base.slice();
    released.forEach((r, j) => {
      const v = testOf(r, `party ${passive[j].id}`);
      for (let i = 0; i < nTest; i++) total[i] += weights[j] * v[i];
    });
    metrics = classificationMetrics(total, job.yTest);
    recordTestParts(job, {
      parties: [...(active ? [active.id] : []), ...passive.map((p) => p.id)],
      parts: [...(active ? [Float64Array.from(base)] : []), ...released.map((r, j) => Float64Array.from(testOf(r, `party ${passive[j].id}`), (v) => weights[j] * v))],
      ...(active ? {} : { base }),
    });
  }
  if (active && fitted) local = { party: active.id, objective: fitted.localObjective, ...(job.yTest ? { test: classificationMetrics(fitted.localTestScores, job.yTest) } : {}) };
  const baseline = job.yTest ? baseRateMetrics(y, job.yTest, job.setup.labelFlip) : undefined;
  const oneShot: OneShotReport = {
    activeParty: active?.id ?? null,
    weights: Object.fromEntries(passive.map((p, j) => [p.id, weights[j]])),
    intercept,
    local,
    ...(baseline ? { baseline } : {}),
    warnings: comparisonWarnings(metrics, local, baseline),
  };
  for (const w of oneShot.warnings) log.warn(w);

  const seconds = (performance.now() - start) / 1000;
  const epsilonSpent = Object.fromEntries(parties.list.map((p) => [p.id, released[passive.indexOf(p)]?.epsilonSpent ?? 0]));
  const trace = new TraceWriter(cfg.out, log, 1, undefined, onTrace);
  trace.write({ round: 1, objective, seconds, roundSeconds: seconds, bytes: trafficSince(traffic), epsilonSpent, ...(metrics ? { test: metrics } : {}) });
  trace.close(true);
  return { algorithm: 'one-shot', reason: 'max-rounds', rounds: 1, objective, metrics, trainingSeconds: seconds, epsilonSpent, params: { variant: 'one-shot', rho: 0 }, oneShot };
}

function mean(v: Float64Array): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i];
  return s / v.length;
}

/**
 * Test metrics of the constant score of the training labels' base rate: the majority-class
 * baseline in log loss. With labels flipped with probability `labelFlip` the share q of
 * positive flipped labels estimates (1 - 2 p) pi + p, so the base rate pi is (q - p) / (1 - 2 p).
 */
export function baseRateMetrics(yTrain: Float64Array, yTest: Float64Array, labelFlip = 0): ClassificationMetrics {
  let pos = 0;
  for (let i = 0; i < yTrain.length; i++) if (yTrain[i] > 0) pos++;
  const p = Math.min(Math.max((pos / yTrain.length - labelFlip) / (1 - 2 * labelFlip), 1e-12), 1 - 1e-12);
  return classificationMetrics(new Float64Array(yTest.length).fill(Math.log(p / (1 - p))), yTest);
}

/** What the user must be told in words: the private model is worse than going alone, or than predicting the base rate. */
export function comparisonWarnings(test: TestMetrics | undefined, local: OneShotReport['local'], baseline: TestMetrics | undefined): string[] {
  const out: string[] = [];
  const ll = test?.logLoss;
  if (ll === undefined) return out;
  const lll = local?.test?.logLoss;
  if (lll !== undefined && ll > lll)
    out.push(`the private joint model is WORSE than ${local!.party} alone (test log loss ${ll.toFixed(4)} against ${lll.toFixed(4)}): the passive parties' releases do not help at this budget; keep ${local!.party}'s own model`);
  if (baseline?.logLoss !== undefined && ll > baseline.logLoss)
    out.push(`the private joint model is WORSE than predicting the base rate of the training labels (test log loss ${ll.toFixed(4)} against ${baseline.logLoss.toFixed(4)})`);
  return out;
}
