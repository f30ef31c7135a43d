import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { hideBin } from 'yargs/helpers';
import { CLASS_WEIGHT_SYNTAX, ConfigError, DEFAULT_LAMBDA, FILE_FORMATS, ID_ENCODING_OPTION, LABEL_ID_MODES, LABEL_PRIVACY_LAMBDA, parseClassWeight } from '@admm-share/core';
import { LOG_LEVELS, type LogLevel, commandLine, psiCacheFlags, psiCacheOptions, readFlagFile, readTokenFile, requireInteger, requireNonNegative, requirePositive, runService } from '@admm-share/runtime';
import { ALGORITHMS, HEARTBEAT_MS, LOSSES, MIN_HEARTBEAT_MS, NAME_RE, REJOIN_TIMEOUT_MS, VARIANTS } from '@admm-share/protocol';
import type { Logger } from 'pino';
import { type CoordinatorConfig, start } from './job/coordinator.js';
import type { ServerTls } from './connections/server.js';
import { MISSING_POLICIES, type PredictConfig, predict, predictLine } from './prediction/predict.js';
import { DEFAULT_ANDERSON, requireAnderson } from './numerics/anderson.js';
import { resultLine } from './output/summary.js';
import { readLocalBaseline } from './output/local-baseline.js';
import { type ServeConfig, serve } from './prediction/serve.js';
import { requireTokenOffLoopback } from './connections/http.js';
import { readCredentials } from './connections/credentials-file.js';
import { DEFAULT_CHECKPOINT_SECONDS, checkpointPolicy } from './output/checkpoint.js';
import { DEFAULT_HOLDOUT_SEED, testSelectionOf } from './alignment/test-rows.js';

const TOOL = 'admm-coordinator';

function readTls(cert?: string, key?: string, clientCa?: string): ServerTls | undefined {
  if (cert === undefined && key === undefined) {
    if (clientCa !== undefined) throw new ConfigError('--tls-client-ca needs --tls-cert and --tls-key');
    return undefined;
  }
  if (cert === undefined || key === undefined) throw new ConfigError('--tls-cert and --tls-key go together');
  return { cert: readFlagFile('tls-cert', cert), key: readFlagFile('tls-key', key), ...(clientCa ? { clientCa: readFlagFile('tls-client-ca', clientCa) } : {}) };
}

/** The bearer token in --http-token-file (runtime's readTokenFile checks the token and the file's mode). */
function readHttpToken(file: string | undefined): string | undefined {
  return file === undefined ? undefined : readTokenFile('http-token-file', file);
}

