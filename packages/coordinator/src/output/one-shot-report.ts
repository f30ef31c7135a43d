/** What a one-shot job adds to its summary (summary.json's `oneShot`), as the one-shot loop reports it. */
import { z } from '@admm-share/core';
import { nameSchema as name } from './fields.js';
import { testMetricsSchema } from './test-metrics.js';

/** What a one-shot job adds to its summary: the combination and the comparisons the user decides on. */
export const oneShotReportSchema = z.strictObject({
  /** The label holder's own party, or null when every party is passive. */
  activeParty: name.nullable(),
  /** The combined model's weight on each passive party's clipped score. */
  weights: z.record(name, z.number()),
  /** Without an active party, the combination's intercept (fitted by the coordinator); null with one (its part holds it). */
  intercept: z.number().nullable(),
  /** The active party's local-only model (fitted by it on its own features, no extra release). */
  local: z.strictObject({ party: name, objective: z.number(), test: testMetricsSchema.optional() }).nullable(),
  /** Predicting the training labels' base rate for every test row. */
  baseline: testMetricsSchema.optional(),
  /** The comparisons that went against the private model, in words. */
  warnings: z.array(z.string()),
});
export type OneShotReport = z.output<typeof oneShotReportSchema>;

