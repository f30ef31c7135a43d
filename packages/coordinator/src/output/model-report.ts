/**
 * The model report of a job with test labels (report.json, declared once here as a schema, and
 * test-scores.csv, what it is computed from): the figures of the combined test scores and each
 * party's contribution, the AUC (R^2 for squared loss) lost when its part is left out. Built
 * from what the coordinator holds at the end of a job, the combined test score and each party's
 * part of it; never a party's coefficients, which the coordinator does not receive.
 * report-page.ts draws report.html from the same figures.
 */
import { join } from 'node:path';
import { type FileFormat, DataError, classificationReport, detectFormat, nullAsNaN, partContributions, readJsonFile, readCsv, regressionMetrics, writeFileAtomic, z, csvField } from '@admm-share/core';
import { ALGORITHMS, LOSSES, type AlgorithmName, type LossName } from '@admm-share/protocol';
import { classesSchema, nameSchema as name } from './fields.js';

export const REPORT_FILE = 'report.json';
export const REPORT_PAGE = 'report.html';
export const TEST_SCORES_FILE = 'test-scores.csv';
export const REPORT_FORMAT = 'admm-share-model-report/1';

/**
 * A party whose part moves the test AUC (or R^2) by less than this adds nothing measurable:
 * 0.001 is below the AUC's own sampling error on any test set under about a million rows
 * (its standard error is at least about 1/(2 sqrt(n))), so a smaller loss is noise.
 */
export const CONTRIBUTION_THRESHOLD = 0.001;

/**
 * A passive party's one-shot combination weight is ~0 when it is below this share of the
 * largest of 1 and the other passive parties' weights: its clipped score (at most a few
 * units of log-odds) then moves the combined log-odds by thousandths.
 */
export const WEIGHT_THRESHOLD = 0.001;

/** What the report is computed from: the combined test score of every aligned test row and each party's part of it (score = sum of parts + any coordinator intercept). */
export interface TestScores {
  /** The label file's id column name (the first column of test-scores.csv). */
  idColumn: string;
  ids: string[];
  /** +-1 for logistic loss, raw numbers for squared loss. */
  y: Float64Array;
  total: Float64Array;
  parts: { party: string; scores: Float64Array }[];
}

const figure = nullAsNaN(z.number());
const point = <T extends z.ZodRawShape>(shape: T) => z.array(z.strictObject(shape));

export const modelReportSchema = z.strictObject({
  format: z.literal(REPORT_FORMAT),
  jobId: name,
  algorithm: z.enum(ALGORITHMS),
  loss: z.enum(LOSSES),
  classes: classesSchema,
  rows: z.int().min(0),
  /** Test rows of the positive class (logistic loss); null for squared loss. */
  positives: z.int().min(0).nullable(),
  /** Logistic loss: the classification figures; accuracy at probability 0.5 (score 0). */
  classification: z
    .strictObject({
      auc: figure,
      gini: figure,
      ks: figure,
      /** The score (log-odds) and probability where KS is reached. */
      ksThreshold: figure,
      ksProbability: figure,
      logLoss: figure,
      accuracy: figure,
      threshold: z.literal(0.5),
      roc: point({ fpr: z.number(), tpr: z.number() }),
      calibration: point({ meanPredicted: z.number(), observedRate: z.number(), rows: z.int().min(1) }),
      gains: point({ population: z.number(), captured: z.number(), lift: z.number() }),
    })
    .nullable(),
  /** Squared loss: RMSE, MAE and R^2; null for logistic loss. */
  regression: z.strictObject({ rmse: figure, mae: figure, r2: figure }).nullable(),
  /** Each party's contribution: the figure ('auc' or 'r2') of the whole score minus that without its part. */
  contributions: z.array(z.strictObject({ party: name, figure: z.enum(['auc', 'r2']), without: figure, contribution: figure })),
  contributionThreshold: z.number(),
  /** What the report says in words: parties that add nothing measurable. */
  warnings: z.array(z.string()),
  /** The file the figures are computed from, in the same folder. */
  scores: z.literal(TEST_SCORES_FILE),
});
export type ModelReport = z.output<typeof modelReportSchema>;

/** What a report says of the job it describes. */
export interface ReportJob {
  jobId: string;
  algorithm: AlgorithmName;
  loss: LossName;
  classes: { negative: string; positive: string } | null;
}

