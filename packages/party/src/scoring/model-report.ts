/**
 * A party's own model report, written next to its model at the end of training
 * (model-ID.report.json and model-ID.report.html): its coefficient table only, with names, odds
 * ratios (logistic loss: exp(coefficient), the factor on the odds per unit of the column as the
 * model sees it) and the intercept if its part has one. With the preparation's per-column
 * information (standardisation: centre and scale, the original column and kind of a one-hot or
 * indicator column), the table adds the coefficient per original unit and its odds ratio.
 * No other party's figures: each party sees only its own part.
 */
import type { Logger } from 'pino';
import { readJsonFile, writeFileAtomic, z } from '@admm-share/core';
import { escapeHtml, formatNumber, htmlPage, htmlTable } from '@admm-share/runtime';
import { type PartyModel, readPartyModel } from './model-file.js';

export const PARTY_REPORT_FORMAT = 'admm-share-party-report/1';

/** What the preparation says of one coefficient (all optional: a column without preparation has none of it). */
export interface CoefficientUnits {
  name: string;
  /** The user's column it comes from (a one-hot column's source, a standardised column's own name). */
  original?: string | null;
  /** e.g. 'numeric', 'one-hot', 'indicator'. */
  kind?: string | null;
  /** The coefficient per unit of the original column (coefficient / scale for a standardised one). */
  perUnit?: number | null;
  center?: number | null;
  scale?: number | null;
}

/** The preparation's description of every coefficient, in order (core's originalUnits gives it), and the constant it adds to the intercept. */
export interface OriginalUnits {
  columns: readonly CoefficientUnits[];
  offset?: number | null;
}

/** The model fields the report reads (a model file as readPartyModel returns it has them all). */
export type ReportedModel = Pick<PartyModel, 'jobId' | 'partyId' | 'role' | 'loss' | 'labels' | 'featureNames' | 'coefficients' | 'intercept' | 'scoreClip' | 'preprocessing'>;

const num = z.number().nullable();
export const partyReportSchema = z.strictObject({
  format: z.literal(PARTY_REPORT_FORMAT),
  jobId: z.string(),
  partyId: z.string(),
  role: z.string(),
  loss: z.string(),
  /** Logistic loss: the class whose odds the odds ratios multiply. */
  positiveClass: z.string().nullable(),
  rowScaling: z.boolean(),
  scoreClip: num,
  intercept: num,
  /** Whether any coefficient carries original-unit information. */
  originalUnits: z.boolean(),
  /** What the preparation's centring adds to the intercept when the coefficients are taken per original unit (the constant is then intercept + offset), when given. */
  offset: num,
  coefficients: z.array(
    z.strictObject({
      name: z.string(),
      coefficient: z.number(),
      /** exp(coefficient), logistic loss only. */
      oddsRatio: num,
      original: z.string().nullable(),
      kind: z.string().nullable(),
      center: num,
      scale: num,
      perUnit: num,
      /** exp(perUnit), logistic loss only. */
      oddsRatioPerUnit: num,
    }),
  ),
});
export type PartyReport = z.output<typeof partyReportSchema>;

/** model-p1.json -> model-p1.report.json and model-p1.report.html */
export function partyReportPaths(model: string): { json: string; html: string } {
  const base = model.replace(/(\.json)?$/, '');
  return { json: `${base}.report.json`, html: `${base}.report.html` };
}

/** The report's figures; `original`, when given, describes every coefficient, in order. */
export function partyReport(m: ReportedModel, original?: OriginalUnits): PartyReport {
  const units = original?.columns;
  if (units && units.length !== m.coefficients.length) throw new RangeError(`${units.length} unit descriptions for ${m.coefficients.length} coefficients`);
  const logistic = m.loss === 'logistic';
  const odds = (v: number | null | undefined) => (logistic && v !== undefined && v !== null ? Math.exp(v) : null);
  return {
    format: PARTY_REPORT_FORMAT,
    jobId: m.jobId,
    partyId: m.partyId,
    role: m.role,
    loss: m.loss,
    positiveClass: logistic ? (m.labels?.positive ?? null) : null,
    rowScaling: m.preprocessing.rowScaling,
    scoreClip: m.scoreClip,
    intercept: m.intercept,
    originalUnits: units !== undefined && units.some((u) => u.perUnit !== undefined && u.perUnit !== null),
    offset: original?.offset ?? null,
    coefficients: m.coefficients.map((coefficient, j) => {
      const u = units?.[j];
      return {
        name: u?.name ?? m.featureNames[j],
        coefficient,
        oddsRatio: odds(coefficient),
        original: u?.original ?? null,
        kind: u?.kind ?? null,
        center: u?.center ?? null,
        scale: u?.scale ?? null,
        perUnit: u?.perUnit ?? null,
        oddsRatioPerUnit: odds(u?.perUnit),
      };
    }),
  };
}

