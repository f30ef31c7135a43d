// `admm-share simulate` as a sequence of phases: load the data set and write each party's
// files (datasets.ts), launch the coordinator and one party process per block and wait for
// them (launch.ts), then complete the summary with the baselines and print it (report.ts) and
// write what it adds to the coordinator's summary.json (simulation-file.ts). This file owns
// the run's lifetime: its directories, the progress bar, and stopping the children on a
// signal, an error or exit.
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EXIT, parseClassWeight, resolveClassWeights, writeFileAtomic } from '@admm-share/core';
import { FLIPS_FILE, type readLocalBaseline } from '@admm-share/coordinator';
import { type DataOptions, loadData, writePartyFiles } from './datasets.js';
import { type LaunchOptions, describeLabelPrivacy, describePrivacy, newJob, runJob } from './launch.js';
import { type Child, killAll } from './processes.js';
import { Progress } from '@admm-share/runtime';
import { type LocalBaselineFigures, type SimulateSummary, completeSummary, describeData, formatTable, localBaseline, writtenTo } from './report.js';
import { writeSimulation } from './simulation-file.js';

export type { DataOptions } from './datasets.js';
export { type LaunchOptions, type SimulatePrivacy, describeLabelPrivacy, describePrivacy } from './launch.js';
export { type Baseline, type SimulateSummary, evaluateCentral, formatTable } from './report.js';
export { SIMULATION_FILE, type Simulation, readSimulation, simulationSchema, writeSimulation } from './simulation-file.js';

export interface SimulateOptions extends DataOptions, LaunchOptions {
  /** Output directory (default: runs/<time>). */
  out?: string;
  /** Also train the central and party-1-only models. */
  baselines: boolean;
}

/** The local-only baseline simulate fits before a job with a dashboard, in the run's folder. */
export const LOCAL_BASELINE_FILE = 'local-baseline.json';

/** local-baseline.json as the coordinator reads it (--local-baseline): its type is the reader's. */
type LocalBaseline = ReturnType<typeof readLocalBaseline>;

/** What `simulate` prints when the coordinator's dashboard listens (the line scripts and tests look for). */
export const DASHBOARD_LINE = /^dashboard: (http:\/\/\S+)$/m;

export async function simulate(opts: SimulateOptions, out: NodeJS.WriteStream = process.stdout): Promise<SimulateSummary> {
  const started = performance.now();
  const dir = resolve(opts.out ?? join('runs', new Date().toISOString().replace(/[:.]/g, '-')));
  const dataDir = join(dir, 'data');
  const logDir = join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  // Every simulate is a new job: a previous run's label flips in the same --out belong to
  // another job (the coordinator would refuse them), and this run draws its own.
  rmSync(join(dir, FLIPS_FILE), { force: true });
  const data = loadData(opts);
  // The baselines are fitted with the job's class weights (the label files simulate writes hold -1 and 1).
  const classWeights = opts.classWeight === undefined ? undefined : resolveClassWeights(parseClassWeight(opts.classWeight), data.train.y, { negative: '-1', positive: '1' });
  const job = newJob(dir, dataDir, logDir, writePartyFiles(dataDir, data));
  const progress = new Progress();
  out.write(describeData(data));
  out.write(describePrivacy(opts.privacy, job.files.parties.map((p) => p.id), opts.activeParty, opts.algorithm));
  out.write(describeLabelPrivacy(opts));
  if (opts.psiCache) out.write(`psi caches: every process keeps its intersection's keys and blinded ids under ${opts.psiCache} (a later run on the same ids blinds only new ones; docs/privacy.md 11.7)\n`);

  const children = new Set<Child>();
  const cleanup = () => killAll(children);
  process.on('exit', cleanup);
  const onSignal = (sig: NodeJS.Signals) => {
    cleanup();
    progress.done();
    process.stderr.write(`admm-share: stopped by ${sig}\n`);
    process.exit(EXIT.interrupted);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    // With a dashboard, party 1's local-only model is fitted first, so that the page can show
    // it beside the job's at the end (the coordinator reads it with --local-baseline).
    let local: LocalBaselineFigures | undefined;
    let launch: LaunchOptions = opts;
    if (opts.dashboard && opts.baselines) {
      progress.message('training the party-1-only baseline for the dashboard');
      local = localBaseline(data, job, { ...opts, classWeights });
      progress.done();
      const file = join(dir, LOCAL_BASELINE_FILE);
      // A NaN metric (the AUC of a one-class test set) is written as null and read back as NaN.
      const written: LocalBaseline = { party: local.party, objective: local.objective, test: local.test ?? null };
      writeFileAtomic(file, JSON.stringify(written) + '\n');
      launch = { ...opts, dashboard: { ...opts.dashboard, localBaseline: file } };
    }
    const { peaks, lingering } = await runJob(launch, job, children, progress, (url) => {
      progress.done();
      out.write(`dashboard: ${url}\n`);
    });
    progress.done();
    const result = completeSummary(job, data, { ...opts, classWeights }, progress, started, peaks, local);
    const { baselines, warnings, files, peakMemory } = result;
    writeSimulation(dir, { ...(baselines ? { baselines } : {}), ...(warnings ? { warnings } : {}), files, peakMemory, seconds: { total: result.seconds.total } });
    out.write(formatTable(result));
    out.write(writtenTo(dir, local ? LOCAL_BASELINE_FILE : undefined));
    if (lingering) {
      out.write(`the dashboard stays up for ${opts.dashboard?.lingerSeconds} s (--dashboard-linger; Ctrl-C ends it)\n`);
      await lingering;
    }
    return result;
  } finally {
    progress.done();
    killAll(children);
    process.off('exit', cleanup);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
