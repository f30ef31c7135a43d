import { resolve } from 'node:path';
import { hideBin } from 'yargs/helpers';
import { type MissingStrategy, ConfigError, DEFAULT_MISSING_TOKENS, FILE_FORMATS, ID_ENCODING_OPTION, ID_MODES, MISSING_STRATEGIES } from '@admm-share/core';
import { LOG_LEVELS, type LogLevel, commandLine, psiCacheFlags, psiCacheOptions, readFlagFile, readTokenFile, requireInteger, requirePositive, runService } from '@admm-share/runtime';
import { HEARTBEAT_TIMEOUT_MS, MECHANISMS, MIN_HEARTBEAT_MS, NAME_RE, REJOIN_TIMEOUT_MS, ROLES } from '@admm-share/protocol';
import { MAX_LABEL_FACTOR, MAX_LABEL_SETS_PER_JOB, type PartyConfig, type ScoringConfig, start, startScoring } from './party.js';
import { DEFAULT_BX } from './privacy/mechanism.js';
import { type PreparationFlags, DEFAULT_PREPARE_SHARE } from './preparation/data.js';
import { RELEASE_DEFAULTS } from './privacy/release.js';
import { DEFAULT_PRIVACY_REQUESTS, DEFAULT_SCORE_CLIP } from './scoring/scoring.js';
import type { ClientTls } from './transport/tls.js';

const TOOL = 'admm-party';

function readTls(ca?: string, cert?: string, key?: string): ClientTls | undefined {
  if ((cert === undefined) !== (key === undefined)) throw new ConfigError('--tls-cert and --tls-key go together');
  if (ca === undefined && cert === undefined) return undefined;
  return {
    ...(ca ? { ca: readFlagFile('tls-ca', ca) } : {}),
    ...(cert ? { cert: readFlagFile('tls-cert', cert), key: readFlagFile('tls-key', key!) } : {}),
  };
}

function readToken(file: string | undefined, token: string | undefined): string | undefined {
  if (file !== undefined && token !== undefined) throw new ConfigError('give --token-file or --token, not both');
  if (file === undefined) return token;
  return readTokenFile('token-file', file);
}

/** The flags of the connection and the party's identity, shared by training and prediction, checked. */
interface LinkArgs {
  coordinator: string;
  id: string;
  job?: string;
  'connect-timeout': number;
  'reconnect-timeout': number;
  'heartbeat-timeout': number;
  'token-file'?: string;
  token?: string;
  'tls-ca'?: string;
  'tls-cert'?: string;
  'tls-key'?: string;
  'max-label-factor': number;
  'log-level': LogLevel;
}

function linkFlags(a: LinkArgs) {
  if (!NAME_RE.test(a.id)) throw new ConfigError(`--id: '${a.id}' is not a valid party id (letters, digits, . _ -)`);
  if (a.job !== undefined && !NAME_RE.test(a.job)) throw new ConfigError(`--job: '${a.job}' is not a valid job id`);
  return {
    coordinator: a.coordinator,
    partyId: a.id,
    jobId: a.job ?? null,
    connectTimeoutMs: requireInteger('connect-timeout', a['connect-timeout'], 1),
    reconnectTimeoutMs: requireInteger('reconnect-timeout', a['reconnect-timeout'], 0),
    heartbeatTimeoutMs: requireInteger('heartbeat-timeout', a['heartbeat-timeout'], MIN_HEARTBEAT_MS),
    token: readToken(a['token-file'], a.token),
    tls: readTls(a['tls-ca'], a['tls-cert'], a['tls-key']),
    maxLabelFactor: requirePositive('max-label-factor', a['max-label-factor']),
    logLevel: a['log-level'],
  };
}