export function parseArgs(argv: string[]): CoordinatorConfig & { logLevel: LogLevel } {
  const a = psiCacheOptions(commandLine(argv, TOOL, 'ADMM_COORDINATOR'), 'party')
    .usage('$0 --labels FILE --parties ID,ID,... [options]\n\nRun the ADMM sharing coordinator: holds the labels, aligns samples, runs the z and dual updates.')
    .option('labels', { type: 'string', demandOption: true, describe: 'training labels with sample ids (CSV with id,label columns, or LIBSVM)' })
    .option('test-labels', { type: 'string', describe: 'test labels; parties then send test-set scores for evaluation' })
    .option('holdout', { type: 'number', requiresArg: true, describe: 'evaluate on this fraction of the aligned ids (0 < F < 1), held out of training and chosen by --holdout-seed; parties give one file (not with --test-labels)' })
    .option('holdout-seed', { type: 'string', requiresArg: true, describe: `seed of the --holdout choice (default ${DEFAULT_HOLDOUT_SEED}): the same seed and aligned ids give the same test rows` })
    .option('test-ids', { type: 'string', requiresArg: true, describe: 'evaluate on these aligned ids (CSV with the --id-column, or one id per line), held out of training; ids not aligned are counted (not with --holdout or --test-labels)' })
    .option('label-format', { choices: FILE_FORMATS, default: 'auto' as const })
    .command('predict', 'score new rows with a trained model: the parties join with admm-party predict (admm-coordinator predict --help)')
    .command('serve', 'online scoring: answer POST /score with the parties connected (admm-coordinator serve --help)')
    .option('id-mode', { alias: 'ids', choices: LABEL_ID_MODES, default: 'auto' as const, describe: 'LIBSVM labels: where sample ids come from' })
    .option('id-column', { type: 'string', default: 'id', describe: 'CSV: id column name' })
    .option('id-encoding', ID_ENCODING_OPTION)
    .option('label-column', { type: 'string', default: 'label', describe: 'CSV: label column name' })
    .option('parties', { type: 'string', array: true, demandOption: true, describe: 'party ids that must join (comma or space separated)' })
    .option('job', { type: 'string', describe: 'job id (default: random)' })
    .option('host', { type: 'string', default: '127.0.0.1', describe: 'address to listen on' })
    .option('port', { type: 'number', default: 7070, describe: '0 picks a free port (see the "listening" log line)' })
    .option('loss', { choices: LOSSES, default: 'logistic' as const })
    .option('lambda', { type: 'number', describe: `L2 regularisation weight (default ${DEFAULT_LAMBDA}; ${LABEL_PRIVACY_LAMBDA} with --label-epsilon)` })
    .option('algorithm', {
      choices: ['auto', ...ALGORITHMS] as const,
      default: 'auto' as const,
      describe:
        'auto: one-shot private training when any party adds noise, ADMM sharing otherwise; admm with noisy parties is the per-round noisy ADMM (a research mode); sgd: mini-batch SGD over the same processes (rounds count epochs)',
    })
    .option('label-epsilon', {
      type: 'number',
      describe: 'label differential privacy: flip each training label with probability 1/(1+e^E) (randomized response, OS CSPRNG) once per job, kept in --out, and train with the loss corrected for the flips (logistic loss only)',
    })
    .option('class-weight', { type: 'string', describe: `weights of the two classes in the logistic loss, for imbalanced targets: ${CLASS_WEIGHT_SYNTAX}` })
    .option('label-seed', { type: 'string', describe: 'seed the label flips (predictable: for reproducible experiments only)' })
    .option('active-party', { type: 'string', describe: "the party of this (the label holder's) organisation: it gets the labels, sends no noise and must agree (admm-party --role active); without it every party is passive" })
    .option('batch-size', { type: 'number', default: 128, describe: 'sgd: rows per mini-batch' })
    .option('lr', { type: 'number', default: 1, describe: 'sgd: learning rate of the first epoch' })
    .option('lr-decay', { type: 'number', default: 0.5, describe: 'sgd: epoch e uses lr / (1 + lr-decay (e - 1))' })
    .option('variant', { choices: VARIANTS, default: 'exact' as const, describe: 'exact sharing ADMM or the paper\'s Algorithm 1' })
    .option('rho', { type: 'number', describe: 'ADMM penalty (default 0.01/N exact, 0.3/N paper)' })
    .option('alpha', { type: 'number', default: 1.6, describe: 'over-relaxation, exact form only (1 = none)' })
    .option('anderson', { type: 'number', default: DEFAULT_ANDERSON, describe: 'Anderson acceleration: how many past rounds it combines (0: off); exact form, parties without noise' })
    .option('rounds', { type: 'number', default: 100, describe: 'maximum rounds' })
    .option('tol-abs', { type: 'number', default: 1e-7, describe: 'absolute residual tolerance' })
    .option('tol-rel', { type: 'number', default: 1e-5, describe: 'relative residual tolerance' })
    .option('eval-every', { type: 'number', default: 0, describe: 'evaluate on the test set every k rounds (0: at the end only)' })
    .option('out', { type: 'string', default: 'out', describe: 'directory for trace.jsonl and summary.json' })
    .option('hello-timeout', { type: 'number', default: 10_000, describe: 'ms a new connection has to say hello' })
    .option('rejoin-timeout', { type: 'number', default: REJOIN_TIMEOUT_MS, describe: 'ms a party that lost its connection during ADMM training has to come back (0: abort at once)' })
    .option('heartbeat', { type: 'number', default: HEARTBEAT_MS, describe: 'ms between pings to each party; a party that misses one is dropped (and may rejoin)' })
    .option('round-timeout', { type: 'number', default: 600_000, describe: 'ms a party has to answer each request before the job is aborted' })
    .option('max-rows-factor', { type: 'number', default: 10, describe: 'a party may declare at most this many times the label rows' })
    .option('credentials', { type: 'string', describe: 'JSON file {"party-id": "secret", ...}: parties must prove their secret (recommended)' })
    .option('tls-cert', { type: 'string', describe: 'serve wss:// with this certificate (PEM)' })
    .option('tls-key', { type: 'string', describe: 'the certificate\'s private key (PEM)' })
    .option('tls-client-ca', { type: 'string', describe: 'mutual TLS: require client certificates signed by this CA (PEM)' })
    .option('checkpoint-every', { type: 'number', describe: 'write out/checkpoint.bin every k completed rounds (0: never) instead of by time' })
    .option('checkpoint-seconds', { type: 'number', describe: `write out/checkpoint.bin after the first round that ends this many seconds after the last one (default ${DEFAULT_CHECKPOINT_SECONDS})` })
    .option('resume', { type: 'boolean', default: false, describe: 'continue the job checkpointed in --out (parties rejoin by themselves)' })
    .option('http-port', { type: 'number', describe: 'serve the job\'s dashboard, status API, /metrics and health checks on this port (0 picks a free one; see the "http listening" log line); none: no HTTP server' })
    .option('http-host', { type: 'string', default: '127.0.0.1', describe: 'address of the HTTP port' })
    .option('http-token-file', { type: 'string', describe: 'file holding the bearer token every HTTP request but /healthz and /readyz must carry (Authorization: Bearer TOKEN)' })
    .option('http-linger', { type: 'number', default: 0, describe: 'seconds the HTTP port stays open after the job ends' })
    .option('insecure-no-token', { type: 'boolean', default: false, describe: 'allow an --http-host other than loopback without --http-token-file (anyone on the network can watch the job)' })
    .option('http-event-seconds', { type: 'number', default: 600, describe: 'an event stream (/api/events) ends after this many seconds and the browser reconnects, so a client that never reads holds its slot no longer' })
    .option('local-baseline', { type: 'string', describe: 'JSON file {"party", "objective", "test"}: a model on the label holder\'s own features, shown on the dashboard beside the job\'s' })
    .option('log-level', { choices: LOG_LEVELS, default: 'info' as const })
    .parseSync();
  const parties = a.parties.flatMap((p) => String(p).split(',')).map((p) => p.trim()).filter((p) => p !== '');
  for (const p of parties) if (!NAME_RE.test(p)) throw new ConfigError(`--parties: '${p}' is not a valid party id (letters, digits, . _ -)`);
  const jobId = a.job ?? `job-${randomBytes(4).toString('hex')}`;
  if (!NAME_RE.test(jobId)) throw new ConfigError(`--job: '${jobId}' is not a valid job id (letters, digits, . _ -)`);
  const alpha = requirePositive('alpha', a.alpha);
  if (a['label-seed'] !== undefined && a['label-epsilon'] === undefined) throw new ConfigError('--label-seed needs --label-epsilon');
  const labelPrivacy = a['label-epsilon'] === undefined ? undefined : { epsilon: requirePositive('label-epsilon', a['label-epsilon']), ...(a['label-seed'] !== undefined ? { seed: a['label-seed'] } : {}) };
  if (alpha >= 2) throw new ConfigError(`--alpha must be in (0, 2), got ${alpha}`);
  const httpPort = a['http-port'];
  if (httpPort === undefined && a['http-token-file'] !== undefined) throw new ConfigError('--http-token-file needs --http-port');
  if (httpPort === undefined && a['http-linger'] !== 0) throw new ConfigError('--http-linger needs --http-port');
  if (httpPort === undefined && a['local-baseline'] !== undefined) throw new ConfigError('--local-baseline needs --http-port (it is shown on the dashboard)');
  const localBaseline = a['local-baseline'] === undefined ? undefined : readLocalBaseline(a['local-baseline']);
  const httpToken = readHttpToken(a['http-token-file']);
  if (httpPort !== undefined) requireTokenOffLoopback(a['http-host'], httpToken, a['insecure-no-token']);
  return {
    host: a.host,
    port: requireInteger('port', a.port, 0),
    labels: resolve(a.labels),
    testLabels: a['test-labels'] ? resolve(a['test-labels']) : undefined,
    testSelection: testSelectionOf({ holdout: a.holdout, holdoutSeed: a['holdout-seed'], testIds: a['test-ids'] === undefined ? undefined : resolve(a['test-ids']), testLabels: a['test-labels'] }),
    labelOptions: { format: a['label-format'], ids: a['id-mode'], idColumn: a['id-column'], labelColumn: a['label-column'], encoding: a['id-encoding'] },
    parties,
    jobId,
    loss: a.loss,
    algorithm: a.algorithm,
    activeParty: a['active-party'],
    labelPrivacy,
    ...(a['class-weight'] !== undefined ? { classWeight: parseClassWeight(a['class-weight']) } : {}),
    sgd: {
      batchSize: requireInteger('batch-size', a['batch-size'], 1),
      lr: requirePositive('lr', a.lr),
      lrDecay: requireNonNegative('lr-decay', a['lr-decay']),
    },
    // The corrected loss of label privacy needs a stronger ridge by default (LABEL_PRIVACY_LAMBDA).
    lambda: a.lambda === undefined ? (labelPrivacy ? LABEL_PRIVACY_LAMBDA : DEFAULT_LAMBDA) : requireNonNegative('lambda', a.lambda),
    variant: a.variant,
    rho: a.rho === undefined ? undefined : requirePositive('rho', a.rho),
    alpha,
    anderson: requireAnderson(a.anderson),
    maxRounds: requireInteger('rounds', a.rounds, 1),
    tolerance: { abs: requireNonNegative('tol-abs', a['tol-abs']), rel: requireNonNegative('tol-rel', a['tol-rel']) },
    evalEvery: requireInteger('eval-every', a['eval-every'], 0),
    out: resolve(a.out),
    helloTimeoutMs: requireInteger('hello-timeout', a['hello-timeout'], 1),
    roundTimeoutMs: requireInteger('round-timeout', a['round-timeout'], 1),
    heartbeatMs: requireInteger('heartbeat', a.heartbeat, MIN_HEARTBEAT_MS),
    rejoinTimeoutMs: requireInteger('rejoin-timeout', a['rejoin-timeout'], 0),
    maxRowsFactor: requirePositive('max-rows-factor', a['max-rows-factor']),
    psiCache: psiCacheFlags(a),
    credentials: a.credentials === undefined ? undefined : readCredentials(a.credentials),
    checkpoint: checkpointPolicy(a['checkpoint-every'], a['checkpoint-seconds']),
    resume: a.resume,
    jobIdGiven: a.job !== undefined,
    tls: readTls(a['tls-cert'], a['tls-key'], a['tls-client-ca']),
    ...(httpPort !== undefined
      ? {
          http: {
            host: a['http-host'],
            port: requireInteger('http-port', httpPort, 0),
            ...(httpToken !== undefined ? { token: httpToken } : {}),
            lingerMs: Math.round(1000 * requireNonNegative('http-linger', a['http-linger'])),
            eventStreamMs: Math.round(1000 * requirePositive('http-event-seconds', a['http-event-seconds'])),
            ...(localBaseline ? { localBaseline } : {}),
          },
        }
      : {}),
    logLevel: a['log-level'],
  };
}

