/**
 * Mini-batch SGD over the same processes (FDML, Hu et al. 2019). Per step the parties score
 * a batch, the coordinator returns d loss / d score for each row, and each party updates its
 * own coefficients (with the next batch in the same message). An epoch is one pass over the
 * data in a fresh seeded order; at its end the parties send their full shares, for the
 * objective, and test scores when due. `--rounds` counts epochs. SGD jobs do not resume.
 */
import seedrandom from 'seedrandom';
import { meanLoss, trainingLoss } from '@admm-share/core';
import type { Participation } from '../job/job.js';
import type { TestMetrics } from '../output/test-metrics.js';
import { TraceWriter } from '../output/trace.js';
import { trafficSince } from '../bytes.js';
import { evaluate, evaluatesAt } from './evaluation.js';
import { type LoopContext, type SgdResult, assertFinite } from './loop.js';

export async function runSgd({ cfg, job, parties, log, traffic, onTrace }: LoopContext, participation: Participation): Promise<SgdResult> {
  const { batchSize, lr: lr0, lrDecay } = cfg.sgd;
  const maxEpochs = participation.maxRounds;
  const { n, y, jobId } = job;
  // With label privacy: the loss corrected for the flips, in the gradient and the objective.
  const loss = trainingLoss(job.setup.loss, job.setup.labelFlip, job.setup.classWeights);
  const rng = seedrandom(`${jobId}/sgd`);
  const order = Uint32Array.from({ length: n }, (_, i) => i);
  let gradient = new Float64Array(0);
  let step = 0;
  let objective = NaN;
  let metrics: TestMetrics | undefined;
  log.info({ algorithm: 'sgd', batchSize, lr: lr0, lrDecay, maxEpochs }, 'training');
  const trace = new TraceWriter(cfg.out, log, maxEpochs, undefined, onTrace);
  const trainStart = performance.now();
  let completed = false;
  try {
    for (let epoch = 1; epoch <= maxEpochs; epoch++) {
      const epochStart = performance.now();
      const before = { ...traffic };
      const lr = lr0 / (1 + lrDecay * (epoch - 1));
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor(rng() * (i + 1));
        const tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
      }
      for (let start = 0; start < n; start += batchSize) {
        const rows = order.slice(start, Math.min(n, start + batchSize));
        const s = ++step;
        const replies = await Promise.all(
          parties.requestAll({ type: 'sgd', jobId, step: s, epoch, lr, gradient, rows, full: false }, ['batchScores'], () => ({ jobId, step: s, batchRows: rows.length })),
        );
        gradient = new Float64Array(rows.length);
        for (let k = 0; k < rows.length; k++) {
          let sum = 0;
          for (const r of replies) sum += r.scores[k];
          gradient[k] = loss.deriv(y[rows[k]], sum);
        }
        assertFinite(`SGD step ${s}`, 'gradient', gradient);
      }
      step++;
      const shares = await Promise.all(
        parties.requestAll({ type: 'sgd', jobId, step, epoch, lr, gradient, rows: new Uint32Array(0), full: true }, ['share'], () => ({ jobId, n, round: epoch })),
      );
      gradient = new Float64Array(0);
      const sum = new Float64Array(n);
      for (const s of shares) for (let i = 0; i < n; i++) sum[i] += s.share[i];
      objective = meanLoss(loss, y, sum) + (job.setup.lambda / 2) * shares.reduce((a, s) => a + s.penaltySq, 0);
      metrics = evaluatesAt(job, epoch, epoch === maxEpochs, cfg.evalEvery) ? await evaluate(job, parties, epoch) : undefined;
      const now = performance.now();
      trace.write({
        round: epoch,
        epoch,
        objective,
        lr,
        steps: step,
        seconds: (now - trainStart) / 1000,
        roundSeconds: (now - epochStart) / 1000,
        bytes: trafficSince(traffic, before),
        ...(metrics ? { test: metrics } : {}),
      });
    }
    completed = true;
  } finally {
    trace.close(completed);
  }
  return {
    algorithm: 'sgd',
    reason: 'max-rounds',
    rounds: maxEpochs,
    objective,
    metrics,
    trainingSeconds: (performance.now() - trainStart) / 1000,
    epsilonSpent: Object.fromEntries(parties.list.map((p) => [p.id, 0])),
    params: { variant: 'sgd', rho: 0 },
  };
}
