/**
 * --local-baseline: {"party": ID, "objective": number, "test": {"logLoss", "accuracy", "auc",
 * "rmse" (any of them)} or null}, the figures of a model on the label holder's own features,
 * fitted outside the job (`admm-share simulate` writes it) and shown beside the job's.
 */
import { readJsonFile, z } from '@admm-share/core';
import { nameSchema } from './fields.js';
import { testMetricsSchema } from './test-metrics.js';

export const localBaselineSchema = z.strictObject({
  party: nameSchema,
  objective: z.number(),
  test: testMetricsSchema.nullish().transform((t) => t ?? null),
});
/** A model on one party's features alone: its training objective and its test metrics. */
export type LocalBaseline = z.output<typeof localBaselineSchema>;

export function readLocalBaseline(path: string): LocalBaseline {
  return readJsonFile(localBaselineSchema, path, 'local baseline');
}
