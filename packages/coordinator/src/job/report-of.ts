/**
 * The model report at the end of a job (output/model-report.ts, output/report-page.ts): from
 * the last evaluation's test scores, each party's part and the test labels; and the warnings
 * it adds to the summary (a party that contributes nothing measurable; without test labels, a
 * one-shot passive party whose weight is ~0).
 */
import type { Logger } from 'pino';
import { type ModelReport, type TestScores, buildModelReport, idColumnName, weightWarnings, writeModelReportFiles } from '../output/model-report.js';
import { writeModelReportPage } from '../output/report-page.js';
import type { Summary } from '../output/summary.js';
import { lastTestParts } from '../training/evaluation.js';
import type { LabelOptions } from './labels.js';
import type { Job } from './job.js';

export interface JobReport {
  report: ModelReport;
  scores: TestScores;
}

/** The report of a job that evaluated, from its last evaluation; undefined without one. */
export function reportOf(job: Job, summary: Summary, testIds: readonly string[] | undefined, testLabelFile: string | undefined, labelOptions: LabelOptions): JobReport | undefined {
  const evaluated = lastTestParts(job);
  if (!evaluated || !job.yTest || !testIds || !testLabelFile) return undefined;
  const total = new Float64Array(job.nTest);
  const add = (v: Float64Array) => v.forEach((x, i) => (total[i] += x));
  if (evaluated.base) add(evaluated.base);
  evaluated.parts.forEach(add);
  const idColumn = idColumnName(testLabelFile, labelOptions);
  const scores: TestScores = {
    idColumn,
    ids: Array.from(job.labelRows.test, (r) => testIds[r]),
    y: job.yTest,
    total,
    parts: evaluated.parties.map((party, m) => ({ party, scores: evaluated.parts[m] })),
  };
  return { report: buildModelReport({ jobId: summary.jobId, algorithm: summary.algorithm, loss: summary.loss, classes: summary.classes }, scores), scores };
}

/** What the summary's `warnings` get from the report, or without one from a one-shot job's weights. */
export function reportWarnings(summary: Pick<Summary, 'oneShot'>, report: JobReport | undefined): string[] {
  if (report) return report.report.warnings;
  return summary.oneShot ? weightWarnings(summary.oneShot.weights) : [];
}

/** Write test-scores.csv, report.json and report.html; a page that cannot be drawn is logged, not fatal (the figures are written first). */
export async function writeJobReport(dir: string, r: JobReport, log: Logger): Promise<void> {
  writeModelReportFiles(dir, r.report, r.scores);
  try {
    const page = await writeModelReportPage(dir, r.report);
    log.info({ page, auc: r.report.classification?.auc, r2: r.report.regression?.r2 }, 'model report written');
  } catch (err) {
    log.error({ err: (err as Error).message }, 'report.html could not be drawn; report.json and test-scores.csv are written (admm-share report draws the page again)');
  }
}
