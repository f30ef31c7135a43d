/**
 * report.html: the model report as one self-contained page (inline SVG plots drawn by
 * vega-lite, no script, no remote resource), from report.json's figures only, so that
 * `admm-share report` draws the same page again from the persisted files.
 */
import { join } from 'node:path';
import { writeFileAtomic } from '@admm-share/core';
import { escapeHtml, formatNumber, htmlPage, htmlTable, renderSvg } from '@admm-share/runtime';
import { type ModelReport, REPORT_PAGE } from './model-report.js';

const SIZE = { width: 300, height: 300 };
const diagonal = { data: { values: [{ x: 0, y: 0 }, { x: 1, y: 1 }] }, mark: { type: 'line', strokeDash: [4, 3], color: '#999' }, encoding: { x: { field: 'x', type: 'quantitative' }, y: { field: 'y', type: 'quantitative' } } };
const unit = (title: string) => ({ type: 'quantitative', title, scale: { domain: [0, 1] } });

function rocSpec(c: NonNullable<ModelReport['classification']>): object {
  return {
    ...SIZE,
    title: `ROC curve (AUC ${formatNumber(c.auc)})`,
    background: 'white',
    layer: [
      diagonal,
      // order: the points are in threshold order; without it vega-lite would sort by x and zig-zag at ties.
      { data: { values: c.roc.map((p, i) => ({ ...p, i })) }, mark: { type: 'line' }, encoding: { x: { field: 'fpr', ...unit('false positive rate') }, y: { field: 'tpr', ...unit('true positive rate') }, order: { field: 'i', type: 'quantitative' } } },
    ],
  };
}

function calibrationSpec(c: NonNullable<ModelReport['classification']>): object {
  return {
    ...SIZE,
    title: 'Calibration (deciles of predicted probability)',
    background: 'white',
    layer: [
      diagonal,
      { data: { values: c.calibration }, mark: { type: 'line', point: true }, encoding: { x: { field: 'meanPredicted', ...unit('mean predicted probability') }, y: { field: 'observedRate', ...unit('observed positive rate') } } },
    ],
  };
}

function gainsSpec(c: NonNullable<ModelReport['classification']>): object {
  const values = [{ population: 0, captured: 0 }, ...c.gains];
  return {
    ...SIZE,
    title: 'Cumulative gains (rows ranked by score)',
    background: 'white',
    layer: [diagonal, { data: { values }, mark: { type: 'line', point: true }, encoding: { x: { field: 'population', ...unit('share of rows') }, y: { field: 'captured', ...unit('share of positives captured') } } }],
  };
}

/** The page's HTML for a report. */
export async function modelReportPage(r: ModelReport): Promise<string> {
  const sections: string[] = [];
  const classes = r.classes ? `; positive class '${escapeHtml(r.classes.positive)}', negative '${escapeHtml(r.classes.negative)}'` : '';
  sections.push(`<p>Job <code>${escapeHtml(r.jobId)}</code>, ${escapeHtml(r.algorithm)}, ${escapeHtml(r.loss)} loss: ${r.rows} test rows${r.positives !== null ? ` (${r.positives} positive)` : ''}${classes}.</p>`);
  const c = r.classification;
  if (c) {
    sections.push(
      htmlTable(
        ['figure', 'value'],
        [
          ['AUC', formatNumber(c.auc)],
          ['Gini (2 AUC - 1)', formatNumber(c.gini)],
          ['KS (max |TPR - FPR|)', formatNumber(c.ks)],
          ['KS threshold (probability / score)', `${formatNumber(c.ksProbability)} / ${formatNumber(c.ksThreshold)}`],
          ['log loss', formatNumber(c.logLoss)],
          [`accuracy at probability ${c.threshold}`, formatNumber(c.accuracy)],
        ],
      ),
    );
    const svgs = await Promise.all([rocSpec(c), calibrationSpec(c), gainsSpec(c)].map((s) => renderSvg(s)));
    sections.push(`<div class="plots">${svgs.map((s) => `<figure>${s}</figure>`).join('\n')}</div>`);
    sections.push('<h2>Lift by decile</h2>');
    sections.push(htmlTable(['top share of rows', 'share of positives', 'lift'], c.gains.map((g) => [formatNumber(g.population, 2), formatNumber(g.captured), formatNumber(g.lift, 3)])));
  }
  const g = r.regression;
  if (g) sections.push(htmlTable(['figure', 'value'], [['RMSE', formatNumber(g.rmse)], ['MAE', formatNumber(g.mae)], ['R^2', formatNumber(g.r2)]]));
  const figure = r.contributions[0]?.figure === 'r2' ? 'R^2' : 'AUC';
  sections.push(`<h2>Each party's contribution</h2><p class="note">The test ${figure} of the whole model minus that of the model with the party's part left out; below ${r.contributionThreshold} the part adds nothing measurable.</p>`);
  sections.push(htmlTable(['party', `${figure} without its part`, `${figure} lost without it`], r.contributions.map((p) => [escapeHtml(p.party), formatNumber(p.without), formatNumber(p.contribution)])));
  for (const w of r.warnings) sections.push(`<p class="warning">WARNING: ${escapeHtml(w)}</p>`);
  sections.push(`<p class="note">Computed from ${escapeHtml(r.scores)} (each test row's id, label, combined score and each party's part). The coordinator holds no party's coefficients: each party's coefficient table is in its own model-ID.report.html.</p>`);
  return htmlPage(`Model report: job ${r.jobId}`, sections.join('\n'));
}

/** Write report.html into `dir` atomically; returns its path. */
export async function writeModelReportPage(dir: string, r: ModelReport): Promise<string> {
  const path = join(dir, REPORT_PAGE);
  writeFileAtomic(path, await modelReportPage(r));
  return path;
}
