// The report's figures against direct computations: KS by trying every threshold, AUC by
// counting pairs, the ROC area by the trapezoid rule over the curve, gains and calibration by
// sorting and counting by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import seedrandom from 'seedrandom';
import { calibrationBins, classificationReport, gainsChart, ksStatistic, partContributions, regressionMetrics, rocCurve, thinCurve } from '../index.js';
import { pairAuc } from './support.js';

const f = (xs: number[]) => Float64Array.from(xs);
const close = (a: number, b: number, tol = 1e-12, what = '') => assert.ok(Math.abs(a - b) <= tol, `${what} ${a} vs ${b}`);

/** Rates when every row with score >= t is called positive, for every t among the scores. */
function bruteKs(s: Float64Array, y: Float64Array): number {
  const nPos = y.filter((v) => v > 0).length;
  const nNeg = y.length - nPos;
  let best = 0;
  for (const t of s) {
    let tp = 0;
    let fp = 0;
    for (let i = 0; i < s.length; i++) if (s[i] >= t) (y[i] > 0 ? tp++ : fp++);
    best = Math.max(best, Math.abs(tp / nPos - fp / nNeg));
  }
  return best;
}

function randomSet(seed: string, n: number, ties: boolean): { s: Float64Array; y: Float64Array } {
  const rng = seedrandom(seed);
  const y = Float64Array.from({ length: n }, () => (rng() < 0.3 ? 1 : -1));
  const s = Float64Array.from(y, (v) => {
    const raw = v * 0.8 + 2 * (rng() - 0.5) * 2;
    return ties ? Math.round(raw * 2) / 2 : raw;
  });
  return { s, y };
}

test('rocCurve and KS: hand-computed case with a tie', () => {
  // Scores 3 (+), 2 (-), 2 (+), 1 (+), 0 (-). Positives 3, negatives 2.
  // Thresholds: 3 -> tp 1, fp 0; 2 -> tp 2, fp 1; 1 -> tp 3, fp 1; 0 -> tp 3, fp 2.
  const curve = rocCurve(f([3, 2, 2, 1, 0]), f([1, -1, 1, 1, -1]));
  assert.deepEqual(
    curve.map((p) => [p.fpr, p.tpr, p.threshold]),
    [[0, 0, Infinity], [0, 1 / 3, 3], [0.5, 2 / 3, 2], [0.5, 1, 1], [1, 1, 0]],
  );
  // |tpr - fpr|: 1/3, 1/6, 1/2, 0: the maximum at threshold 1.
  assert.deepEqual(ksStatistic(curve), { ks: 0.5, threshold: 1 });
  assert.deepEqual(rocCurve(f([1, 2]), f([1, 1])), []);
});

test('ROC, KS and AUC agree with the brute force on random data, with and without ties', () => {
  for (const ties of [false, true]) {
    const { s, y } = randomSet(`roc-${ties}`, 300, ties);
    const curve = rocCurve(s, y);
    let area = 0;
    for (let i = 1; i < curve.length; i++) area += ((curve[i].fpr - curve[i - 1].fpr) * (curve[i].tpr + curve[i - 1].tpr)) / 2;
    const r = classificationReport(s, y);
    close(area, pairAuc(s, y), 1e-12, 'trapezoid area');
    close(r.auc, pairAuc(s, y), 1e-12, 'auc');
    close(r.gini, 2 * pairAuc(s, y) - 1, 1e-12, 'gini');
    close(r.ks, bruteKs(s, y), 1e-12, 'ks');
    close(r.ksProbability, 1 / (1 + Math.exp(-r.ksThreshold)), 1e-12, 'ks probability');
    let ll = 0;
    let ok = 0;
    for (let i = 0; i < y.length; i++) {
      const p = 1 / (1 + Math.exp(-s[i]));
      ll -= y[i] > 0 ? Math.log(p) : Math.log(1 - p);
      if ((p > 0.5) === y[i] > 0) ok++;
    }
    close(r.logLoss, ll / y.length, 1e-12, 'log loss');
    close(r.accuracy, ok / y.length, 0, 'accuracy');
  }
});

