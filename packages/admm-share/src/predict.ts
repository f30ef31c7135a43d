// `admm-share predict`: score new rows with the model of a `simulate` run, over real processes.
// The new rows (one LIBSVM file with every column) are split by columns the way the run split
// its training data, each party's block is written in its own random row order (the private
// set intersection aligns them), and the coordinator (admm-coordinator predict) and one party
// per block (admm-party predict) run on localhost with the run's model files and credentials.
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type TextEncoding, ConfigError, binaryLabels, formatLabelsCsv, formatLibsvmViews, randomPermutation, readLibsvm, writeFileAtomic } from '@admm-share/core';
import { JOB_FILE, type JobDescription, type PredictSummary, type MissingPolicy, predictLine, readJobFile, readPredictSummary } from '@admm-share/coordinator';
import { type Child, killAll } from './processes.js';
import { psiCacheArgs, runProcesses } from './launch.js';
import { SimulationError } from './errors.js';

export interface PredictRunOptions {
  /** The `simulate` run's output folder. */
  run: string;
  /** The new rows: LIBSVM with every column of the run's data (labels first when `labels`). */
  data: string;
  /** The data file's first tokens are labels: report metrics. */
  labels: boolean;
  /** predictions.csv (default: in the run folder). */
  out?: string;
  missing: MissingPolicy;
  /** Noise on each passive party's scores (a budget for this prediction job); none by default. */
  epsilon?: number;
  delta: number;
  /** Seeded noise (`seed/party`): predictable, experiments only. */
  seed?: string;
  /** The text encoding of `data` (--id-encoding; default utf8). */
  idEncoding?: TextEncoding;
  /** Every process's --psi-cache under this folder (launch.ts psiCacheArgs). */
  psiCache?: string;
}

/** The line `predict` prints about the parties' privacy (no noise unless asked). */
export function describeScoringPrivacy(o: Pick<PredictRunOptions, 'epsilon' | 'delta' | 'seed'>, passive: readonly string[]): string {
  if (o.epsilon === undefined) return 'scoring privacy: none (every party sends its scores of the new rows without noise; --epsilon E to noise the passive parties\' scores)\n';
  return `scoring privacy: ${passive.join(', ') || 'no passive party'} noise their scores (Gaussian, epsilon ${o.epsilon}, delta ${o.delta} for this prediction job, ${o.seed !== undefined ? `SEEDED ('${o.seed}'): predictable, experiments only` : 'OS CSPRNG'})\n`;
}

/**
 * What the processes of `predict` read, in `dir`: the coordinator's labels.csv (or ids.csv) and
 * one LIBSVM file per party with its columns, each in a row order of its own (randomPermutation
 * gives the line of each row), written straight from the whole matrix: no sliced or reordered
 * copy of it.
 */
export function writePredictFiles(opts: Pick<PredictRunOptions, 'data' | 'labels' | 'idEncoding'>, job: Pick<JobDescription, 'parties'>, dir: string): { rows: number; rowsFile: string; blocks: { party: JobDescription['parties'][number]; file: string }[] } {
  const features = job.parties.reduce((k, p) => k + p.features, 0);
  const table = readLibsvm(resolve(opts.data), { ids: 'auto', features, encoding: opts.idEncoding });
  mkdirSync(dir, { recursive: true });
  // The coordinator's file: the ids (with their labels, mapped as in training, for metrics).
  let rowsFile: string;
  if (opts.labels) {
    const { y } = binaryLabels({ file: table.file, ids: table.ids, raw: table.firstTokens ?? [], lines: table.lines });
    rowsFile = join(dir, 'labels.csv');
    writeFileAtomic(rowsFile, formatLabelsCsv(table.ids, y));
  } else {
    rowsFile = join(dir, 'ids.csv');
    writeFileAtomic(rowsFile, ['id', ...table.ids].join('\n') + '\n');
  }
  let start = 0;
  const blocks = job.parties.map((p) => {
    const columns = [start, (start += p.features)] as const;
    return { party: p, file: join(dir, `${p.id}.libsvm`), view: { columns, lineOfRow: randomPermutation(table.ids.length) } };
  });
  formatLibsvmViews(table.ids, table.X, blocks.map((b) => b.view), (chunks, b) => writeFileAtomic(blocks[b].file, chunks));
  return { rows: table.ids.length, rowsFile, blocks: blocks.map(({ party, file }) => ({ party, file })) };
}

export async function predictRun(opts: PredictRunOptions, out: NodeJS.WriteStream = process.stdout): Promise<PredictSummary> {
  const run = resolve(opts.run);
  for (const f of [JOB_FILE, 'data/credentials.json'])
    if (!existsSync(join(run, f))) throw new ConfigError(`--run ${run}: no ${f} (give the folder of a completed admm-share simulate run)`);
  const job = readJobFile(join(run, JOB_FILE));
  const dir = join(run, 'predict');
  const { rows, rowsFile, blocks } = writePredictFiles(opts, job, dir);
  const logs = join(dir, 'logs');
  mkdirSync(logs, { recursive: true });
  const outFile = resolve(opts.out ?? join(run, 'predictions.csv'));
  const passive = job.parties.filter((p) => p.role === 'passive').map((p) => p.id);
  out.write(`admm-share predict: ${rows} rows of ${opts.data} with the model of job ${job.jobId} (${job.parties.length} parties, ${job.parties.map((p) => p.features).join(' | ')} features; each party's rows in its own order)\n`);
  out.write(describeScoringPrivacy(opts, passive));

  const children = new Set<Child>();
  const cleanup = () => killAll(children);
  process.on('exit', cleanup);
  try {
    await runProcesses(
      {
        args: ['predict', '--model', join(run, JOB_FILE), opts.labels ? '--labels' : '--ids', rowsFile, '--out', outFile, '--port', '0', '--credentials', join(run, 'data', 'credentials.json'), '--missing', opts.missing, ...psiCacheArgs(opts.psiCache, 'coordinator')],
        log: join(logs, 'coordinator.log'),
      },
      (port) =>
        blocks.map(({ party, file }) => ({
          name: party.id,
          log: join(logs, `${party.id}.log`),
          args: [
            'predict',
            '--coordinator', `ws://127.0.0.1:${port}`,
            '--id', party.id,
            '--model', join(run, `model-${party.id}.json`),
            '--data', file,
            '--ids', 'first',
            '--token-file', join(run, 'data', `${party.id}.token`),
            ...psiCacheArgs(opts.psiCache, { party: party.id }),
            ...(opts.epsilon !== undefined && party.role === 'passive'
              ? ['--epsilon', String(opts.epsilon), '--delta', String(opts.delta), ...(opts.seed !== undefined ? ['--seed', `${opts.seed}/${party.id}`] : [])]
              : ['--mechanism', 'none']),
          ],
        })),
      children,
    );
  } catch (err) {
    if (err instanceof SimulationError) throw new SimulationError(`${err.message} (logs in ${logs})`, err.exitCode);
    throw err;
  } finally {
    killAll(children);
    process.off('exit', cleanup);
  }
  const result = readPredictSummary(outFile.replace(/(\.csv)?$/, '.json'));
  const trained = job.test;
  out.write(`${predictLine(result)}\n`);
  if (trained && result.metrics && 'logLoss' in result.metrics && trained.logLoss !== undefined)
    out.write(`training run's test metrics: log loss ${trained.logLoss.toFixed(4)}, accuracy ${trained.accuracy?.toFixed(4)}\n`);
  return result;
}

