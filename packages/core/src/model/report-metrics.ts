/**
 * The figures of a model report (what a credit-risk team reports for a scorecard): the ROC
 * curve, Gini, the Kolmogorov-Smirnov statistic, calibration by deciles, cumulative gains and
 * lift, and for squared loss RMSE, MAE and R^2; and each part's contribution, the figure lost
 * when that part is left out of the score. Scores are log-odds and labels +-1 for logistic loss
 * (as in metrics.ts); raw numbers for squared loss.
 */
import { accuracy, logLoss, rocAuc } from './metrics.js';
import { sigmoidNeg } from './losses.js';

/** The probability of the positive class for a log-odds score. */
export function probabilityOf(score: number): number {
  return sigmoidNeg(-score);
}

/** One point of the ROC curve: the rates when every row scoring at least `threshold` is called positive. */
export interface RocPoint {
  fpr: number;
  tpr: number;
  /** +Infinity for the origin (nothing called positive). */
  threshold: number;
}

/** Row indices by score, highest first; ties keep row order (so gains are reproducible). */
function byScoreDescending(scores: Float64Array): number[] {
  return Array.from({ length: scores.length }, (_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b);
}

function positives(y: Float64Array): number {
  let k = 0;
  for (let i = 0; i < y.length; i++) if (y[i] > 0) k++;
  return k;
}

/**
 * The ROC curve, one point per distinct score (tied rows move together), from (0, 0) to (1, 1).
 * Empty when the labels hold one class only (the rates are undefined).
 */
export function rocCurve(scores: Float64Array, y: Float64Array): RocPoint[] {
  const nPos = positives(y);
  const nNeg = y.length - nPos;
  if (nPos === 0 || nNeg === 0) return [];
  const order = byScoreDescending(scores);
  const points: RocPoint[] = [{ fpr: 0, tpr: 0, threshold: Infinity }];
  let tp = 0;
  let fp = 0;
  for (let i = 0; i < order.length; ) {
    const s = scores[order[i]];
    for (; i < order.length && scores[order[i]] === s; i++) {
      if (y[order[i]] > 0) tp++;
      else fp++;
    }
    points.push({ fpr: fp / nNeg, tpr: tp / nPos, threshold: s });
  }
  return points;
}

/**
 * At most about `maxPoints` points of a monotone curve for a plot: a point is kept once it is
 * 2/maxPoints away (in |dfpr| + |dtpr|) from the last kept one; the ends are always kept.
 * An ROC curve's whole length in that distance is at most 2.
 */
export function thinCurve<T extends { fpr: number; tpr: number }>(points: readonly T[], maxPoints: number): T[] {
  if (points.length <= maxPoints) return points.slice();
  const step = 2 / maxPoints;
  const out = [points[0]];
  for (let i = 1; i < points.length - 1; i++) {
    const last = out[out.length - 1];
    if (Math.abs(points[i].fpr - last.fpr) + Math.abs(points[i].tpr - last.tpr) >= step) out.push(points[i]);
  }
  out.push(points[points.length - 1]);
  return out;
}

/** The Kolmogorov-Smirnov statistic: the largest |TPR - FPR| over the thresholds, and the score threshold where it is reached (the first). */
export function ksStatistic(curve: readonly RocPoint[]): { ks: number; threshold: number } {
  let best = { ks: 0, threshold: NaN };
  for (const p of curve) {
    const d = Math.abs(p.tpr - p.fpr);
    if (d > best.ks) best = { ks: d, threshold: p.threshold };
  }
  return best;
}

/** One bin of the calibration plot: its rows' mean predicted probability against the share of them that are positive. */
export interface CalibrationBin {
  meanPredicted: number;
  observedRate: number;
  rows: number;
}

/** Bin k (of `bins`) holds the sorted rows [floor(k n / bins), floor((k + 1) n / bins)); empty bins are left out. */
function binEdges(n: number, bins: number): number[] {
  return Array.from({ length: bins + 1 }, (_, k) => Math.floor((k * n) / bins));
}

/** Calibration by quantile bins of the predicted probability (deciles by default), lowest first. */
export function calibrationBins(scores: Float64Array, y: Float64Array, bins = 10): CalibrationBin[] {
  const order = byScoreDescending(scores).reverse();
  const edges = binEdges(order.length, bins);
  const out: CalibrationBin[] = [];
  for (let k = 0; k < bins; k++) {
    const [from, to] = [edges[k], edges[k + 1]];
    if (to === from) continue;
    let p = 0;
    let pos = 0;
    for (let i = from; i < to; i++) {
      p += probabilityOf(scores[order[i]]);
      if (y[order[i]] > 0) pos++;
    }
    out.push({ meanPredicted: p / (to - from), observedRate: pos / (to - from), rows: to - from });
  }
  return out;
}

/** One point of the cumulative gains chart: the top `population` share of rows by score holds `captured` of the positives; lift is their ratio. */
export interface GainsPoint {
  population: number;
  captured: number;
  lift: number;
}

/** Cumulative gains and lift at each decile (by default) of the rows ranked by score, highest first. Empty with no positive row. */
export function gainsChart(scores: Float64Array, y: Float64Array, bins = 10): GainsPoint[] {
  const nPos = positives(y);
  if (nPos === 0 || y.length === 0) return [];
  const order = byScoreDescending(scores);
  const edges = binEdges(order.length, bins);
  const out: GainsPoint[] = [];
  let pos = 0;
  for (let k = 1; k <= bins; k++) {
    for (let i = edges[k - 1]; i < edges[k]; i++) if (y[order[i]] > 0) pos++;
    if (edges[k] === edges[k - 1]) continue;
    const population = edges[k] / order.length;
    const captured = pos / nPos;
    out.push({ population, captured, lift: captured / population });
  }
  return out;
}

/** RMSE, MAE and R^2 of scores as predictions of real labels (squared loss). R^2 is NaN when the labels are constant. */
export function regressionMetrics(scores: Float64Array, y: Float64Array): { rmse: number; mae: number; r2: number } {
  const n = y.length;
  let mean = 0;
  for (let i = 0; i < n; i++) mean += y[i] / n;
  let sse = 0;
  let sae = 0;
  let sst = 0;
  for (let i = 0; i < n; i++) {
    const e = y[i] - scores[i];
    sse += e * e;
    sae += Math.abs(e);
    sst += (y[i] - mean) ** 2;
  }
  return { rmse: Math.sqrt(sse / n), mae: sae / n, r2: sst > 0 ? 1 - sse / sst : NaN };
}

/** The figures of a classification report, from the combined test scores. */
export interface ClassificationReport {
  auc: number;
  gini: number;
  ks: number;
  /** The score (log-odds) where KS is reached, and its probability. */
  ksThreshold: number;
  ksProbability: number;
  logLoss: number;
  /** At probability 0.5 (score 0). */
  accuracy: number;
  roc: RocPoint[];
  calibration: CalibrationBin[];
  gains: GainsPoint[];
}

/** Every figure of the classification report; the ROC curve thinned to about `maxRocPoints` points. */
export function classificationReport(scores: Float64Array, y: Float64Array, maxRocPoints = 200): ClassificationReport {
  const auc = rocAuc(scores, y);
  const roc = rocCurve(scores, y);
  const ks = ksStatistic(roc);
  return {
    auc,
    gini: 2 * auc - 1,
    ks: ks.ks,
    ksThreshold: ks.threshold,
    ksProbability: probabilityOf(ks.threshold),
    logLoss: logLoss(scores, y),
    accuracy: accuracy(scores, y),
    roc: thinCurve(roc, maxRocPoints),
    calibration: calibrationBins(scores, y),
    gains: gainsChart(scores, y),
  };
}

/**
 * Each part's contribution: the figure (AUC for logistic loss, R^2 for squared) of the whole
 * score minus that of the score with the part taken out, `without` being the latter. A part
 * that adds nothing measurable has a contribution near 0 (or below it).
 */
export function partContributions(loss: 'logistic' | 'squared', total: Float64Array, parts: readonly Float64Array[], y: Float64Array): { without: number; contribution: number }[] {
  const figure = (s: Float64Array) => (loss === 'logistic' ? rocAuc(s, y) : regressionMetrics(s, y).r2);
  const whole = figure(total);
  return parts.map((part) => {
    if (part.length !== total.length) throw new RangeError(`a part of ${part.length} scores against ${total.length} in total`);
    const rest = Float64Array.from(total, (t, i) => t - part[i]);
    const without = figure(rest);
    return { without, contribution: whole - without };
  });
}