/** The coordinator's JSON log ends with one human-readable line saying how the job ended. */
async function startAndReport(config: CoordinatorConfig, logger: Logger) {
  const handle = await start(config, { logger });
  const done = handle.done
    .then((summary) => {
      process.stdout.write(`${TOOL}: ${resultLine(summary, join(config.out, 'summary.json'))}\n`);
      return summary;
    })
    // The process ends when the job has and the HTTP port has closed (--http-linger).
    .finally(() => handle.httpClosed);
  return { ...handle, done };
}

/** The flags `predict` and `serve` share: the model, the network, the parties' credentials, what to do with ids a party lacks. */
function scoringCommand(argv: string[], name: string, usage: string) {
  return psiCacheOptions(commandLine(argv, `${TOOL} ${name}`, 'ADMM_COORDINATOR'), 'party')
    .usage(usage)
    .option('model', { type: 'string', demandOption: true, describe: 'the trained job\'s description: job.json in the training run\'s --out' })
    .option('job', { type: 'string', describe: 'this prediction job\'s id (default: random); a party\'s scoring budget is per job' })
    .option('host', { type: 'string', default: '127.0.0.1', describe: 'address the parties connect to' })
    .option('port', { type: 'number', default: 7070, describe: '0 picks a free port (see the "listening" log line)' })
    .option('missing', { choices: MISSING_POLICIES, default: 'error' as const, describe: "an id a party does not hold: error, or partial (scored without that party's part, flagged in the output)" })
    .option('credentials', { type: 'string', describe: 'JSON file {"party-id": "secret", ...}, as in training' })
    .option('tls-cert', { type: 'string' })
    .option('tls-key', { type: 'string' })
    .option('tls-client-ca', { type: 'string' })
    .option('hello-timeout', { type: 'number', default: 10_000 })
    .option('heartbeat', { type: 'number', default: HEARTBEAT_MS })
    .option('log-level', { choices: LOG_LEVELS, default: 'info' as const });
}

