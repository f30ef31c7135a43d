// docker-compose.yml and the Dockerfile, read and validated for the compose harness
// (compose-harness.ts, which runs the services as local processes) and for the test's own
// checks of what the files say: the services as typed values, the Dockerfile's stages.
// Anything in the file that is not emulated by the harness is an error rather than silently
// ignored.
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { parse } from 'yaml';

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
    for (const k of Object.keys(o)) if (!SERVICE_KEYS.has(k)) throw new ComposeFileError(`${at}.${k}: not emulated by the harness (add it to compose-file.ts and compose-harness.ts, or the test would ignore it)`);
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
