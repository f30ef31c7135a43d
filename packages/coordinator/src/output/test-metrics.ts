/**
 * The test metrics every output file and line carries (summary, trace, job.json, predictions),
 * declared once: how they are computed from scores and how they are read back.
 */
import { classificationMetrics, lossByName, meanLoss, nullAsNaN, z } from '@admm-share/core';
import type { LossName } from '@admm-share/protocol';

/** A metric as written: the AUC of a test set with one class is NaN (null in the file). */
const metric = (max?: number) => nullAsNaN(max === undefined ? z.number().min(0) : z.number().min(0).max(max));

export const testMetricsSchema = z.strictObject({ logLoss: metric().optional(), accuracy: metric(1).optional(), auc: metric(1).optional(), rmse: metric().optional() });
export type TestMetrics = z.output<typeof testMetricsSchema>;

/** The metrics of the model's scores against the labels: log loss, accuracy and AUC, or RMSE for squared loss. */
export function testMetrics(loss: LossName, scores: Float64Array, y: Float64Array): TestMetrics {
  if (loss === 'logistic') return classificationMetrics(scores, y);
  return { rmse: Math.sqrt(2 * meanLoss(lossByName('squared'), y, scores)) };
}
