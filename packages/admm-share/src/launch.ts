// Launching a simulated job: the job id and the parties' credentials, the coordinator's and
// each party's command line (hyper-parameters, files, privacy flags), starting them as
// separate processes on localhost, and turning the first failure into an error naming it.
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { EXIT, PeerError } from '@admm-share/core';
import type { AlgorithmName, MechanismName, Variant } from '@admm-share/protocol';
import { SimulationError } from './errors.js';
import { COORDINATOR_NODE_FLAGS, type Child, PARTY_ENV, PARTY_NODE_FLAGS, binPath, killAll, spawnNode } from './processes.js';
import type { Progress } from '@admm-share/runtime';
import { writeCredentials } from './credentials.js';
import type { PartyFiles, SplitFiles } from './split.js';

/** The flags of `simulate` that become the coordinator's and the parties' flags. */
export interface LaunchOptions {
  lambda: number;
  rounds: number;
  variant: Variant;
  algorithm?: AlgorithmName | 'auto';
  /** sgd: batch size, learning rate and its decay (coordinator defaults when absent). */
  sgd?: { batchSize?: number; lr?: number; lrDecay?: number };
  rho?: number;
  alpha: number;
  /** Anderson acceleration's memory (0: off). */
  anderson: number;
  evalEvery: number;
  intercept: boolean;
  /** Each party prepares (standardises) its data: admm-party --prepare. */
  prepare?: boolean;
  privacy: SimulatePrivacy;
  /** The party of the label holder's organisation (--active-party / --role active), or none. */
  activeParty?: string;
  /** The coordinator's HTTP port (its dashboard): the port (0: a free one) and the seconds it stays open after the job. */
  dashboard?: { port: number; lingerSeconds: number; localBaseline?: string };
  /** Label privacy at the coordinator (--label-epsilon; with --seed S, flips seeded by `S/labels`). */
  labelPrivacy?: { epsilon: number; seed?: string };
  /** Each party's --threads (default sharedMachineThreads). */
  partyThreads?: number;
  /** The coordinator's --class-weight, as given (the labels simulate writes are -1 and 1). */
  classWeight?: string;
  /** Every process's --psi-cache, in a folder of its own under this one (psiCacheArgs). */
  psiCache?: string;
}

/** --psi-cache for the coordinator (`coordinator`) or a party, under the folder `dir` that simulate and predict are given. */
export function psiCacheArgs(dir: string | undefined, process: 'coordinator' | { party: string }): string[] {
  if (dir === undefined) return [];
  return ['--psi-cache', join(dir, process === 'coordinator' ? 'coordinator' : `party-${process.party}`)];
}

/**
 * Threads beside its own for each of `parties` parties on this machine, beside the
 * coordinator: the cores shared out, one per process first (none on 2 cores with 3 parties).
 */
export function sharedMachineThreads(parties: number): number {
  return Math.max(0, Math.floor(availableParallelism() / (parties + 1)) - 1);
}

/** Privacy flags passed to every party; no noise unless asked. */
export interface SimulatePrivacy {
  /** auto: the mechanism that fits the job's algorithm (score-release in a one-shot job). */
  mechanism: MechanismName | 'auto';
  epsilon?: number;
  delta: number;
  /** Noise seed (each party gets `${seed}/${party id}`): predictable, for experiments. */
  seed?: string;
  bx?: number;
  bw?: number;
  b1?: number;
  c1?: number;
}

/** The line `simulate` prints about label privacy (nothing without it). */
export function describeLabelPrivacy({ labelPrivacy: l, lambda }: Pick<LaunchOptions, 'labelPrivacy' | 'lambda'>): string {
  if (!l) return '';
  const p = 1 / (1 + Math.exp(l.epsilon));
  const flips = l.seed !== undefined ? `SEEDED flips ('${l.seed}/labels'): predictable, for experiments only` : 'flips from the OS CSPRNG';
  return `label privacy: label epsilon ${l.epsilon} at the coordinator: randomized response flips each training label with probability ${p.toPrecision(4)} once (${flips}); training uses the loss corrected for the flips, lambda ${lambda}; test labels are not flipped\n`;
}