test('thinCurve keeps both ends, at most about maxPoints points, and a curve already short as it is', () => {
  const { s, y } = randomSet('thin', 2000, false);
  const curve = rocCurve(s, y);
  const thin = thinCurve(curve, 50);
  assert.ok(thin.length <= 52 && thin.length > 10, `${thin.length} points`);
  assert.deepEqual(thin[0], curve[0]);
  assert.deepEqual(thin.at(-1), curve.at(-1));
  assert.deepEqual(thinCurve(curve.slice(0, 5), 50), curve.slice(0, 5));
});

test('gainsChart and calibrationBins: counted by hand after sorting', () => {
  const { s, y } = randomSet('gains', 237, false);
  const idx = Array.from(s.keys()).sort((a, b) => s[b] - s[a]);
  const nPos = y.filter((v) => v > 0).length;
  const gains = gainsChart(s, y);
  assert.equal(gains.length, 10);
  for (let k = 1; k <= 10; k++) {
    const top = Math.floor((k * 237) / 10);
    const captured = idx.slice(0, top).filter((i) => y[i] > 0).length / nPos;
    close(gains[k - 1].population, top / 237, 0);
    close(gains[k - 1].captured, captured, 1e-15);
    close(gains[k - 1].lift, captured / (top / 237), 1e-12);
  }
  assert.equal(gains.at(-1)!.captured, 1);
  const cal = calibrationBins(s, y);
  const asc = idx.slice().reverse();
  assert.equal(cal.reduce((a, b) => a + b.rows, 0), 237);
  let from = 0;
  for (const bin of cal) {
    const rows = asc.slice(from, from + bin.rows);
    from += bin.rows;
    close(bin.meanPredicted, rows.reduce((a, i) => a + 1 / (1 + Math.exp(-s[i])), 0) / rows.length, 1e-12);
    close(bin.observedRate, rows.filter((i) => y[i] > 0).length / rows.length, 1e-15);
  }
  // Predicted probabilities rise bin by bin.
  for (let k = 1; k < cal.length; k++) assert.ok(cal[k].meanPredicted >= cal[k - 1].meanPredicted);
});

test('regressionMetrics: a hand-computed case', () => {
  // errors 1, -1, 2, 0; y mean 2.5, sst = 2.25 + 0.25 + 0.25 + 2.25 = 5; sse = 6.
  const r = regressionMetrics(f([0, 3, 1, 4]), f([1, 2, 3, 4]));
  close(r.rmse, Math.sqrt(6 / 4));
  close(r.mae, 1);
  close(r.r2, 1 - 6 / 5);
  assert.ok(Number.isNaN(regressionMetrics(f([1, 2]), f([3, 3])).r2));
});

test('partContributions: a part of zeros adds nothing; the informative part adds its AUC over the rest', () => {
  const { s, y } = randomSet('parts', 400, false);
  const rng = seedrandom('noise');
  const noise = Float64Array.from(s, () => rng() - 0.5);
  const zero = new Float64Array(s.length);
  const total = Float64Array.from(s, (v, i) => v + noise[i]);
  const [informative, noisy, none] = partContributions('logistic', total, [s, noise, zero], y);
  close(none.contribution, 0, 0);
  close(informative.without, pairAuc(noise, y), 1e-12);
  close(informative.contribution, pairAuc(total, y) - pairAuc(noise, y), 1e-12);
  close(noisy.without, pairAuc(s, y), 1e-12);
  assert.ok(informative.contribution > 0.2, `${informative.contribution}`);
  const yr = Float64Array.from(s, (v) => 2 * v + 1);
  const [reg] = partContributions('squared', total, [noise], yr);
  close(reg.contribution, regressionMetrics(total, yr).r2 - regressionMetrics(s, yr).r2, 1e-12);
});