/** The report's figures from the test scores; the same input gives the same report, byte for byte once written. */
export function buildModelReport(job: ReportJob, s: TestScores): ModelReport {
  const parts = s.parts.map((p) => p.scores);
  const logistic = job.loss === 'logistic';
  const c = logistic ? classificationReport(s.total, s.y) : undefined;
  const figureName = logistic ? ('auc' as const) : ('r2' as const);
  const contributions = partContributions(job.loss, s.total, parts, s.y).map((r, m) => ({ party: s.parts[m].party, figure: figureName, ...r }));
  return {
    format: REPORT_FORMAT,
    ...job,
    rows: s.y.length,
    positives: logistic ? s.y.reduce((k, v) => k + (v > 0 ? 1 : 0), 0) : null,
    classification: c
      ? {
          auc: c.auc,
          gini: c.gini,
          ks: c.ks,
          ksThreshold: c.ksThreshold,
          ksProbability: c.ksProbability,
          logLoss: c.logLoss,
          accuracy: c.accuracy,
          threshold: 0.5,
          roc: c.roc.map((p) => ({ fpr: p.fpr, tpr: p.tpr })),
          calibration: c.calibration,
          gains: c.gains,
        }
      : null,
    regression: logistic ? null : regressionMetrics(s.total, s.y),
    contributions,
    contributionThreshold: CONTRIBUTION_THRESHOLD,
    warnings: contributionWarnings(contributions),
    scores: TEST_SCORES_FILE,
  };
}

/**
 * Parties whose part adds less than CONTRIBUTION_THRESHOLD (or makes the model worse), in words.
 * None when the figure is undefined (a test set of one class has no AUC, constant labels no R^2).
 */
export function contributionWarnings(contributions: ModelReport['contributions']): string[] {
  if (contributions.length < 2) return [];
  return contributions
    .filter((c) => Number.isFinite(c.contribution) && c.contribution < CONTRIBUTION_THRESHOLD)
    .map(
      (c) =>
        `party ${c.party}'s part adds ${c.contribution.toFixed(3)} ${c.figure === 'auc' ? 'AUC' : 'R^2'} on the test rows ` +
        `(its weight or scores contribute nothing measurable: below ${CONTRIBUTION_THRESHOLD}; the model without it scores ${c.without.toFixed(4)})`,
    );
}

/** One-shot without test labels: passive parties whose combination weight is ~0 next to the others' (WEIGHT_THRESHOLD), in words. */
export function weightWarnings(weights: Record<string, number>): string[] {
  const entries = Object.entries(weights);
  return entries
    .filter(([party, w]) => {
      const others = Math.max(1, ...entries.filter(([p]) => p !== party).map(([, v]) => Math.abs(v)));
      return !(Math.abs(w) >= WEIGHT_THRESHOLD * others);
    })
    .map(([party, w]) => `party ${party}'s release has combination weight ${w.toExponential(2)}: it adds nothing measurable to the model (below ${WEIGHT_THRESHOLD} of the largest other weight); give test labels to measure its contribution`);
}

/** The name a file of ids gives its id column (kept in test-scores.csv and predictions.csv): a CSV's --id-column; ids from a LIBSVM file have none, so 'id'. */
export function idColumnName(file: string, opts: { format?: FileFormat; idColumn?: string }): string {
  return detectFormat(file, opts.format) === 'csv' ? (opts.idColumn ?? 'id') : 'id';
}

/** test-scores.csv: the user's id column, the label (+1/-1 for logistic loss: +1 the positive class), the combined score (log-odds) and each party's part. */
export function formatTestScores(s: TestScores): string {
  const lines = [[csvField(s.idColumn), 'label', 'score', ...s.parts.map((p) => p.party)].join(',')];
  for (let i = 0; i < s.ids.length; i++) lines.push([csvField(s.ids[i]), s.y[i], s.total[i], ...s.parts.map((p) => p.scores[i])].join(','));
  return lines.join('\n') + '\n';
}

/** Read test-scores.csv back (core's CSV reader); a DataError names the line and what is wrong. */
export function readTestScores(path: string): TestScores {
  let head: string[] = [];
  const ids: string[] = [];
  const columns: number[][] = [];
  readCsv(path, undefined, (h) => {
    head = h.names;
    if (head.length < 3 || head[1] !== 'label' || head[2] !== 'score') throw new DataError(path, h.line, `expected the header 'ID,label,score,PARTY...', got '${head.join(',').slice(0, 80)}'`);
    head.slice(1).forEach(() => columns.push([]));
    return (fields, line) => {
      ids.push(fields[0]);
      columns.forEach((c, k) => {
        const v = Number(fields[k + 1]);
        if (fields[k + 1] === '' || !Number.isFinite(v)) throw new DataError(path, line, `column '${head[k + 1]}': '${fields[k + 1].slice(0, 40)}' is not a finite number`);
        c.push(v);
      });
    };
  });
  const [y, total, ...parts] = columns.map((c) => Float64Array.from(c));
  return { idColumn: head[0], ids, y, total, parts: parts.map((scores, m) => ({ party: head[3 + m], scores })) };
}

export function formatModelReport(report: ModelReport): string {
  return JSON.stringify(report, null, 2) + '\n';
}

/** Write test-scores.csv and report.json atomically into `dir`. */
export function writeModelReportFiles(dir: string, report: ModelReport, scores: TestScores): void {
  writeFileAtomic(join(dir, TEST_SCORES_FILE), formatTestScores(scores));
  writeFileAtomic(join(dir, REPORT_FILE), formatModelReport(report));
}

/** Read report.json back, every field checked. */
export function readModelReport(path: string): ModelReport {
  return readJsonFile(modelReportSchema, path, 'model report');
}
