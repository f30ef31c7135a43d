// `docker compose up` without a Docker engine (CI has none): with docker-compose.yml and the
// Dockerfile as compose-file.ts reads them, every service's command runs as a local process
// with the image's and the service's environment, in the order depends_on gives, restarted as
// its restart policy says. What a container would see differently is mapped, and only that:
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
import { delimiter, dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { type ComposeProject, type Condition, type DockerfileStage, type Healthcheck, type Service, ComposeFileError } from './compose-file.js';
import { type Proc, run } from './procs.js';

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