/** The lines `simulate` prints about the flags below (kept beside them so the two cannot disagree). */
export function describePrivacy(p: SimulatePrivacy, parties: readonly string[], activeParty?: string, algorithm?: LaunchOptions['algorithm']): string {
  const passive = parties.filter((id) => id !== activeParty);
  const roles = activeParty
    ? `roles: ${activeParty} active (the label holder's organisation: gets the labels, sends no noise), ${passive.join(', ')} passive\n`
    : `roles: every party passive${p.mechanism === 'none' ? '' : ' (--active-party none)'}\n`;
  if (p.mechanism === 'none') return `${roles}privacy: none (${activeParty ? 'the passive parties send' : 'every party sends'} without noise)\n`;
  const noise = p.seed !== undefined ? `SEEDED noise ('${p.seed}'): predictable, for experiments only` : 'noise from the OS CSPRNG';
  const caveat = p.mechanism === 'paper' ? "; the paper's mechanism, guarantee NOT established" : '';
  const how =
    algorithm === 'admm' || p.mechanism === 'gaussian-share' || p.mechanism === 'paper'
      ? `${p.mechanism === 'auto' ? 'gaussian-share' : p.mechanism}, RESEARCH MODE: per-round noisy ADMM, known to be worse than going alone at realistic sizes`
      : p.mechanism === 'auto' || p.mechanism === 'score-release'
        ? 'one-shot private training: each passive party releases one clipped, noised score vector'
        : p.mechanism;
  return `${roles}privacy: ${how}; epsilon ${p.epsilon}, delta ${p.delta} per passive party, ${noise}${caveat}; test scores are sent without noise for evaluation\n`;
}

function privacyArgs(p: SimulatePrivacy, party: string, activeParty: string | undefined): string[] {
  if (party === activeParty) return ['--role', 'active'];
  if (p.mechanism === 'none') return ['--mechanism', 'none'];
  if (p.mechanism === 'auto') {
    const args = ['--epsilon', String(p.epsilon), '--delta', String(p.delta), '--release-test-scores'];
    if (p.seed !== undefined) args.push('--seed', `${p.seed}/${party}`);
    return args;
  }
  const args = ['--mechanism', p.mechanism, '--epsilon', String(p.epsilon), '--delta', String(p.delta), '--release-test-scores'];
  if (p.seed !== undefined) args.push('--seed', `${p.seed}/${party}`);
  for (const k of ['bx', 'bw', 'b1', 'c1'] as const) if (p[k] !== undefined) args.push(`--${k}`, String(p[k]));
  return args;
}

/** auto with a per-round mechanism (gaussian-share, paper) means the per-round noisy ADMM they are made for. */
export function algorithmFor(opts: Pick<LaunchOptions, 'algorithm' | 'privacy'>): AlgorithmName | 'auto' {
  const a = opts.algorithm ?? 'auto';
  return a === 'auto' && (opts.privacy.mechanism === 'gaussian-share' || opts.privacy.mechanism === 'paper') ? 'admm' : a;
}

/** One simulated job: where its files are and what identifies it. */
export interface Job {
  id: string;
  /** Output directory (summary, trace, models). */
  dir: string;
  dataDir: string;
  logDir: string;
  files: SplitFiles;
  credentials: string;
}

/** Each party gets its own secret (`<party>.token` in dataDir); the coordinator gets all of them. */
export function newJob(dir: string, dataDir: string, logDir: string, files: SplitFiles): Job {
  const credentials = writeCredentials(dataDir, files.parties.map((p) => p.id), { overwrite: true });
  return { id: `sim-${randomBytes(4).toString('hex')}`, dir, dataDir, logDir, files, credentials };
}