type ScoringArgs = ReturnType<ReturnType<typeof scoringCommand>['parseSync']>;

function scoringNet(a: ScoringArgs, requestTimeout: number) {
  const jobId = a.job ?? `predict-${randomBytes(4).toString('hex')}`;
  if (!NAME_RE.test(jobId)) throw new ConfigError(`--job: '${jobId}' is not a valid job id (letters, digits, . _ -)`);
  return {
    host: a.host,
    port: requireInteger('port', a.port, 0),
    tls: readTls(a['tls-cert'], a['tls-key'], a['tls-client-ca']),
    credentials: a.credentials === undefined ? undefined : readCredentials(a.credentials),
    jobId,
    model: resolve(a.model),
    missing: a.missing,
    helloTimeoutMs: requireInteger('hello-timeout', a['hello-timeout'], 1),
    requestTimeoutMs: requireInteger('request-timeout', requestTimeout, 1),
    heartbeatMs: requireInteger('heartbeat', a.heartbeat, MIN_HEARTBEAT_MS),
    psiCache: psiCacheFlags(a),
    logLevel: a['log-level'],
  };
}

export function parsePredictArgs(argv: string[]): PredictConfig & { logLevel: LogLevel } {
  const a = scoringCommand(
    argv,
    'predict',
    '$0 --model RUN/job.json (--ids FILE | --labels FILE) [--out predictions.csv] [options]\n\nScore new rows with a trained model: the parties (admm-party predict) join with their model files, their ids are intersected with the ids to score (ECDH PSI), each sends its part of the scores, and predictions.csv is written.',
  )
    .option('ids', { type: 'string', describe: 'the ids to score: CSV with an id column, or LIBSVM' })
    .option('labels', { type: 'string', describe: 'instead of --ids: the ids with their labels (CSV id,label or LIBSVM), to report metrics' })
    .option('format', { choices: FILE_FORMATS, default: 'auto' as const })
    .option('id-mode', { choices: LABEL_ID_MODES, default: 'auto' as const, describe: 'LIBSVM: where sample ids come from' })
    .option('id-column', { type: 'string', default: 'id' })
    .option('id-encoding', ID_ENCODING_OPTION)
    .option('label-column', { type: 'string', default: 'label' })
    .option('out', { type: 'string', default: 'predictions.csv', describe: 'the predictions (written atomically); a summary goes next to it (.json)' })
    .option('request-timeout', { type: 'number', default: 600_000, describe: 'ms a party has to answer' })
    .option('max-rows-factor', { type: 'number', default: 10, describe: 'a party may declare at most this many times the ids to score' })
    .parseSync();
  if ((a.ids === undefined) === (a.labels === undefined)) throw new ConfigError('give the rows to score with --ids FILE, or with their labels (for metrics) with --labels FILE');
  return {
    ...scoringNet(a, a['request-timeout']),
    ids: resolve((a.ids ?? a.labels)!),
    labels: a.labels !== undefined,
    idOptions: { format: a.format, ids: a['id-mode'], idColumn: a['id-column'], labelColumn: a['label-column'], encoding: a['id-encoding'] },
    out: resolve(a.out),
    maxRowsFactor: requirePositive('max-rows-factor', a['max-rows-factor']),
  };
}