export function parseArgs(argv: string[]): PartyConfig & { logLevel: LogLevel } {
  const a = psiCacheOptions(commandLine(argv, TOOL, 'ADMM_PARTY'), 'coordinator')
    .usage('$0 --coordinator ws://HOST:PORT --id ID --data FILE [options]\n\nRun one party: its feature block and its part of the model stay in this process.')
    .option('coordinator', { type: 'string', demandOption: true, describe: 'coordinator URL, ws://host:port' })
    .option('id', { type: 'string', demandOption: true, describe: 'this party\'s id, as listed in the coordinator\'s --parties' })
    .option('job', { type: 'string', describe: 'join only this job id' })
    .option('data', { type: 'string', demandOption: true, describe: 'training features: LIBSVM, or CSV with a header and an id column' })
    .option('test', { type: 'string', describe: 'test features, same format and columns' })
    .option('format', { choices: FILE_FORMATS, default: 'auto' as const, describe: 'auto: .csv is CSV, anything else LIBSVM' })
    .command('predict', "score new rows with this party's trained model (admm-party predict --help)")
    .option('id-mode', {
      alias: 'ids',
      choices: ID_MODES,
      default: 'auto' as const,
      describe: 'LIBSVM sample ids: first token (first), qid:ID (qid), row number (row); auto = qid if present, else row',
    })
    .option('id-column', { type: 'string', default: 'id', describe: 'CSV: name of the id column' })
    .option('id-encoding', ID_ENCODING_OPTION)
    .option('features', { type: 'number', describe: 'number of feature columns (default: largest index in the training file)' })
    .option('intercept', { type: 'boolean', default: false, describe: 'fit an unpenalised intercept here (one party at most)' })
    .option('prepare', { type: 'boolean', describe: 'prepare the data (columns, missing values, categories, standardisation); default: on for CSV, off for LIBSVM (--no-prepare turns it off)' })
    .option('columns', { type: 'string', describe: 'CSV: use only these columns as features, comma-separated names' })
    .option('exclude-columns', { type: 'string', describe: 'CSV: leave these columns out (the label column, when the file holds it), comma-separated' })
    .option('categorical', { type: 'string', describe: 'one-hot these columns (comma-separated names); their categories are saved with the model' })
    .option('missing', { choices: MISSING_STRATEGIES, describe: 'fill a missing value with the column\'s mean, median or zero, or drop its row (not at a party with a budget); default: a missing value is an error' })
    .option('missing-values', { type: 'string', default: DEFAULT_MISSING_TOKENS.join(','), describe: 'the values that mean missing, comma-separated (default: empty, NA and ?)' })
    .option('missing-indicator', { type: 'string', describe: 'add a 0/1 column <name>_missing for these columns, comma-separated' })
    .option('scale', { choices: ['standard', 'none'] as const, default: 'standard' as const, describe: 'prepared numeric columns: standardised (standard), or kept in their units (none)' })
    .option('prepare-spec', { type: 'string', describe: 'JSON file of declared public values per column: {"columns": {"age": {"range": [18, 100]}, "income": {"mean": 5e4, "scale": 3e4}, "region": {"categories": ["north", "south"]}}}' })
    .option('prepare-share', { type: 'number', default: DEFAULT_PREPARE_SHARE, describe: 'with --epsilon: the share of the budget (of mu^2 in Gaussian DP) spent estimating the statistics not declared in --prepare-spec (docs/privacy.md, section 13)' })
    .option('model', { type: 'string', describe: 'model file to write (default: model-ID.json)' })
    .option('connect-timeout', { type: 'number', default: 30_000, describe: 'ms to keep trying to join: a coordinator not listening yet or busy (4014) is retried with backoff' })
    .option('heartbeat-timeout', { type: 'number', default: HEARTBEAT_TIMEOUT_MS, describe: 'ms without a ping or message from the coordinator before the connection is treated as dead' })
    .option('reconnect-timeout', { type: 'number', default: REJOIN_TIMEOUT_MS, describe: 'ms to keep trying to rejoin after losing the connection during the job' })
    .option('role', {
      choices: ROLES,
      default: 'passive' as const,
      describe: "active: this party belongs to the label holder's organisation (the coordinator's --active-party): it gets the labels, sends no noise and fits the combined model",
    })
    .option('mechanism', {
      choices: MECHANISMS,
      describe:
        'privacy mechanism; with --epsilon, the one that fits the job (score-release in a one-shot job, gaussian-share in an ADMM job). Required at a passive party: a budget, or --mechanism none to send without noise',
    })
    .option('epsilon', { type: 'number', describe: 'privacy budget for the whole training' })
    .option('delta', { type: 'number', default: 1e-5, describe: 'privacy delta for the whole training' })
    .option('seed', { type: 'string', describe: 'seed the noise (PREDICTABLE: reproducible experiments only)' })
    .option('bx', { type: 'number', default: DEFAULT_BX, describe: 'gaussian-share: bound on ||x_m||' })
    .option('bw', { type: 'number', describe: 'gaussian-share: clip of the target, per sample (default 3 bx + 1/(N rho))' })
    .option('b1', { type: 'number', describe: 'paper: Lemma 1 bound b1 on ||x||, ||y||, ||z||' })
    .option('c1', { type: 'number', describe: 'paper: Lemma 1 bound c1 on R\'\'' })
    .option('release-kappa', { type: 'number', default: RELEASE_DEFAULTS.kappa, describe: 'score-release: ridge penalty of the passive model (docs/privacy.md, section 9)' })
    .option('release-bx', { type: 'number', default: RELEASE_DEFAULTS.bx, describe: 'score-release: bound on ||x_m||' })
    .option('release-clip', { type: 'number', default: RELEASE_DEFAULTS.clip, describe: 'score-release: each released score is clipped to [-clip, clip]' })
    .option('privacy-rounds', { type: 'number', describe: 'calibrate the noise for at most this many rounds (default: the coordinator\'s plan)' })
    .option('release-test-scores', { type: 'boolean', default: false, describe: 'with privacy on, still send un-noised test-set scores for evaluation' })
    .option('token-file', { type: 'string', describe: 'file holding this party\'s secret (shared with the coordinator\'s credentials)' })
    .option('token', { type: 'string', describe: 'the secret itself (prefer --token-file or ADMM_PARTY_TOKEN: command lines are visible to other users)' })
    .option('tls-ca', { type: 'string', describe: 'wss://: trust only this CA (PEM) for the coordinator\'s certificate' })
    .option('tls-cert', { type: 'string', describe: 'mutual TLS: this party\'s client certificate (PEM)' })
    .option('tls-key', { type: 'string', describe: 'mutual TLS: its private key (PEM)' })
    .option('max-label-factor', { type: 'number', default: MAX_LABEL_FACTOR, describe: "the coordinator's label ids of a set may be at most this many times this party's rows (plus 1024): it bounds how many candidate ids the coordinator can test against this party's" })
    .option('max-probe-ids-per-day', { type: 'number', describe: "candidate ids this party answers per coordinator (its --coordinator URL) and UTC day, kept beside its ledger (default 4 x (training + test rows) + 1024; docs/privacy.md, Membership probing)" })
    .option('max-label-sets-per-job', { type: 'number', default: MAX_LABEL_SETS_PER_JOB, describe: 'different label sets of one set answered per job (a rejoin, or a coordinator restarted with its --out, resends the same set); raise it only for a coordinator that lost its --out folder' })
    .option('threads', {
      type: 'string',
      default: 'auto',
      describe: "threads beside the party's own for a large dense block's per-round products and set-up factorisation (auto: one less than the cores, at most 3, for a dense block of 2^23 entries (64 MiB) or more; 0 when parties share a machine's cores)",
    })
    .option('log-level', { choices: LOG_LEVELS, default: 'info' as const })
    .parseSync();
  if (a.role === 'active') {
    // The label holder's own organisation: --role active is its explicit choice to send without noise.
    if (a.epsilon !== undefined || (a.mechanism !== undefined && a.mechanism !== 'none'))
      throw new ConfigError("--role active sends no noise (it is the label holder's own organisation); drop --epsilon/--mechanism, or run it as a passive party");
  } else if (a.mechanism === undefined && a.epsilon === undefined)
    throw new ConfigError('choose a privacy setting: --epsilon E [--delta D] for differentially private releases, or --mechanism none to send without noise (or --role active at the label holder\'s own party)');
  const mechanism = a.role === 'active' ? 'none' : (a.mechanism ?? 'auto');
  return {
    ...linkFlags(a),
    data: resolve(a.data),
    test: a.test ? resolve(a.test) : undefined,
    read: {
      format: a.format,
      ids: a['id-mode'],
      idColumn: a['id-column'],
      encoding: a['id-encoding'],
      features: a.features === undefined ? undefined : requireInteger('features', a.features, 1),
    },
    prepare: prepareFlags(a),
    intercept: a.intercept,
    role: a.role,
    privacy: {
      mechanism,
      epsilon: a.epsilon,
      delta: mechanism === 'none' ? undefined : a.delta,
      seed: a.seed,
      bx: a.bx,
      bw: a.bw,
      b1: a.b1,
      c1: a.c1,
      rounds: a['privacy-rounds'],
      release: { kappa: a['release-kappa'], bx: a['release-bx'], clip: a['release-clip'] },
    },
    releaseTestScores: a['release-test-scores'],
    model: resolve(a.model ?? `model-${a.id}.json`),
    threads: parseThreads(a.threads),
    ...(a['max-probe-ids-per-day'] !== undefined ? { maxProbeIdsPerDay: requireInteger('max-probe-ids-per-day', a['max-probe-ids-per-day'], 0) } : {}),
    maxLabelSetsPerJob: requireInteger('max-label-sets-per-job', a['max-label-sets-per-job'], 1),
    psiCache: psiCacheFlags(a),
  };
}

