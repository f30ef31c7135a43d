import { resolve } from 'node:path';
import type { Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { ACCOUNTANTS, BANK_TELECOM_DEFAULTS, CLASS_WEIGHT_SYNTAX, ConfigError, DEFAULT_LAMBDA, ID_ENCODING_OPTION, LABEL_PRIVACY_LAMBDA, accountEpsilon, calibrateSigma, syntheticDataset } from '@admm-share/core';
import { ALGORITHMS, MECHANISMS, NOISE_MECHANISMS, type NoiseMechanism, VARIANTS } from '@admm-share/protocol';
import { commandLine, exitWithError, installCrashHandlers, requireInteger, requireNonNegative, requirePositive } from '@admm-share/runtime';
import { type SimulatePrivacy, simulate } from './simulate.js';
import { writeVerticalSplit } from './split.js';
import { credentialsOptions, runCredentials, writeCredentials } from './credentials.js';
import { defaultDataDir, paperExperiment } from './experiment.js';
import { privacySweep } from './sweep.js';
import { DATASETS } from './names.js';
import { GENERATED, writeBankTelecom } from './datasets.js';
import { predictRun } from './predict.js';
import { reportLines, reportRun } from './report-command.js';
import { DEFAULT_ANDERSON, MISSING_POLICIES, requireAnderson } from '@admm-share/coordinator';

const TOOL = 'admm-share';

/** The flags `privacy calibrate` and `privacy account` share. */
function accountingOptions<T>(y: Argv<T>) {
  return y
    .option('delta', { type: 'number', demandOption: true })
    .option('rounds', { type: 'number', demandOption: true })
    .option('sensitivity', { type: 'number', demandOption: true, describe: 'L2 sensitivity of one round' })
    .option('method', { choices: ACCOUNTANTS, default: 'exact' as const })
    .option('json', { type: 'boolean', default: false, describe: 'print one JSON object' });
}

function simulatePrivacy(a: { mechanism?: SimulatePrivacy['mechanism']; epsilon?: number; delta: number; seed?: string; bx?: number; bw?: number; b1: number; c1: number }): SimulatePrivacy {
  const mechanism = a.mechanism ?? (a.epsilon !== undefined ? 'auto' : 'none');
  if (mechanism === 'none') {
    if (a.epsilon !== undefined) throw new ConfigError('--epsilon with --mechanism none: choose a budget or no noise');
    return { mechanism, delta: a.delta };
  }
  if (a.epsilon === undefined) throw new ConfigError(`--mechanism ${mechanism} needs --epsilon`);
  return {
    mechanism,
    epsilon: requirePositive('epsilon', a.epsilon),
    delta: a.delta,
    seed: a.seed,
    bx: a.bx,
    bw: a.bw,
    ...(mechanism === 'paper' ? { b1: requirePositive('b1', a.b1), c1: requirePositive('c1', a.c1) } : {}),
  };
}

/**
 * --active-party: an id, 'none', or by default party 1 when there is a budget for the one-shot
 * training (party ids are party-1, party-2, ...); the per-round mechanisms keep every party passive.
 */
function activePartyFlag(flag: string | undefined, privacy: boolean): string | undefined {
  if (flag === 'none') return undefined;
  if (flag !== undefined) return flag;
  return privacy ? 'party-1' : undefined;
}

async function main(): Promise<void> {
  await commandLine(hideBin(process.argv), TOOL, 'ADMM_SHARE')
    .usage('$0 <command> [options]')
    .command(
      'simulate',
      'split a data set by feature columns, run a coordinator and one party process per block on localhost, compare with central training',
      (y) =>
        y
          .option('dataset', { choices: DATASETS, default: 'synthetic' as const, describe: 'built-in data set when --data is not given' })
          .option('data', { type: 'string', describe: 'training set, LIBSVM (default: the built-in --dataset)' })
          .option('rows', { type: 'number', describe: 'spam: a seeded subsample of this many messages; gisette: training rows' })
          .option('test', { type: 'string', describe: 'test set, LIBSVM' })
          .option('split', { type: 'string', describe: 'feature block sizes, one per party; the last takes the rest (e.g. 66,57)' })
          .option('features', { type: 'number', describe: 'number of features (default: largest index seen)' })
          .option('lambda', { type: 'number', describe: `L2 weight (default ${DEFAULT_LAMBDA}; ${LABEL_PRIVACY_LAMBDA} with --label-epsilon)` })
          .option('rounds', { type: 'number', default: 100, describe: 'maximum rounds' })
          .option('variant', { choices: VARIANTS, default: 'exact' as const })
          .option('algorithm', {
            choices: ['auto', ...ALGORITHMS] as const,
            default: 'auto' as const,
            describe: 'auto: one-shot private training with --epsilon, ADMM sharing without; admm with --epsilon is the per-round noisy ADMM (research mode); sgd: mini-batch SGD (--rounds counts epochs)',
          })
          .option('active-party', { type: 'string', describe: "the label holder's own party (default with --epsilon: party 1; 'none': every party passive)" })
          .option('batch-size', { type: 'number', describe: 'sgd: rows per mini-batch (default 128)' })
          .option('lr', { type: 'number', describe: 'sgd: first-epoch learning rate (default 1)' })
          .option('lr-decay', { type: 'number', describe: 'sgd: lr / (1 + decay (epoch - 1)) (default 0.5)' })
          .option('rho', { type: 'number', describe: 'ADMM penalty (default 0.01/N exact, 0.3/N paper)' })
          .option('alpha', { type: 'number', default: 1.6, describe: 'over-relaxation (exact form)' })
          .option('anderson', { type: 'number', default: DEFAULT_ANDERSON, describe: 'Anderson acceleration: past rounds it combines (0: off; exact form without noise)' })
          .option('eval-every', { type: 'number', default: 0, describe: 'test-set evaluation every k rounds (0: at the end)' })
          .option('intercept', { type: 'boolean', default: false, describe: 'unpenalised intercept at party 1' })
          .option('prepare', { type: 'boolean', default: false, describe: "each party standardises its columns (admm-party --prepare; with --epsilon, statistics estimated with a share of each passive party's budget), with an intercept at party 1; the baselines stay on the data as it is" })
          .option('out', { type: 'string', describe: 'output directory (default: runs/<time>)' })
          .option('data-seed', { type: 'string', default: 'admm-share', describe: 'seed of the synthetic data set' })
          .option('id-encoding', ID_ENCODING_OPTION)
          .option('mechanism', { choices: MECHANISMS, describe: 'privacy mechanism of every passive party (default: none; with --epsilon the one that fits the algorithm)' })
          .option('epsilon', { type: 'number', describe: 'privacy budget of every passive party for the whole training' })
          .option('delta', { type: 'number', default: 1e-5, describe: 'privacy delta of every passive party' })
          .option('seed', { type: 'string', describe: 'seed the parties\' noise and, with --label-epsilon, the label flips (predictable: experiments only)' })
          .option('label-epsilon', { type: 'number', describe: 'label privacy at the coordinator: randomized response on the training labels (flip probability 1/(1+e^E)), loss corrected for the flips' })
          .option('class-weight', { type: 'string', describe: `the coordinator's class weights, also in the baselines: ${CLASS_WEIGHT_SYNTAX} (the labels here are -1 and 1)` })
          .option('bx', { type: 'number', describe: 'gaussian-share bound on ||x_m|| (party default 20)' })
          .option('bw', { type: 'number', describe: 'gaussian-share clip of the target (party default 3 bx + 1/(N rho))' })
          .option('b1', { type: 'number', default: 1, describe: 'paper mechanism: Lemma 1 bound b1' })
          .option('c1', { type: 'number', default: 1, describe: 'paper mechanism: Lemma 1 bound c1' })
          .option('baselines', { type: 'boolean', default: true, describe: 'also train centrally on all features and on party 1\'s only' })
          .option('dashboard', { type: 'boolean', default: false, describe: "serve the coordinator's live dashboard and metrics on 127.0.0.1 and print its address" })
          .option('dashboard-port', { type: 'number', default: 0, describe: 'the dashboard\'s port (0: a free one)' })
          .option('dashboard-linger', { type: 'number', default: 0, describe: 'seconds the dashboard stays up after the job ends' })
          .option('party-threads', { type: 'number', describe: "each party's --threads for a large dense block (default: the cores shared out among the processes, 0 on 2 cores)" })
          .option('psi-cache', { type: 'string', describe: "keep every process's private set intersection cache under this folder (coordinator/, party-ID/): a later run on the same ids blinds only new ones (docs/privacy.md 11.7)" }),
      async (a) => {
        if (!a.dashboard && (a['dashboard-linger'] !== 0 || a['dashboard-port'] !== 0)) throw new ConfigError('--dashboard-port and --dashboard-linger need --dashboard');
        await simulate({
          dataset: a.dataset,
          rows: a.rows === undefined ? undefined : requireInteger('rows', a.rows, 10),
          data: a.data ? resolve(a.data) : undefined,
          test: a.test ? resolve(a.test) : undefined,
          split: a.split,
          features: a.features === undefined ? undefined : requireInteger('features', a.features, 1),
          lambda: a.lambda === undefined ? (a['label-epsilon'] !== undefined ? LABEL_PRIVACY_LAMBDA : DEFAULT_LAMBDA) : requireNonNegative('lambda', a.lambda),
          rounds: requireInteger('rounds', a.rounds, 1),
          variant: a.variant,
          algorithm: a.algorithm,
          sgd: { batchSize: a['batch-size'], lr: a.lr, lrDecay: a['lr-decay'] },
          rho: a.rho === undefined ? undefined : requirePositive('rho', a.rho),
          alpha: requirePositive('alpha', a.alpha),
          anderson: requireAnderson(a.anderson),
          evalEvery: requireInteger('eval-every', a['eval-every'], 0),
          // Centring every column takes away the constant that a one-hot block carries (a9a's rows
          // each hold one 1 per group): without an intercept the model could not fit the base rate.
          intercept: a.intercept || a.prepare,
          prepare: a.prepare,
          out: a.out,
          dataSeed: a['data-seed'],
          idEncoding: a['id-encoding'],
          baselines: a.baselines,
          privacy: simulatePrivacy(a),
          labelPrivacy: a['label-epsilon'] === undefined ? undefined : { epsilon: requirePositive('label-epsilon', a['label-epsilon']), ...(a.seed !== undefined ? { seed: a.seed } : {}) },
          ...(a['class-weight'] !== undefined ? { classWeight: a['class-weight'] } : {}),
          partyThreads: a['party-threads'] === undefined ? undefined : requireInteger('party-threads', a['party-threads'], 0),
          activeParty: activePartyFlag(a['active-party'], a.epsilon !== undefined && (a.mechanism === undefined || a.mechanism === 'score-release')),
          ...(a.dashboard
            ? { dashboard: { port: requireInteger('dashboard-port', a['dashboard-port'], 0), lingerSeconds: requireNonNegative('dashboard-linger', a['dashboard-linger']) } }
            : {}),
          ...(a['psi-cache'] !== undefined ? { psiCache: resolve(a['psi-cache']) } : {}),
        });
      },
    )
    .command(
      'generate',
      'write a built-in data set: the synthetic one as per-party files and label files (what docker compose runs on), or bank-telecom as two organisations\' CSV files',
      (y) =>
        y
          .option('dataset', { choices: GENERATED, default: 'synthetic' as const, describe: 'synthetic: LIBSVM blocks and labels; bank-telecom: bank.csv (with the target) and telecom.csv in raw units, and new customers to score' })
          .option('out', { type: 'string', demandOption: true, describe: 'directory to write into' })
          .option('seed', { type: 'string', describe: `default: admm-share (synthetic), ${BANK_TELECOM_DEFAULTS.seed} (bank-telecom)` })
          .option('rows', { type: 'number', describe: `training rows (default 2000); bank-telecom: rows of bank.csv (default ${BANK_TELECOM_DEFAULTS.rows})` })
          .option('test-rows', { type: 'number', describe: 'synthetic: test rows (default 1000)' }),
      (a) => {
        if (a.dataset === 'bank-telecom') {
          if (a['test-rows'] !== undefined) throw new ConfigError('--test-rows applies to --dataset synthetic: bank-telecom has no test file (the coordinator holds out test rows)');
          const files = writeBankTelecom(resolve(a.out), { seed: a.seed, rows: a.rows === undefined ? undefined : requireInteger('rows', a.rows, 10) });
          process.stdout.write(JSON.stringify(files, null, 2) + '\n');
          return;
        }
        const s = syntheticDataset({ seed: a.seed ?? 'admm-share', trainRows: requireInteger('rows', a.rows ?? 2000, 1), testRows: requireInteger('test-rows', a['test-rows'] ?? 1000, 1) });
        const files = writeVerticalSplit(resolve(a.out), s.blocks, s.train, s.test);
        const credentials = writeCredentials(resolve(a.out), files.parties.map((p) => p.id), { overwrite: true });
        process.stdout.write(JSON.stringify({ ...files, credentials }, null, 2) + '\n');
      },
    )
    .command(
      'predict',
      "score new rows with a simulate run's model: the rows are split by columns as the run's data was, and a coordinator and one party process per block score them on localhost (each party's rows in its own order, aligned by PSI)",
      (y) =>
        y
          .option('run', { type: 'string', demandOption: true, describe: 'the folder of a completed simulate run (its --out)' })
          .option('data', { type: 'string', demandOption: true, describe: 'the new rows: LIBSVM with the columns of the run\'s data' })
          .option('labels', { type: 'boolean', default: false, describe: "the data file's first tokens are labels: report metrics" })
          .option('out', { type: 'string', describe: 'predictions.csv to write (default: in the run folder); a summary goes next to it (.json)' })
          .option('missing', { choices: MISSING_POLICIES, default: 'error' as const, describe: "an id a party does not hold: error, or partial (scored without that party's part)" })
          .option('epsilon', { type: 'number', describe: "noise each passive party's scores with this budget for the prediction job (default: no noise)" })
          .option('delta', { type: 'number', default: 1e-5 })
          .option('seed', { type: 'string', describe: 'seed the noise (PREDICTABLE: reproducible experiments only)' })
          .option('id-encoding', ID_ENCODING_OPTION)
          .option('psi-cache', { type: 'string', describe: "keep every process's private set intersection cache under this folder (coordinator/, party-ID/): a later run on the same ids blinds only new ones (docs/privacy.md 11.7)" }),
      async (a) => {
        await predictRun({
          ...(a['psi-cache'] !== undefined ? { psiCache: resolve(a['psi-cache']) } : {}),
          run: a.run,
          data: a.data,
          labels: a.labels,
          out: a.out,
          missing: a.missing,
          epsilon: a.epsilon === undefined ? undefined : requirePositive('epsilon', a.epsilon),
          delta: requirePositive('delta', a.delta),
          seed: a.seed,
          idEncoding: a['id-encoding'],
        });
      },
    )
    .command(
      'report <run>',
      "draw a finished run's model report again from its files: report.json and report.html from test-scores.csv (a coordinator --out folder or a simulate run), and each model-*.json's coefficient page (model-ID.report.html)",
      (y) => y.positional('run', { type: 'string', demandOption: true, describe: 'the folder of the run' }),
      async (a) => {
        process.stdout.write(reportLines(await reportRun(a.run)));
      },
    )
    .command('credentials', 'write credentials.json for the coordinator and one <party>.token per party (random secrets, mode 0600)', credentialsOptions, (a) => runCredentials(a))
    .command('privacy', 'privacy accounting: calibrate noise for a budget, or account the budget a noise level spends', (y) =>
      y
        .command(
          'calibrate',
          'sigma that makes T rounds of the Gaussian mechanism (epsilon, delta)-DP',
          (z) => accountingOptions(z.option('epsilon', { type: 'number', demandOption: true })),
          (a) => {
            const q = { epsilon: a.epsilon, delta: a.delta, rounds: a.rounds, sensitivity: a.sensitivity, method: a.method };
            const sigma = calibrateSigma(q);
            process.stdout.write(a.json ? JSON.stringify({ sigma, ...q }) + '\n' : `sigma = ${sigma} (${a.method} accounting)\n`);
          },
        )
        .command(
          'account',
          'epsilon spent by T rounds of the Gaussian mechanism with noise sigma',
          (z) => accountingOptions(z.option('sigma', { type: 'number', demandOption: true })),
          (a) => {
            const q = { sigma: a.sigma, delta: a.delta, rounds: a.rounds, sensitivity: a.sensitivity, method: a.method };
            const epsilon = accountEpsilon(q);
            process.stdout.write(a.json ? JSON.stringify({ epsilon, ...q }) + '\n' : `epsilon = ${epsilon} (${a.method} accounting)\n`);
          },
        )
        .command(
          'sweep',
          'test log loss and accuracy against epsilon over real processes for each mechanism (score-release with party 1 active and with every party passive; the per-round gaussian-share and paper research modes): sweep.csv and sweep.svg',
          (z) =>
            z
              .option('data', { type: 'string', demandOption: true, describe: 'training set, LIBSVM' })
              .option('test', { type: 'string', demandOption: true, describe: 'test set, LIBSVM' })
              .option('split', { type: 'string', default: '66,57' })
              .option('out', { type: 'string', demandOption: true })
              .option('epsilons', { type: 'string', default: '0.5,1,2,5,10,50' })
              .option('delta', { type: 'number', default: 1e-5 })
              .option('rounds', { type: 'number', default: 100 })
              .option('lambda', { type: 'number', default: 1e-4 })
              .option('mechanisms', { type: 'string', default: NOISE_MECHANISMS.join(',') })
              .option('seed', { type: 'string', describe: 'seed the noise (reproducible, predictable)' }),
          async (a) => {
            const epsilons = a.epsilons.split(',').map((e) => requirePositive('epsilons', Number(e)));
            const mechanisms = a.mechanisms.split(',').map((m) => {
              if (!(NOISE_MECHANISMS as readonly string[]).includes(m)) throw new ConfigError(`--mechanisms: '${m}' is not one of ${NOISE_MECHANISMS.join(', ')}`);
              return m as NoiseMechanism;
            });
            const rows = await privacySweep(
              {
                data: resolve(a.data),
                test: resolve(a.test),
                split: a.split,
                out: a.out,
                epsilons,
                delta: a.delta,
                rounds: requireInteger('rounds', a.rounds, 1),
                lambda: requirePositive('lambda', a.lambda),
                mechanisms,
                seed: a.seed,
              },
              (line) => process.stderr.write(line + '\n'),
            );
            process.stdout.write(`${rows.length} runs; wrote ${resolve(a.out)}/sweep.csv and sweep.svg\n`);
          },
        )
        .demandCommand(1, 'name a privacy command: calibrate, account or sweep'),
    )
    .command('experiment', 'reproduce the paper\'s experiments on real processes', (y) =>
      y
        .command(
          'paper',
          'ADMM (exact and paper form) and SGD per epoch on a9a and the spam set, test log loss under noise, baselines: CSV, SVG and report.md',
          (z) =>
            z
              .option('out', { type: 'string', demandOption: true })
              .option('data-dir', { type: 'string', describe: 'directory holding a9a/a9a and a9a/a9a.t (default: data/ in the repository)' })
              .option('quick', { type: 'boolean', default: false, describe: "small versions of every pipeline (a9a's first 4000 training and 2000 test rows, 600 spam messages, 4 epochs)" }),
          async (a) => {
            await paperExperiment({ out: a.out, dataDir: resolve(a['data-dir'] ?? defaultDataDir()), quick: a.quick }, (line) => process.stderr.write(line + '\n'));
          },
        )
        .demandCommand(1, 'name an experiment: paper'),
    )
    .demandCommand(1, 'name a command: simulate, predict, report, generate, credentials, privacy or experiment')
    .parseAsync();
}

installCrashHandlers(TOOL);
main().catch((err) => exitWithError(TOOL, err instanceof Error && err.name === 'YError' ? new ConfigError(err.message) : err));
