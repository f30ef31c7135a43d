// `docker compose up` without a Docker engine (CI has none): docker-compose.yml and the
// Dockerfile are read, and every service's command runs as a local process with the image's
// and the service's environment, in the order depends_on gives, restarted as its restart
// policy says. What a container would see differently is mapped, and only that:
//  - the image: PATH's /app/node_modules/.bin (WORKDIR /app) is this repository's
//    node_modules/.bin, and the base image's PATH is this machine's (node first: the node
//    running the tests); the working directory is an empty temporary folder per service, which
//    the test expects to stay empty (in the image /app belongs to root: a process that wrote
//    there would fail);
//  - named volumes: one temporary folder each; the mount point (/data) in environment values
//    and command arguments becomes that folder;
//  - the network: another service's host name in a URL (ws://coordinator:7070) becomes
//    127.0.0.1, and a process told to listen on 0.0.0.0 listens on 127.0.0.1 (a test listens on
//    this machine only);
//  - ports: every *_PORT variable is set to 0, so that the process takes a free port and the
//    test clashes with nothing else on the machine; the port it reports in its log
//    (PORT_RECORDS) then stands for the file's port wherever the file names it: in other
//    services' URLs, in the service's own healthcheck, and in `ports` (published()). A
//    restarted service gets the port it had.
// Anything in the file that is not emulated here is an error rather than silently ignored.
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { delimiter, dirname, join, posix } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parse } from 'yaml';
import { type Proc, run } from './procs.js';

/** A problem with docker-compose.yml or the Dockerfile that the harness cannot or will not run. */
export class ComposeFileError extends Error {
  override name = 'ComposeFileError';
}

export type Condition = 'service_started' | 'service_healthy' | 'service_completed_successfully';
const CONDITIONS: readonly Condition[] = ['service_started', 'service_healthy', 'service_completed_successfully'];

export interface Healthcheck {
  /** The CMD form's program and arguments (without the leading 'CMD'). */
  command: string[];
  intervalMs: number;
  timeoutMs: number;
  retries: number;
  startPeriodMs: number;
}

export interface PublishedPort {
  hostIp: string | undefined;
  hostPort: number;
  containerPort: number;
}

export interface Service {
  name: string;
  image: string | undefined;
  /** The build section as written (a context path, or an object), compared between services. */
  build: unknown;
  command: string[];
  environment: Record<string, string>;
  dependsOn: { service: string; condition: Condition }[];
  volumes: { source: string; target: string; readOnly: boolean }[];
  ports: PublishedPort[];
  healthcheck: Healthcheck | undefined;
  restart: { policy: 'no' } | { policy: 'on-failure'; maxRetries: number | undefined };
}

export interface ComposeProject {
  file: string;
  services: Map<string, Service>;
  volumes: string[];
  /** Services in an order that starts every service after its dependencies. */
  order: string[];
}

/** Docker's defaults (docker run --health-*): 30 s interval and timeout, 3 retries, no start period. */
const HEALTHCHECK_DEFAULTS = { intervalMs: 30_000, timeoutMs: 30_000, retries: 3, startPeriodMs: 0 };

/** The service keys the harness runs; any other key is refused (it would be ignored). */
const SERVICE_KEYS = new Set(['image', 'build', 'command', 'environment', 'depends_on', 'volumes', 'ports', 'healthcheck', 'restart']);

function where(file: string, path: string): string {
  return `${file}: ${path}`;
}

function asObject(v: unknown, at: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ComposeFileError(`${at}: expected a mapping`);
  return v as Record<string, unknown>;
}

function asString(v: unknown, at: string): string {
  if (typeof v !== 'string') throw new ComposeFileError(`${at}: expected a string, got ${JSON.stringify(v)}`);
  return v;
}

function asStrings(v: unknown, at: string): string[] {
  if (!Array.isArray(v)) throw new ComposeFileError(`${at}: expected a list (the exec form: a string is run by a shell, which the harness does not emulate)`);
  return v.map((x, i) => asString(x, `${at}[${i}]`));
}

