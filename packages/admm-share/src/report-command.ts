// `admm-share report RUN`: the model report of a finished run drawn again from its persisted
// files: report.json and report.html from test-scores.csv and summary.json (the coordinator's
// --out folder, or a simulate run's), and each party's coefficient page from each model-*.json
// in the folder. The figures are recomputed, so the same files give the same report.json.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, originalUnits, writeFileAtomic } from '@admm-share/core';
import { REPORT_FILE, TEST_SCORES_FILE, buildModelReport, formatModelReport, readSummary, readTestScores, writeModelReportPage } from '@admm-share/coordinator';
import { partyReportPaths, readPartyModel, writePartyReport } from '@admm-share/party';

export interface RunReport {
  /** report.html, when the run had test labels (test-scores.csv). */
  page?: string;
  /** Each party's coefficient page. */
  parties: string[];
}

/** model-ID.json files of a run: not the files a party keeps beside them (privacy report, ledgers, coefficient report, preparation, probe budget). */
function modelFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /^model-.+\.json$/.test(f) && !/\.(privacy|ledger|scoring-ledger|report|preparation|probe-budget)\.json$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

export async function reportRun(run: string): Promise<RunReport> {
  const dir = resolve(run);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new ConfigError(`${run}: not a folder; give the --out folder of a coordinator or simulate run`);
  const scoresFile = join(dir, TEST_SCORES_FILE);
  const summaryFile = join(dir, 'summary.json');
  const models = modelFiles(dir);
  const hasScores = existsSync(scoresFile);
  if (!hasScores && models.length === 0)
    throw new ConfigError(`${run}: neither ${TEST_SCORES_FILE} nor a model-*.json: give the --out folder of a finished coordinator run with test labels, a party's model folder, or a simulate run`);
  const out: RunReport = { parties: [] };
  if (hasScores) {
    const s = readSummary(summaryFile);
    const report = buildModelReport({ jobId: s.jobId, algorithm: s.algorithm, loss: s.loss, classes: s.classes }, readTestScores(scoresFile));
    writeFileAtomic(join(dir, REPORT_FILE), formatModelReport(report));
    out.page = await writeModelReportPage(dir, report);
  }
  for (const m of models) {
    const model = readPartyModel(m);
    writePartyReport(m, model, model.preparation ? originalUnits(model.preparation, model.coefficients) : undefined);
    out.parties.push(partyReportPaths(m).html);
  }
  return out;
}

/** What the command prints. */
export function reportLines(r: RunReport): string {
  const lines = [r.page ? `model report: ${r.page}` : `no ${TEST_SCORES_FILE} (the run had no test labels): no model report`];
  for (const p of r.parties) lines.push(`coefficients: ${p}`);
  return lines.join('\n') + '\n';
}