export function parseServeArgs(argv: string[]): ServeConfig & { logLevel: LogLevel } {
  const a = scoringCommand(
    argv,
    'serve',
    '$0 --model RUN/job.json --http-port PORT [options]\n\nOnline scoring: keep the parties (admm-party predict) connected and answer POST /score {"ids": [...]} with the model\'s scores and probabilities.',
  )
    .option('http-host', { type: 'string', default: '127.0.0.1', describe: 'address of the HTTP endpoint' })
    .option('http-port', { type: 'number', demandOption: true, describe: 'port of POST /score and GET /healthz (0 picks a free one)' })
    .option('http-token-file', { type: 'string', describe: 'file holding the bearer token every request must carry (Authorization: Bearer TOKEN)' })
    .option('max-request-ids', { type: 'number', default: 1000, describe: 'ids per request' })
    .option('max-body-bytes', { type: 'number', default: 1 << 20, describe: 'size of a request body' })
    .option('max-concurrent', { type: 'number', default: 8, describe: 'requests in flight, counted before their body is read; more get 429' })
    .option('max-connections', { type: 'number', default: 64, describe: 'open HTTP connections; more get 503 and are closed' })
    .option('max-ids-per-minute', { type: 'number', default: 6000, describe: 'ids sent to the parties per bearer token and minute (a burst of up to that many); more get 429 with Retry-After' })
    .option('insecure-no-token', { type: 'boolean', default: false, describe: 'allow an --http-host other than loopback without --http-token-file (anyone on the network can score, and test which ids the parties hold)' })
    .option('request-timeout', { type: 'number', default: 5_000, describe: "ms a party has to answer a request's lookup and score (then 504)" })
    .option('max-party-rows', { type: 'number', default: 10_000_000, describe: 'rows a party may hold (bounds the frame of its ids)' })
    .parseSync();
  const tokenText = readHttpToken(a['http-token-file']);
  requireTokenOffLoopback(a['http-host'], tokenText, a['insecure-no-token']);
  return {
    ...scoringNet(a, a['request-timeout']),
    httpHost: a['http-host'],
    httpPort: requireInteger('http-port', a['http-port'], 0),
    ...(tokenText !== undefined ? { httpToken: tokenText } : {}),
    maxRequestIds: requireInteger('max-request-ids', a['max-request-ids'], 1),
    maxBodyBytes: requireInteger('max-body-bytes', a['max-body-bytes'], 1),
    maxConcurrent: requireInteger('max-concurrent', a['max-concurrent'], 1),
    maxConnections: requireInteger('max-connections', a['max-connections'], 1),
    maxIdsPerMinute: requireInteger('max-ids-per-minute', a['max-ids-per-minute'], 1),
    maxRows: requireInteger('max-party-rows', a['max-party-rows'], 1),
  };
}

const args = hideBin(process.argv);
if (args[0] === 'predict')
  void runService(`${TOOL} predict`, () => parsePredictArgs(args.slice(1)), (config, logger) => {
    const done = predict(config, logger).then((s) => process.stdout.write(`${TOOL} predict: ${predictLine(s)}\n`));
    return { done, close: () => undefined };
  });
else if (args[0] === 'serve') void runService(`${TOOL} serve`, () => parseServeArgs(args.slice(1)), (config, logger) => serve(config, logger));
else void runService(TOOL, () => parseArgs(args), (config, logger) => startAndReport(config, logger));