/** A compose duration: '1s', '500ms', '1m30s'. */
export function durationMs(v: unknown, at: string): number {
  const text = asString(v, at);
  const unit: Record<string, number> = { us: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(us|ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw new ComposeFileError(`${at}: '${text}' is not a duration such as 1s, 500ms or 1m30s`);
  return parts.reduce((ms, p) => ms + Number(p[1]) * unit[p[2]], 0);
}

/** An environment value: compose takes strings, numbers and booleans; ${VAR} interpolation is not emulated. */
function envValue(v: unknown, at: string): string {
  if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw new ComposeFileError(`${at}: expected a string, number or boolean (a variable without a value, taken from the host, is not emulated)`);
  const s = String(v);
  if (s.includes('$')) throw new ComposeFileError(`${at}: '${s}': variable interpolation is not emulated`);
  return s;
}

function readEnvironment(v: unknown, at: string): Record<string, string> {
  if (v === undefined) return {};
  if (Array.isArray(v)) {
    const out: Record<string, string> = {};
    v.forEach((item, i) => {
      const s = asString(item, `${at}[${i}]`);
      const eq = s.indexOf('=');
      if (eq <= 0) throw new ComposeFileError(`${at}[${i}]: '${s}' is not KEY=VALUE`);
      out[s.slice(0, eq)] = envValue(s.slice(eq + 1), `${at}[${i}]`);
    });
    return out;
  }
  return Object.fromEntries(Object.entries(asObject(v, at)).map(([k, x]) => [k, envValue(x, `${at}.${k}`)]));
}

function readDependsOn(v: unknown, at: string): Service['dependsOn'] {
  if (v === undefined) return [];
  if (Array.isArray(v)) return v.map((x, i) => ({ service: asString(x, `${at}[${i}]`), condition: 'service_started' as const }));
  return Object.entries(asObject(v, at)).map(([service, spec]) => {
    const o = asObject(spec, `${at}.${service}`);
    for (const k of Object.keys(o)) if (k !== 'condition') throw new ComposeFileError(`${at}.${service}.${k}: not emulated by the harness`);
    const condition = o.condition === undefined ? 'service_started' : asString(o.condition, `${at}.${service}.condition`);
    if (!CONDITIONS.includes(condition as Condition)) throw new ComposeFileError(`${at}.${service}.condition: '${condition}' is not one of ${CONDITIONS.join(', ')}`);
    return { service, condition: condition as Condition };
  });
}

function readVolumes(v: unknown, at: string, declared: string[]): Service['volumes'] {
  if (v === undefined) return [];
  return asStrings(v, at).map((spec, i) => {
    const parts = spec.split(':');
    const [source, target, mode = 'rw'] = parts;
    if (parts.length < 2 || parts.length > 3 || !target?.startsWith('/') || (mode !== 'ro' && mode !== 'rw'))
      throw new ComposeFileError(`${at}[${i}]: '${spec}' is not VOLUME:/PATH[:ro|rw]`);
    if (!declared.includes(source)) throw new ComposeFileError(`${at}[${i}]: '${source}' is not a named volume of the top-level volumes (bind mounts are not emulated)`);
    return { source, target: posix.normalize(target), readOnly: mode === 'ro' };
  });
}

function readPorts(v: unknown, at: string): PublishedPort[] {
  if (v === undefined) return [];
  return asStrings(v, at).map((spec, i) => {
    const m = /^(?:(\d{1,3}(?:\.\d{1,3}){3}):)?(\d+):(\d+)(?:\/tcp)?$/.exec(spec);
    if (!m) throw new ComposeFileError(`${at}[${i}]: '${spec}' is not [IP:]HOST_PORT:CONTAINER_PORT`);
    return { hostIp: m[1], hostPort: Number(m[2]), containerPort: Number(m[3]) };
  });
}

function readHealthcheck(v: unknown, at: string): Healthcheck | undefined {
  if (v === undefined) return undefined;
  const o = asObject(v, at);
  for (const k of Object.keys(o)) if (!['test', 'interval', 'timeout', 'retries', 'start_period'].includes(k)) throw new ComposeFileError(`${at}.${k}: not emulated by the harness`);
  const test = asStrings(o.test, `${at}.test`);
  if (test[0] !== 'CMD' || test.length < 2) throw new ComposeFileError(`${at}.test: use the CMD form, ["CMD", program, args...] (CMD-SHELL needs a shell, which the harness does not emulate)`);
  const retries = o.retries === undefined ? HEALTHCHECK_DEFAULTS.retries : o.retries;
  if (!Number.isSafeInteger(retries) || (retries as number) < 1) throw new ComposeFileError(`${at}.retries: expected a positive integer`);
  return {
    command: test.slice(1),
    intervalMs: o.interval === undefined ? HEALTHCHECK_DEFAULTS.intervalMs : durationMs(o.interval, `${at}.interval`),
    timeoutMs: o.timeout === undefined ? HEALTHCHECK_DEFAULTS.timeoutMs : durationMs(o.timeout, `${at}.timeout`),
    retries: retries as number,
    startPeriodMs: o.start_period === undefined ? HEALTHCHECK_DEFAULTS.startPeriodMs : durationMs(o.start_period, `${at}.start_period`),
  };
}

function readRestart(v: unknown, at: string): Service['restart'] {
  if (v === undefined || v === 'no') return { policy: 'no' };
  const m = /^on-failure(?::(\d+))?$/.exec(asString(v, at));
  if (!m) throw new ComposeFileError(`${at}: '${String(v)}': only "no" and on-failure[:N] are emulated`);
  return { policy: 'on-failure', maxRetries: m[1] === undefined ? undefined : Number(m[1]) };
}

/** docker-compose.yml, validated and rebuilt as typed services (YAML anchors and << merge keys resolved). */
export function readCompose(file: string): ComposeProject {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, 'utf8'), { merge: true });
  } catch (err) {
    throw new ComposeFileError(where(file, `not valid YAML (${(err as Error).message})`));
  }
  const top = asObject(doc, file);
  for (const k of Object.keys(top)) if (!['services', 'volumes', 'name'].includes(k) && !k.startsWith('x-')) throw new ComposeFileError(where(file, `top-level '${k}' is not emulated by the harness`));
  const volumes = top.volumes === undefined ? [] : Object.keys(asObject(top.volumes, where(file, 'volumes')));
  for (const v of volumes) if ((top.volumes as Record<string, unknown>)[v] !== null) throw new ComposeFileError(where(file, `volumes.${v}: only default named volumes are emulated`));
  const services = new Map<string, Service>();
  for (const [name, raw] of Object.entries(asObject(top.services, where(file, 'services')))) {
    const at = where(file, `services.${name}`);
    const o = asObject(raw, at);
    for (const k of Object.keys(o)) if (!SERVICE_KEYS.has(k)) throw new ComposeFileError(`${at}.${k}: not emulated by the harness (add it to compose-harness.ts, or the test would ignore it)`);
    if (o.image === undefined && o.build === undefined) throw new ComposeFileError(`${at}: needs an image or a build`);
    services.set(name, {
      name,
      image: o.image === undefined ? undefined : asString(o.image, `${at}.image`),
      build: o.build,
      command: asStrings(o.command, `${at}.command`),
      environment: readEnvironment(o.environment, `${at}.environment`),
      dependsOn: readDependsOn(o.depends_on, `${at}.depends_on`),
      volumes: readVolumes(o.volumes, `${at}.volumes`, volumes),
      ports: readPorts(o.ports, `${at}.ports`),
      healthcheck: readHealthcheck(o.healthcheck, `${at}.healthcheck`),
      restart: readRestart(o.restart, `${at}.restart`),
    });
  }
  for (const s of services.values())
    for (const d of s.dependsOn) {
      const dep = services.get(d.service);
      if (!dep) throw new ComposeFileError(where(file, `services.${s.name}.depends_on: no service '${d.service}'`));
      if (d.condition === 'service_healthy' && !dep.healthcheck) throw new ComposeFileError(where(file, `services.${s.name}.depends_on: ${d.service} has no healthcheck to become healthy by`));
    }
  return { file, services, volumes, order: startOrder(file, services) };
}