/** The coordinator's flags: an ephemeral localhost port, the label files, the job's hyper-parameters. */
export function coordinatorArgs(opts: LaunchOptions, job: Job): string[] {
  const { files } = job;
  return [
    '--port', '0',
    '--host', '127.0.0.1',
    '--labels', files.labels,
    ...(files.testLabels ? ['--test-labels', files.testLabels] : []),
    '--parties', files.parties.map((p) => p.id).join(','),
    '--job', job.id,
    '--lambda', String(opts.lambda),
    '--rounds', String(opts.rounds),
    '--variant', opts.variant,
    '--algorithm', algorithmFor(opts),
    ...(opts.activeParty ? ['--active-party', opts.activeParty] : []),
    ...(opts.sgd?.batchSize !== undefined ? ['--batch-size', String(opts.sgd.batchSize)] : []),
    ...(opts.sgd?.lr !== undefined ? ['--lr', String(opts.sgd.lr)] : []),
    ...(opts.sgd?.lrDecay !== undefined ? ['--lr-decay', String(opts.sgd.lrDecay)] : []),
    '--alpha', String(opts.alpha),
    '--anderson', String(opts.anderson),
    '--eval-every', String(opts.evalEvery),
    '--out', job.dir,
    '--credentials', job.credentials,
    ...(opts.rho !== undefined ? ['--rho', String(opts.rho)] : []),
    ...(opts.labelPrivacy ? ['--label-epsilon', String(opts.labelPrivacy.epsilon)] : []),
    ...(opts.labelPrivacy?.seed !== undefined ? ['--label-seed', `${opts.labelPrivacy.seed}/labels`] : []),
    ...(opts.classWeight !== undefined ? ['--class-weight', opts.classWeight] : []),
    ...(opts.dashboard ? ['--http-port', String(opts.dashboard.port), '--http-linger', String(opts.dashboard.lingerSeconds)] : []),
    ...(opts.dashboard?.localBaseline ? ['--local-baseline', opts.dashboard.localBaseline] : []),
    ...psiCacheArgs(opts.psiCache, 'coordinator'),
  ];
}

/** The coordinator's log record when the job has completed and its HTTP port stays open (--http-linger). */
const LINGERING = (rec: Record<string, unknown>) => rec.msg === 'job ended; the HTTP port stays open' && rec.job === 'done';

/** Party m's flags: its files and token, its model file, the intercept at party 1, the privacy flags. */
export function partyArgs(opts: LaunchOptions, job: Job, p: PartyFiles, m: number, port: number): string[] {
  return [
    '--coordinator', `ws://127.0.0.1:${port}`,
    '--id', p.id,
    '--job', job.id,
    '--data', p.train,
    ...(p.test ? ['--test', p.test] : []),
    '--ids', 'first',
    '--token-file', join(job.dataDir, `${p.id}.token`),
    '--features', String(p.features),
    '--model', modelPath(job, p.id),
    ...(opts.intercept && m === 0 ? ['--intercept'] : []),
    ...(opts.prepare ? ['--prepare'] : []),
    '--threads', String(opts.partyThreads ?? sharedMachineThreads(job.files.parties.length)),
    ...psiCacheArgs(opts.psiCache, { party: p.id }),
    ...privacyArgs(opts.privacy, p.id, opts.activeParty),
  ];
}

export function modelPath(job: Job, party: string): string {
  return join(job.dir, `model-${party}.json`);
}

/**
 * Start the coordinator, wait for its port, start one party per block, and wait until every
 * process has exited. Each child is in `children` while it runs (the caller kills what is
 * left on a signal or an error). Resolves when all exited with 0, with each party's peak
 * memory (bytes) from its 'model written' log line; with a dashboard, once the job has
 * completed and while the coordinator keeps its HTTP port open (`lingering`: its exit).
 * `onDashboard` gets the dashboard's address as soon as the coordinator listens on it.
 */
