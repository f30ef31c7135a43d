// `admm-share simulate` as a sequence of phases: load the data set and write each party's
// files (datasets.ts), launch the coordinator and one party process per block and wait for
// them (launch.ts), then complete, write and print the summary (report.ts). This file owns
// the run's lifetime: its directories, the progress bar, and stopping the children on a
// signal, an error or exit.
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EXIT, writeFileAtomic } from '@admm-share/core';
import { FLIPS_FILE } from '@admm-share/coordinator';
import { type DataOptions, loadData, writePartyFiles } from './datasets.js';
import { type LaunchOptions, describeLabelPrivacy, describePrivacy, newJob, runJob } from './launch.js';
import { type Child, killAll } from './processes.js';
import { Progress } from '@admm-share/runtime';
import { type SimulateSummary, completeSummary, describeData, formatTable, localBaseline, writtenTo } from './report.js';

export type { DataOptions } from './datasets.js';
export { type LaunchOptions, type SimulatePrivacy, describeLabelPrivacy, describePrivacy } from './launch.js';
export { type Baseline, type SimulateSummary, evaluateCentral, formatTable } from './report.js';

export interface SimulateOptions extends DataOptions, LaunchOptions {
  /** Output directory (default: runs/<time>). */
  out?: string;
  /** Also train the central and party-1-only models. */
  baselines: boolean;
}

/** The local-only baseline simulate fits before a job with a dashboard, in the run's folder. */
export const LOCAL_BASELINE_FILE = 'local-baseline.json';

/**
 * What simulate adds to the coordinator's summary.json, in a file of its own (summary.json has
 * one writer, the coordinator): the baselines and the warnings against them, the run's files,
 * each process's peak memory, and the seconds of the whole simulation.
 */
export const SIMULATION_FILE = 'simulation.json';

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
  const job = newJob(dir, dataDir, logDir, writePartyFiles(dataDir, data));
  const progress = new Progress();
  out.write(describeData(data));
  out.write(describePrivacy(opts.privacy, job.files.parties.map((p) => p.id), opts.activeParty, opts.algorithm));
  out.write(describeLabelPrivacy(opts));

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
    let local: ReturnType<typeof localBaseline> | undefined;
    let launch: LaunchOptions = opts;
    if (opts.dashboard && opts.baselines) {
      progress.message('training the party-1-only baseline for the dashboard');
      local = localBaseline(data, job, opts);
      progress.done();
      const file = join(dir, LOCAL_BASELINE_FILE);
      // A NaN metric (the AUC of a one-class test set) is written as null and read back as NaN.
      writeFileAtomic(file, JSON.stringify({ party: local.party, objective: local.objective, test: local.test ?? null }) + '\n');
      launch = { ...opts, dashboard: { ...opts.dashboard, localBaseline: file } };
    }
    const { peaks, lingering } = await runJob(launch, job, children, progress, (url) => {
      progress.done();
      out.write(`dashboard: ${url}\n`);
    });
    progress.done();
    const result = completeSummary(job, data, opts, progress, started, peaks, local);
    const { baselines, warnings, files, peakMemory } = result;
    writeFileAtomic(join(dir, SIMULATION_FILE), JSON.stringify({ ...(baselines ? { baselines } : {}), ...(warnings ? { warnings } : {}), files, peakMemory, seconds: { total: result.seconds.total } }, null, 2) + '\n');
    out.write(formatTable(result));
    out.write(writtenTo(dir));
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