/** Dependencies first; a cycle is an error naming it. */
function startOrder(file: string, services: Map<string, Service>): string[] {
  const order: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (name: string, path: string[]) => {
    if (state.get(name) === 'done') return;
    if (state.get(name) === 'visiting') throw new ComposeFileError(where(file, `depends_on has a cycle: ${[...path, name].join(' -> ')}`));
    state.set(name, 'visiting');
    for (const d of services.get(name)!.dependsOn) visit(d.service, [...path, name]);
    state.set(name, 'done');
    order.push(name);
  };
  for (const name of services.keys()) visit(name, []);
  return order;
}

export interface DockerfileStage {
  from: string;
  workdir: string;
  /** USER in effect at the end of the stage (undefined: root). */
  user: string | undefined;
  env: [string, string][];
  /** Every RUN, with the user it runs as. */
  runs: { command: string; user: string | undefined }[];
}

/** The Dockerfile's stages, with what the harness and the tests read: FROM, WORKDIR, USER, ENV and RUN. */
export function readDockerfile(file: string): DockerfileStage[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const instructions: string[] = [];
  let current = '';
  for (const raw of lines) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      current += line.slice(0, -1) + ' ';
      continue;
    }
    instructions.push(current + line);
    current = '';
  }
  if (current !== '') throw new ComposeFileError(`${file}: ends in a continued line`);
  const stages: DockerfileStage[] = [];
  for (const ins of instructions) {
    const m = /^(\w+)\s+(.*)$/.exec(ins);
    if (!m) throw new ComposeFileError(`${file}: '${ins}' is not an instruction`);
    const [op, rest] = [m[1].toUpperCase(), m[2].trim()];
    if (op === 'FROM') {
      stages.push({ from: rest, workdir: '/', user: undefined, env: [], runs: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new ComposeFileError(`${file}: ${op} before FROM`);
    if (op === 'WORKDIR') stage.workdir = posix.resolve(stage.workdir, rest);
    else if (op === 'USER') stage.user = rest;
    else if (op === 'RUN') stage.runs.push({ command: rest, user: stage.user });
    else if (op === 'ENV') {
      if (/["'`]/.test(rest)) throw new ComposeFileError(`${file}: ENV ${rest}: quoted values are not read by the harness`);
      const pairs = rest.split(/\s+/);
      if (pairs.every((p) => /^\w+=/.test(p))) for (const p of pairs) stage.env.push([p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]);
      else stage.env.push([pairs[0], pairs.slice(1).join(' ')]);
    }
  }
  if (stages.length === 0) throw new ComposeFileError(`${file}: no FROM`);
  return stages;
}

/**
 * How the harness learns the port a process took when its *_PORT variable is 0: the log
 * record that reports it. A *_PORT variable not listed here is an error.
 */
export const PORT_RECORDS: Record<string, { msg: string; field: string }> = {
  ADMM_COORDINATOR_PORT: { msg: 'listening', field: 'port' },
  ADMM_COORDINATOR_HTTP_PORT: { msg: 'http listening', field: 'httpPort' },
};

/** Docker's restart delay: 100 ms, doubled for each restart in a row (up to a minute). */
const RESTART_DELAY_MS = 100;
const MAX_RESTART_DELAY_MS = 60_000;
/** What `docker compose down` gives a container between SIGTERM and SIGKILL. */
const STOP_GRACE_MS = 10_000;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ComposeRun {
  /** Every process the service has run, restarts included, in order. */
  runs(service: string): Proc[];
  /** Resolves with the service's first process once it runs and its ports are known. */
  started(service: string): Promise<Proc>;
  /** Resolves when the service's last process has exited and its restart policy starts no other. */
  ended(service: string): Promise<Exit>;
  /** Where a path inside the service's container is on this machine (a volume's folder). */
  hostPath(service: string, containerPath: string): string;
  /** The service's working directory (the image's WORKDIR). */
  workdir(service: string): string;
  /** host:port at which a published port of the service answers on this machine. */
  published(service: string, containerPort: number): string;
  /** Rejects with the first failure of the run itself: a dependency unhealthy or failed, a file the harness cannot run. */
  failure: Promise<never>;
  /** `docker compose down`: SIGTERM to every process still running, SIGKILL after the grace period. */
  down(): Promise<void>;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(v: T): void;
  reject(e: Error): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** The program `name` as exec would find it on `path`. */
function which(name: string, path: string): string | undefined {
  if (name.includes('/')) return existsSync(name) ? name : undefined;
  for (const dir of path.split(delimiter)) {
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/**
 * Start the project's services as `docker compose up` would (the image already built):
 * `root` is the repository (the image's WORKDIR), `tmp` a folder for the volumes and
 * working directories. A service that fails more than `maxRestarts` times in all fails the run
 * (docker would restart it forever).
 */
export function composeUp(project: ComposeProject, stage: DockerfileStage, opts: { root: string; tmp: string; maxRestarts?: number }): ComposeRun {
  const { services } = project;
  const ports = new Map<string, number>();
  const portKey = (service: string, port: number | string) => `${service}:${port}`;
  const volumeDirs = new Map(project.volumes.map((v) => [v, join(opts.tmp, 'volumes', v)]));
  for (const d of volumeDirs.values()) mkdirSync(d, { recursive: true });
  const workdirs = new Map([...services.keys()].map((s) => [s, join(opts.tmp, 'workdir', s)]));
  for (const d of workdirs.values()) mkdirSync(d, { recursive: true });
  const failed = deferred<never>();
  const fail = (err: Error) => failed.reject(err);
  let stopping = false;
  const timers = new Set<NodeJS.Timeout>();
  const startedAt = new Map<Proc, number>();
  const state = new Map(
    [...services.keys()].map((s) => [s, { runs: [] as Proc[], started: deferred<Proc>(), healthy: deferred<void>(), ended: deferred<Exit>(), restartsInARow: 0 }]),
  );

  /** The image's environment, its container paths mapped: /app/... is the repository, $PATH the base image's (this machine's). */
  const baseImagePath = [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter);
  const imageEnv: Record<string, string> = {};
  const inWorkdir = (p: string) => (p === stage.workdir || p.startsWith(stage.workdir + '/') ? join(opts.root, p.slice(stage.workdir.length)) : p);
  const expand = (v: string) => v.replace(/\$\{?(\w+)\}?/g, (_, name: string) => imageEnv[name] ?? (name === 'PATH' ? baseImagePath : ''));
  // Container paths are mapped before $VARs are expanded: what they expand to is this machine's already.
  for (const [k, v] of stage.env) imageEnv[k] = (k === 'PATH' ? v.split(':') : [v]).map((p) => (p.includes('$') ? expand(p) : inWorkdir(p))).join(delimiter);
  if (imageEnv.PATH === undefined) imageEnv.PATH = baseImagePath;

  /** A container path of `s` on this machine: in one of its volumes, or an error. */
  function hostPath(s: Service, p: string): string {
    const v = s.volumes.find((m) => p === m.target || p.startsWith(m.target + '/'));
    if (!v) throw new ComposeFileError(`${project.file}: services.${s.name}: '${p}' is not in any of its volumes (${s.volumes.map((m) => m.target).join(', ') || 'none'}): in a container it would be lost or missing`);
    return volumeDirs.get(v.source)! + p.slice(v.target.length);
  }

  /** Another service's host name in a URL or host:port becomes 127.0.0.1 with the port that service took. */
  function mapHosts(s: Service, value: string): string {
    return value.replace(/(^|\/\/)([A-Za-z0-9][\w.-]*):(\d+)/g, (all, pre: string, host: string, port: string) => {
      if (!services.has(host)) return all;
      const actual = ports.get(portKey(host, port));
      if (actual === undefined)
        throw new ComposeFileError(`${project.file}: services.${s.name} refers to ${host}:${port}, but ${host} has no port ${port} set by a *_PORT variable (or ${s.name} does not depend on it)`);
      return `${pre}127.0.0.1:${actual}`;
    });
  }

  function mapValue(s: Service, value: string): string {
    const hosts = mapHosts(s, value);
    return hosts.startsWith('/') ? hostPath(s, hosts) : hosts;
  }

  function environment(s: Service): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...imageEnv };
    // The test runner's marker, so that its check for left-over processes sees these too.
    if (process.env.ADMM_TEST_RUN !== undefined) env.ADMM_TEST_RUN = process.env.ADMM_TEST_RUN;
    for (const [k, v] of Object.entries(s.environment)) {
      if (k.endsWith('_PORT')) {
        if (!PORT_RECORDS[k]) throw new ComposeFileError(`${project.file}: services.${s.name}.environment.${k}: the harness does not know which log line reports this port (add it to PORT_RECORDS)`);
        env[k] = String(ports.get(portKey(s.name, v)) ?? 0);
      } else if (k.endsWith('_HOST') && (v === '0.0.0.0' || v === '::')) env[k] = '127.0.0.1';
      else env[k] = mapValue(s, v);
    }
    return env;
  }

  /** The program of a command as the image's PATH finds it: one of the repository's node programs. */
  function program(s: Service, env: NodeJS.ProcessEnv): string {
    const name = s.command[0];
    const found = which(name, env.PATH ?? '');
    if (!found) throw new ComposeFileError(`${project.file}: services.${s.name}.command: '${name}' is not on the image's PATH (${env.PATH})`);
    if (!/^#!.*\bnode\b/.test(readFileSync(realpathSync(found), 'utf8').slice(0, 200))) throw new ComposeFileError(`${project.file}: services.${s.name}.command: ${found} is not a node program`);
    return found;
  }

  async function learnPorts(s: Service, proc: Proc): Promise<void> {
    for (const [k, v] of Object.entries(s.environment)) {
      if (!k.endsWith('_PORT') || ports.has(portKey(s.name, v))) continue;
      const { msg, field } = PORT_RECORDS[k];
      const rec = await proc.waitFor((r) => r.msg === msg && typeof r[field] === 'number', `'${msg}' (the port of ${k})`);
      ports.set(portKey(s.name, v), rec[field] as number);
    }
  }

  async function spawnService(s: Service): Promise<void> {
    const st = state.get(s.name)!;
    const env = environment(s);
    const proc = run(program(s, env), s.command.slice(1).map((a) => mapValue(s, a)), { env, cwd: workdirs.get(s.name)! });
    st.runs.push(proc);
    startedAt.set(proc, performance.now());
    void proc.exit.then((exit) => onExit(s, proc, exit));
    await learnPorts(s, proc);
    st.started.resolve(proc);
    if (s.healthcheck && st.runs.length === 1) healthcheck(s, s.healthcheck, proc).then(st.healthy.resolve, st.healthy.reject);
  }

  function onExit(s: Service, proc: Proc, exit: Exit): void {
    const st = state.get(s.name)!;
    const ranMs = performance.now() - startedAt.get(proc)!;
    const failedRun = exit.code !== 0;
    const policy = s.restart;
    const restart = !stopping && failedRun && policy.policy === 'on-failure' && (policy.maxRetries === undefined || st.runs.length <= policy.maxRetries);
    if (!restart) return st.ended.resolve(exit);
    // Docker would go on restarting it; a test wants to know why it keeps failing.
    if (st.runs.length > (opts.maxRestarts ?? Infinity))
      return fail(new Error(`${s.name} failed ${st.runs.length} times (exit ${exit.code ?? exit.signal}); the last stderr: ${proc.stderr()}`));
    // Docker resets the back-off once a container has run for 10 s.
    st.restartsInARow = ranMs > 10_000 ? 1 : st.restartsInARow + 1;
    const t = setTimeout(() => {
      timers.delete(t);
      if (!stopping) spawnService(s).catch(fail);
      else st.ended.resolve(exit);
    }, Math.min(RESTART_DELAY_MS * 2 ** (st.restartsInARow - 1), MAX_RESTART_DELAY_MS));
    timers.add(t);
  }

  /** The healthcheck's command, run in the service's environment, every interval, as docker does (the first after one interval). */
  async function healthcheck(s: Service, h: Healthcheck, proc: Proc): Promise<void> {
    const env = environment(s);
    const args = h.command.map((a) =>
      a.replace(/(^|\/\/|[^\w.-])(127\.0\.0\.1|localhost):(\d+)/g, (_, pre: string, _host: string, port: string) => {
        const actual = ports.get(portKey(s.name, port));
        if (actual === undefined) throw new ComposeFileError(`${project.file}: services.${s.name}.healthcheck: port ${port} is not one of the service's *_PORT variables`);
        return `${pre}127.0.0.1:${actual}`;
      }),
    );
    const bin = which(args[0], env.PATH ?? '');
    if (!bin) throw new ComposeFileError(`${project.file}: services.${s.name}.healthcheck: '${args[0]}' is not on the image's PATH`);
    const started = performance.now();
    let failures = 0;
    let last = '';
    for (;;) {
      const exited = await Promise.race([delay(h.intervalMs, false, { ref: false }), proc.exit.then(() => true)]);
      if (exited) throw new Error(`${s.name} exited before it was healthy: ${proc.stderr()}`);
      if (stopping) return;
      const result = await new Promise<{ ok: boolean; output: string }>((resolve) =>
        execFile(bin, args.slice(1), { env, cwd: workdirs.get(s.name)!, timeout: h.timeoutMs, killSignal: 'SIGKILL' }, (err, stdout, stderr) =>
          resolve({ ok: !err, output: `${err ? err.message : ''} ${stdout}${stderr}`.trim() }),
        ),
      );
      if (result.ok) return;
      last = result.output;
      if (performance.now() - started >= h.startPeriodMs) failures++;
      if (failures >= h.retries) throw new Error(`${s.name} is unhealthy: ${failures} healthchecks failed in a row; the last: ${last}`);
    }
  }

  async function condition(s: Service, dep: { service: string; condition: Condition }): Promise<void> {
    const st = state.get(dep.service)!;
    if (dep.condition === 'service_started') await st.started.promise;
    else if (dep.condition === 'service_healthy') await st.healthy.promise;
    else {
      const exit = await st.ended.promise;
      if (exit.code !== 0) throw new Error(`${s.name}: its dependency ${dep.service} did not complete successfully (exit ${exit.code ?? exit.signal}): ${st.runs.at(-1)?.stderr()}`);
    }
  }

  for (const name of project.order) {
    const s = services.get(name)!;
    void (async () => {
      for (const dep of s.dependsOn) await condition(s, dep);
      if (!stopping) await spawnService(s);
    })().catch((err: Error) => {
      state.get(name)!.started.reject(err);
      fail(err);
    });
  }

  const service = (name: string): Service => {
    const s = services.get(name);
    if (!s) throw new Error(`no service '${name}'`);
    return s;
  };
  return {
    runs: (name) => state.get(service(name).name)!.runs,
    started: (name) => Promise.race([state.get(service(name).name)!.started.promise, failed.promise]),
    ended: (name) => Promise.race([state.get(service(name).name)!.ended.promise, failed.promise]),
    hostPath: (name, p) => hostPath(service(name), p),
    workdir: (name) => workdirs.get(service(name).name)!,
    published(name, containerPort) {
      const s = service(name);
      const p = s.ports.find((q) => q.containerPort === containerPort);
      if (!p) throw new Error(`${name} publishes no port ${containerPort}`);
      const actual = ports.get(portKey(name, containerPort));
      if (actual === undefined) throw new Error(`${name}'s port ${containerPort} is not one it took (by a *_PORT variable), or it has not started`);
      return `127.0.0.1:${actual}`;
    },
    failure: failed.promise,
    async down() {
      stopping = true;
      for (const t of timers) clearTimeout(t);
      const live = [...state.values()].map((st) => st.runs.at(-1)).filter((p): p is Proc => p !== undefined && p.child.exitCode === null && p.child.signalCode === null);
      await Promise.all(
        live.map(async (p) => {
          p.child.kill('SIGTERM');
          const gone = await Promise.race([p.exit.then(() => true), delay(STOP_GRACE_MS, false, { ref: false })]);
          if (!gone) p.kill();
          await p.exit;
        }),
      );
      for (const st of state.values()) if (st.runs.length > 0) st.ended.resolve(await st.runs.at(-1)!.exit);
    },
  };
}