export async function runJob(
  opts: LaunchOptions,
  job: Job,
  children: Set<Child>,
  progress: Progress,
  onDashboard?: (url: string) => void,
): Promise<{ peaks: Record<string, number>; lingering: Promise<void> | undefined }> {
  const peaks: Record<string, number> = {};
  const { lingering } = await runProcesses(
    {
      args: coordinatorArgs(opts, job),
      log: join(job.logDir, 'coordinator.log'),
      onRecord: (rec) => {
        if (rec.msg === 'round' && typeof rec.round === 'number') progress.update(rec.round, Number(rec.maxRounds), Number(rec.objective));
        if (rec.msg === 'http listening' && typeof rec.httpPort === 'number') onDashboard?.(`http://${urlHost(String(rec.httpHost))}:${rec.httpPort}/`);
      },
      lingers: LINGERING,
    },
    (port) => {
      progress.message(`coordinator listening on port ${port}; starting ${job.files.parties.length} parties`);
      return job.files.parties.map((p, m) => ({
        name: p.id,
        args: partyArgs(opts, job, p, m, port),
        log: join(job.logDir, `${p.id}.log`),
        onRecord: (rec) => {
          if (rec.msg === 'model written' && typeof rec.peakMemoryBytes === 'number') peaks[p.id] = rec.peakMemoryBytes;
        },
      }));
    },
    children,
  );
  return { peaks, lingering };
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** A process to start: admm-coordinator or admm-party with these arguments, its output to `log`. */
export interface Launch {
  args: string[];
  log: string;
  onRecord?: (rec: Record<string, unknown>) => void;
  /** A record saying the process's work is done though it stays up a while (the coordinator's --http-linger). */
  lingers?: (rec: Record<string, unknown>) => boolean;
}

/**
 * Start admm-coordinator with `coordinator`, wait for its port, start the parties `parties`
 * gives for it, and wait until every process has exited (or the coordinator says it lingers:
 * then `lingering` is its exit); the first to fail decides the error and the rest are stopped.
 */
export async function runProcesses(
  coordinator: Launch,
  parties: (port: number) => (Launch & { name: string })[],
  children: Set<Child>,
): Promise<{ lingering: Promise<void> | undefined }> {
  let resolvePort!: (p: number) => void;
  const portKnown = new Promise<number>((r) => (resolvePort = r));
  let lingers!: () => void;
  const lingering = new Promise<void>((r) => (lingers = r));
  const c = spawnNode(
    'coordinator',
    binPath('coordinator', 'admm-coordinator'),
    coordinator.args,
    coordinator.log,
    (rec) => {
      if (rec.msg === 'listening' && typeof rec.port === 'number') resolvePort(rec.port);
      coordinator.onRecord?.(rec);
      if (coordinator.lingers?.(rec)) lingers();
    },
    COORDINATOR_NODE_FLAGS,
  );
  children.add(c);
  const port = await Promise.race([
    portKnown,
    c.exited.then((e) => {
      throw failure(c, e.code);
    }),
  ]);
  const started = parties(port).map((p) => {
    const child = spawnNode(p.name, binPath('party', 'admm-party'), p.args, p.log, p.onRecord, PARTY_NODE_FLAGS, PARTY_ENV);
    children.add(child);
    return child;
  });
  const [coordinatorExit, ...partyExits] = [c, ...started].map(async (child) => {
    const e = await child.exited;
    children.delete(child);
    if (e.code !== 0) {
      killAll(children);
      throw failure(child, e.code);
    }
  });
  coordinatorExit.catch(() => undefined); // awaited below, or by the caller as `lingering`
  await Promise.all([...partyExits, Promise.race([coordinatorExit, lingering])]);
  return { lingering: children.has(c) ? coordinatorExit : undefined };
}

/** A failed child as an error naming it, with the last line of its stderr; its 64 / 65 pass on, anything else is 69. */
function failure(c: Child, code: number | null): Error {
  const tail = c.stderrTail().trim();
  const exitCode = code === EXIT.config || code === EXIT.data ? code : EXIT.peer;
  if (code === null) return new PeerError(`${c.name} could not be started or was killed`);
  return new SimulationError(`${c.name} exited with code ${code}${tail ? `: ${tail.split('\n').pop()}` : ''}`, exitCode);
}