/** A comma-separated list of names; empty entries are dropped. */
function names(flag: string, v: string | undefined): string[] | undefined {
  if (v === undefined) return undefined;
  const list = v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (list.length === 0) throw new ConfigError(`--${flag} is empty: give comma-separated column names`);
  return list;
}

function prepareFlags(a: {
  prepare?: boolean;
  columns?: string;
  'exclude-columns'?: string;
  categorical?: string;
  missing?: MissingStrategy;
  'missing-values': string;
  'missing-indicator'?: string;
  'prepare-spec'?: string;
  'prepare-share': number;
  scale: 'standard' | 'none';
}): PreparationFlags {
  const share = a['prepare-share'];
  if (!(share > 0 && share < 1)) throw new ConfigError(`--prepare-share ${share}: give a share of the budget in (0, 1)`);
  return {
    prepare: a.prepare,
    columns: names('columns', a.columns),
    exclude: names('exclude-columns', a['exclude-columns']),
    categorical: names('categorical', a.categorical),
    missing: a.missing,
    missingTokens: a['missing-values'].split(',').map((s) => s.trim()),
    indicators: names('missing-indicator', a['missing-indicator']),
    spec: a['prepare-spec'] === undefined ? undefined : resolve(a['prepare-spec']),
    scale: a.scale === 'standard',
    share,
  };
}

