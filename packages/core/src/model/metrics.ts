import { log1pExpNeg } from './losses.js';

export interface ClassificationMetrics {
  logLoss: number;
  accuracy: number;
  auc: number;
}

/** Mean logistic loss of scores (log-odds) against labels in {-1, +1}. */
export function logLoss(scores: Float64Array, y: Float64Array): number {
  let acc = 0;
  for (let i = 0; i < y.length; i++) acc += log1pExpNeg(y[i] * scores[i]);
  return acc / y.length;
}

/** Share of samples whose score has the label's sign (score > 0 predicts +1). */
export function accuracy(scores: Float64Array, y: Float64Array): number {
  let ok = 0;
  for (let i = 0; i < y.length; i++) if ((scores[i] > 0 ? 1 : -1) === y[i]) ok++;
  return ok / y.length;
}

/**
 * ROC AUC as the Mann-Whitney statistic: the probability that a random positive
 * scores above a random negative, ties counting one half. NaN with one class only.
 */
export function rocAuc(scores: Float64Array, y: Float64Array): number {
  const n = y.length;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[a] - scores[b]);
  let rankSumPos = 0;
  let nPos = 0;
  for (let i = 0; i < n; ) {
    let j = i;
    while (j + 1 < n && scores[order[j + 1]] === scores[order[i]]) j++;
    const avgRank = (i + j) / 2 + 1; // ranks are 1-based
    for (let k = i; k <= j; k++) {
      if (y[order[k]] > 0) {
        rankSumPos += avgRank;
        nPos++;
      }
    }
    i = j + 1;
  }
  const nNeg = n - nPos;
  if (nPos === 0 || nNeg === 0) return NaN;
  return (rankSumPos - (nPos * (nPos + 1)) / 2) / (nPos * nNeg);
}

export function classificationMetrics(scores: Float64Array, y: Float64Array): ClassificationMetrics {
  return { logLoss: logLoss(scores, y), accuracy: accuracy(scores, y), auc: rocAuc(scores, y) };
}