/** The page: every name from the user's files escaped. */
export function partyReportPage(r: PartyReport): string {
  const logistic = r.loss === 'logistic';
  const units = r.originalUnits;
  const head = ['column', units ? 'coefficient (standardised)' : 'coefficient', ...(logistic ? ['odds ratio'] : [])];
  if (units) head.push('original column', 'kind', 'centre', 'scale', 'coefficient per original unit', ...(logistic ? ['odds ratio per original unit'] : []));
  const rows = r.coefficients.map((c) => {
    const row = [escapeHtml(c.name), formatNumber(c.coefficient), ...(logistic ? [formatNumber(c.oddsRatio)] : [])];
    if (units) row.push(escapeHtml(c.original ?? ''), escapeHtml(c.kind ?? ''), formatNumber(c.center), formatNumber(c.scale), formatNumber(c.perUnit), ...(logistic ? [formatNumber(c.oddsRatioPerUnit)] : []));
    return row;
  });
  const parts = [
    `<p>Party <code>${escapeHtml(r.partyId)}</code> (${escapeHtml(r.role)}), job <code>${escapeHtml(r.jobId)}</code>, ${escapeHtml(r.loss)} loss${r.positiveClass !== null ? `; odds of the class '${escapeHtml(r.positiveClass)}'` : ''}.</p>`,
    `<p>Intercept: ${r.intercept === null ? 'none in this part' : formatNumber(r.intercept)}${r.offset !== null ? `; with the coefficients in original units, the constant is ${formatNumber((r.intercept ?? 0) + r.offset)} (the preparation's centring adds ${formatNumber(r.offset)})` : ''}.</p>`,
    htmlTable(head, rows),
    ...(logistic ? ['<p class="note">Odds ratio: exp(coefficient), the factor on the odds of the positive class per unit of the column as the model saw it, the other columns fixed.</p>'] : []),
    ...(r.rowScaling ? ['<p class="note">Each row was scaled to norm at most 1 before the coefficients apply (privacy): a coefficient is per unit of the scaled row.</p>'] : []),
    ...(r.scoreClip !== null ? [`<p class="note">This part's score is clipped to [-${formatNumber(r.scoreClip)}, ${formatNumber(r.scoreClip)}] and weighted in the combined model (the weights are in the active party's model file, or the coordinator's job.json): the odds ratios are of this part alone, before that weight.</p>`] : []),
    "<p class=\"note\">This page holds this party's own coefficients only; the coordinator's report.html has the model's test figures.</p>",
  ];
  return htmlPage(`Coefficients of party ${r.partyId}`, parts.join('\n'));
}

/** Write model-ID.report.json and .report.html next to the model, atomically. */
export function writePartyReport(model: string, m: ReportedModel, original?: OriginalUnits): PartyReport {
  const r = partyReport(m, original);
  const paths = partyReportPaths(model);
  writeFileAtomic(paths.json, JSON.stringify(r, null, 2) + '\n');
  writeFileAtomic(paths.html, partyReportPage(r));
  return r;
}

/** Read a party report back, every field checked. */
export function readPartyReport(path: string): PartyReport {
  return readJsonFile(partyReportSchema, path, 'party report');
}

/**
 * At the end of training: the report of the model file just written, read back so that the
 * table shows what the file holds. The model is what matters: a report that cannot be written
 * is logged, not fatal.
 */
export function writePartyReportOf(model: string, log: Logger, original?: OriginalUnits): void {
  try {
    writePartyReport(model, readPartyModel(model), original);
    log.info({ report: partyReportPaths(model).html }, 'coefficient report written');
  } catch (err) {
    log.warn({ err: (err as Error).message, model }, 'the coefficient report could not be written; the model file is');
  }
}