/** `admm-party predict`: score new rows with this party's trained model (a batch prediction job, or online scoring). */
export function parsePredictArgs(argv: string[]): ScoringConfig & { logLevel: LogLevel } {
  const a = psiCacheOptions(commandLine(argv, `${TOOL} predict`, 'ADMM_PARTY'), 'coordinator')
    .usage(
      '$0 --coordinator ws://HOST:PORT --id ID --model FILE --data FILE (--epsilon E | --mechanism none) [options]\n\nScore new rows with this party\'s trained model: only this party\'s part of each score leaves the process. The coordinator (admm-coordinator predict or serve) ends the job.',
    )
    .option('coordinator', { type: 'string', demandOption: true, describe: 'coordinator URL, ws://host:port' })
    .option('id', { type: 'string', demandOption: true, describe: "this party's id, as in training" })
    .option('job', { type: 'string', describe: 'join only this prediction job id' })
    .option('model', { type: 'string', demandOption: true, describe: 'the model file this party wrote in training' })
    .option('data', { type: 'string', demandOption: true, describe: 'the new rows: LIBSVM, or CSV with a header and an id column, with the columns of training' })
    .option('format', { choices: FILE_FORMATS, default: 'auto' as const })
    .option('id-mode', { alias: 'ids', choices: ID_MODES, default: 'auto' as const, describe: 'LIBSVM sample ids: first token (first), qid:ID (qid), row number (row)' })
    .option('id-column', { type: 'string', default: 'id', describe: 'CSV: name of the id column' })
    .option('id-encoding', ID_ENCODING_OPTION)
    .option('mechanism', { choices: ['none'] as const, describe: 'none: send this party\'s scores without noise (an explicit choice)' })
    .option('epsilon', { type: 'number', describe: 'privacy budget for this prediction job: Gaussian noise on each score (docs/privacy.md, section 12)' })
    .option('delta', { type: 'number', default: 1e-5 })
    .option('privacy-requests', { type: 'number', default: DEFAULT_PRIVACY_REQUESTS, describe: 'requests the budget is spread over: a batch job is one; online scoring needs as many as it will serve (the party refuses requests beyond them)' })
    .option('score-clip', { type: 'number', describe: `with --epsilon: each score is clipped to [-clip, clip] before the noise (default: the model's own clip, else ${DEFAULT_SCORE_CLIP})` })
    .option('seed', { type: 'string', describe: 'seed the noise (PREDICTABLE: reproducible experiments only)' })
    .option('connect-timeout', { type: 'number', default: 30_000 })
    .option('heartbeat-timeout', { type: 'number', default: HEARTBEAT_TIMEOUT_MS })
    .option('reconnect-timeout', { type: 'number', default: REJOIN_TIMEOUT_MS, describe: 'ms to keep trying to reconnect after losing the connection' })
    .option('token-file', { type: 'string' })
    .option('token', { type: 'string' })
    .option('tls-ca', { type: 'string' })
    .option('tls-cert', { type: 'string' })
    .option('tls-key', { type: 'string' })
    .option('max-label-factor', { type: 'number', default: MAX_LABEL_FACTOR, describe: 'the ids to score may be at most this many times this party\'s rows (plus 1024)' })
    .option('max-probe-ids-per-day', { type: 'number', describe: 'ids to score and ids looked up that this party answers per coordinator (its --coordinator URL) and UTC day (default 4 x rows + 1024; docs/privacy.md, Membership probing)' })
    .option('max-lookup-ids-per-connection', { type: 'number', describe: 'ids looked up per connection; a lookup beyond is refused, the party stays (default rows + 1024)' })
    .option('log-level', { choices: LOG_LEVELS, default: 'info' as const })
    .parseSync();
  if (a.mechanism === undefined && a.epsilon === undefined)
    throw new ConfigError('choose a privacy setting for the scores: --epsilon E [--delta D] to noise them, or --mechanism none to send them without noise');
  if (a.mechanism !== undefined && a.epsilon !== undefined) throw new ConfigError('--mechanism none and --epsilon contradict each other');
  return {
    ...linkFlags(a),
    model: resolve(a.model),
    data: resolve(a.data),
    read: { format: a.format, ids: a['id-mode'], idColumn: a['id-column'], encoding: a['id-encoding'] },
    psiCache: psiCacheFlags(a),
    ...(a['max-probe-ids-per-day'] !== undefined ? { maxProbeIdsPerDay: requireInteger('max-probe-ids-per-day', a['max-probe-ids-per-day'], 0) } : {}),
    ...(a['max-lookup-ids-per-connection'] !== undefined ? { maxLookupIdsPerConnection: requireInteger('max-lookup-ids-per-connection', a['max-lookup-ids-per-connection'], 0) } : {}),
    privacy:
      a.epsilon === undefined
        ? null
        : {
            epsilon: requirePositive('epsilon', a.epsilon),
            delta: requirePositive('delta', a.delta),
            requests: requireInteger('privacy-requests', a['privacy-requests'], 1),
            ...(a['score-clip'] !== undefined ? { clip: requirePositive('score-clip', a['score-clip']) } : {}),
            ...(a.seed !== undefined ? { seed: a.seed } : {}),
          },
  };
}

const args = hideBin(process.argv);
if (args[0] === 'predict') void runService(`${TOOL} predict`, () => parsePredictArgs(args.slice(1)), (config, logger) => startScoring(config, { logger }));
else void runService(TOOL, () => parseArgs(args), (config, logger) => start(config, { logger }));

/** --threads: 'auto' or a whole number. */
function parseThreads(v: string): number | 'auto' {
  if (v === 'auto') return v;
  if (!/^\d+$/.test(v)) throw new ConfigError(`--threads must be 'auto' or a whole number of threads, got '${v}'`);
  return requireInteger('threads', Number(v), 0);
}
