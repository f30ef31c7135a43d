// docker-compose.yml and the Dockerfile, tested without a Docker engine (CI has none):
// 1. What the files say: one image for every service, built once; a user that is not root and
//    owns the volumes' mount points; parties restarted on failure; the coordinator's
//    healthcheck on /healthz, which the parties wait for; its HTTP port published on this
//    machine's loopback address; the README's block and the dashboard's address.
// 2. `docker compose up`, emulated by compose-harness.ts: every service's command with the
//    image's and its own environment as a local process, in dependency order (the data service
//    to completion, the coordinator until its healthcheck passes), the volumes temporary
//    folders, the host names 127.0.0.1 and the ports free ones (the file's fixed ports could
//    clash with anything else on the machine: the harness maps them consistently). One party is
//    killed (SIGKILL, as a crashed container) once the coordinator has completed round 1; its
//    restart policy starts it again and it rejoins; the job completes at the optimum computed
//    here centrally, the dashboard's port answers where it is published, and nothing is written
//    outside the volumes. Then `docker compose down` stops the coordinator, which would
//    otherwise keep its HTTP port open for ADMM_COORDINATOR_HTTP_LINGER.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type IdMode, binaryLabels, csrHStack, csrSelectRows, fitCentral, logistic, readLabelFile, readLibsvm } from '@admm-share/core';
import { assertNearOptimum, relDiff } from '@admm-share/core/test-support';
import { type ComposeProject, type Service, readCompose, readDockerfile } from './compose-file.js';
import { composeUp } from './compose-harness.js';
import { modelScores } from './model-scores.js';
import { killAll, tempDir } from './procs.js';
import { README, fencedCommands } from './readme-blocks.js';

after(killAll);

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const COMPOSE = join(ROOT, 'docker-compose.yml');
const DOCKERFILE = join(ROOT, 'Dockerfile');
const MARKER = '<!-- readme-test:compose';
/** Restarts of a service before the run fails (docker would go on): the killed party needs one. */
const MAX_RESTARTS = 3;

/** The services by what they run: the one coordinator, the parties, the data service. */
function roles(project: ComposeProject): { coordinator: Service; parties: Service[]; data: Service } {
  const running = (program: string) => [...project.services.values()].filter((s) => s.command[0] === program);
  const [coordinator, ...others] = running('admm-coordinator');
  assert.ok(coordinator && others.length === 0, 'one coordinator service');
  const parties = running('admm-party');
  assert.ok(parties.length >= 2, 'at least two party services');
  const [data] = running('admm-share').filter((s) => s.command[1] === 'generate');
  assert.ok(data, 'a service that runs admm-share generate');
  return { coordinator, parties, data };
}

/** The paths a RUN instruction chowns to `user` (chown [-flags] USER[:GROUP] PATH...). */
function chowned(run: string, user: string): string[] {
  return run
    .split(/&&|;/)
    .map((c) => c.trim().split(/\s+/))
    .filter((w) => w[0] === 'chown')
    .flatMap((w) => {
      const args = w.slice(1).filter((a) => !a.startsWith('-'));
      return args[0]?.split(':')[0] === user.split(':')[0] ? args.slice(1) : [];
    });
}

/** Every file under `dir` with its size and modification time. */
function listing(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const st = statSync(join(dir, name));
    out[name] = `${st.size} ${st.mtimeMs}`;
  }
  return out;
}

/** log(1 + exp(-m)) without overflow, written here rather than taken from the code under test. */
function logLoss(m: number): number {
  return m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m));
}

test('docker-compose.yml and the Dockerfile: one image built once, a non-root user owning the volumes, parties restarted on failure, a healthcheck on /healthz, the dashboard published on loopback, the README block', () => {
  const project = readCompose(COMPOSE);
  const services = [...project.services.values()];
  const { coordinator, parties } = roles(project);

  // One image, built once: compose builds once per image name, with that name's build.
  const images = new Set(services.map((s) => s.image));
  assert.equal(images.size, 1, `every service runs the same image (${[...images].join(', ')})`);
  assert.ok([...images][0], 'the image is named, so that services share it');
  const builds = services.map((s) => s.build).filter((b) => b !== undefined);
  assert.ok(builds.length > 0, 'the image is built from the Dockerfile, not pulled');
  for (const b of builds) assert.deepEqual(b, builds[0], 'one build for the one image name');
  const build = builds[0];
  const context = typeof build === 'string' ? build : (build as { context?: string }).context;
  assert.equal(context, '.', 'built from the repository root');
  assert.ok(typeof build === 'string' || [undefined, 'Dockerfile'].includes((build as { dockerfile?: string }).dockerfile), 'from the Dockerfile read here');

  // The processes run as a user that is not root, who owns every volume's mount point in the
  // image (a new named volume takes that owner, so the volumes are writable).
  const image = readDockerfile(DOCKERFILE).at(-1)!;
  assert.ok(image.user, 'the image sets USER');
  assert.ok(!['root', '0'].includes(image.user.split(':')[0]), `USER ${image.user} is root`);
  const targets = new Set(services.flatMap((s) => s.volumes.map((v) => v.target)));
  for (const target of targets)
    assert.ok(
      image.runs.some((r) => r.user === undefined && chowned(r.command, image.user!).includes(target)),
      `the image creates ${target} and gives it to ${image.user} (RUN ... chown ${image.user} ${target}, before USER)`,
    );
  // What the harness maps the image's programs to: WORKDIR's node_modules/.bin on PATH.
  const path = image.env.filter(([k]) => k === 'PATH').at(-1)?.[1] ?? '';
  assert.ok(path.split(':').includes(`${image.workdir}/node_modules/.bin`), `PATH=${path} has ${image.workdir}/node_modules/.bin`);

  // A party whose container fails is started again, and rejoins.
  for (const p of parties) assert.equal(p.restart.policy, 'on-failure', `${p.name}: restart: on-failure`);

  // The coordinator's healthcheck asks /healthz on its HTTP port, and the parties wait for it.
  const httpPort = Number(coordinator.environment.ADMM_COORDINATOR_HTTP_PORT);
  assert.ok(httpPort > 0, 'the coordinator has an HTTP port (ADMM_COORDINATOR_HTTP_PORT)');
  assert.ok(coordinator.healthcheck, 'the coordinator has a healthcheck');
  assert.match(coordinator.healthcheck.command.join(' '), new RegExp(`http://(127\\.0\\.0\\.1|localhost):${httpPort}/healthz\\b`));
  for (const p of parties) assert.equal(p.dependsOn.find((d) => d.service === coordinator.name)?.condition, 'service_healthy', `${p.name} waits for the coordinator to be healthy`);

  // The dashboard's port is published, on this machine's loopback address only (it has no
  // token), and the coordinator serves it on the container's every address (a published port
  // does not reach a server bound to the container's 127.0.0.1).
  const published = coordinator.ports.find((p) => p.containerPort === httpPort);
  assert.ok(published, `the coordinator publishes its HTTP port ${httpPort}`);
  assert.equal(published.hostIp, '127.0.0.1', 'published on 127.0.0.1 only');
  assert.equal(coordinator.environment.ADMM_COORDINATOR_HTTP_HOST, '0.0.0.0');
  assert.equal(coordinator.environment.ADMM_COORDINATOR_HTTP_TOKEN_FILE, undefined, 'the README says the dashboard has no token');

  // The README's block is the command this file is for, and names the published address.
  const readme = readFileSync(README, 'utf8');
  assert.deepEqual(fencedCommands(readme, MARKER), [['docker', 'compose', 'up', '--build']]);
  const section = readme.slice(readme.indexOf(MARKER), readme.indexOf('\n## ', readme.indexOf(MARKER)));
  assert.ok(section.includes(`http://127.0.0.1:${published.hostPort}/`), `the README's compose section opens the dashboard at http://127.0.0.1:${published.hostPort}/`);
  assert.ok(section.includes(`ADMM_COORDINATOR_HTTP_LINGER=${coordinator.environment.ADMM_COORDINATOR_HTTP_LINGER}`), 'the README gives the linger time of the file');
});

test('docker compose up, emulated: a party killed mid-training is restarted by its restart policy and rejoins; the job reaches the central optimum; the dashboard port answers where published', { timeout: 180_000 }, async (t) => {
  const project = readCompose(COMPOSE);
  const { coordinator, parties, data } = roles(project);
  const up = composeUp(project, readDockerfile(DOCKERFILE).at(-1)!, { root: ROOT, tmp: tempDir(t, 'admm-compose-'), maxRestarts: MAX_RESTARTS });
  t.after(() => up.down());
  const within = <T>(p: Promise<T>) => Promise.race([p, up.failure]);

  // The data service runs to completion first; from then on its volume is only read.
  const generated = await within(up.ended(data.name));
  assert.equal(generated.code, 0, up.runs(data.name)[0].stderr());
  const dataDir = up.hostPath(data.name, data.volumes[0].target);
  const dataFiles = listing(dataDir);

  // Kill a party once round 1 is complete: the job needs every party in every round, so it
  // cannot end without this one.
  const coord = await within(up.started(coordinator.name));
  await within(coord.waitFor((r) => r.msg === 'round' && r.round === 1, 'round 1'));
  const victim = parties[1].name;
  assert.equal(up.runs(victim).length, 1);
  const killed = up.runs(victim)[0];
  killed.child.kill('SIGKILL');
  assert.equal((await killed.exit).signal, 'SIGKILL', `${victim} was still running: ${killed.stderr()}`);

  for (const p of parties) {
    const exit = await within(up.ended(p.name));
    assert.equal(exit.code, 0, `${p.name}: ${up.runs(p.name).at(-1)!.stderr()}`);
    assert.equal(up.runs(p.name).length, p.name === victim ? 2 : 1, `${p.name}: started ${up.runs(p.name).length} times`);
  }
  const done = await within(coord.waitFor((r) => r.msg === 'job done', 'job done'));
  const about = (msg: string) => coord.records.filter((r) => r.msg === msg && r.party === victim).length;
  assert.equal(about('party disconnected; waiting for it to rejoin'), 1, 'the coordinator lost the killed party during training');
  assert.equal(about('party rejoined'), 1, 'and the restarted one rejoined');

  // The coordinator's HTTP port, where the file publishes it: the job is done, the port lingers.
  const httpPort = Number(coordinator.environment.ADMM_COORDINATOR_HTTP_PORT);
  const base = `http://${up.published(coordinator.name, httpPort)}`;
  const health = await fetch(`${base}/healthz`);
  assert.equal(health.status, 200);
  const ready = await fetch(`${base}/readyz`);
  assert.equal(ready.status, 200);
  assert.match(await ready.text(), /done/);

  // `docker compose down`: SIGTERM ends the lingering coordinator. Its job had completed (its
  // result line says so); the stop itself may count as an interruption (130) or not (0).
  await up.down();
  const { code } = await coord.exit;
  assert.ok(code === 0 || code === 130, `coordinator exit ${code}: ${coord.stderr()}`);
  assert.equal(coord.stderr(), '');
  assert.match(coord.stdout(), new RegExp(`^admm-coordinator: job ${coordinator.environment.ADMM_COORDINATOR_JOB} ran ${done.rounds} rounds`, 'm'));
  assert.equal(up.runs(coordinator.name).length, 1);

  // The job's results, in the results volume.
  const env = coordinator.environment;
  const out = up.hostPath(coordinator.name, env.ADMM_COORDINATOR_OUT);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.jobId, env.ADMM_COORDINATOR_JOB);
  assert.ok(['converged', 'max-rounds'].includes(summary.reason), summary.reason);
  assert.equal(summary.rounds, done.rounds);
  assert.deepEqual(summary.parties.map((q: { id: string }) => q.id), env.ADMM_COORDINATOR_PARTIES.split(','));
  for (const k of ['logLoss', 'accuracy', 'auc']) assert.ok(Number.isFinite(summary.test[k]), k);
  assert.equal(readFileSync(join(out, 'trace.jsonl'), 'utf8').trim().split('\n').length, summary.rounds);

  // Independently: the central optimum of the same data, and the objective of the parties'
  // model files, recomputed here.
  const labels = readLabelFile(up.hostPath(coordinator.name, env.ADMM_COORDINATOR_LABELS));
  const { y } = binaryLabels(labels);
  const n = labels.ids.length;
  const scores = new Float64Array(n);
  let penalty = 0;
  const blocks = parties.map((p) => {
    const table = readLibsvm(up.hostPath(p.name, p.environment.ADMM_PARTY_DATA), { ids: p.environment.ADMM_PARTY_IDS as IdMode });
    const row = new Map(table.ids.map((id, i) => [id, i]));
    const rows = labels.ids.map((id) => row.get(id));
    assert.ok(rows.every((r) => r !== undefined), `${p.name} holds every labelled sample`);
    const X = csrSelectRows(table.X, rows as number[]);
    const model = JSON.parse(readFileSync(up.hostPath(p.name, p.environment.ADMM_PARTY_MODEL), 'utf8'));
    assert.equal(model.jobId, env.ADMM_COORDINATOR_JOB);
    assert.equal(model.coefficients.length, X.cols, `${p.name}: one coefficient per feature`);
    assert.equal(model.intercept !== null, p.environment.ADMM_PARTY_INTERCEPT === 'true', `${p.name}: an intercept where the file asks for one`);
    const s = modelScores(X, model.coefficients);
    for (let i = 0; i < n; i++) scores[i] += s[i] + (model.intercept ?? 0);
    for (const c of model.coefficients) penalty += (summary.lambda / 2) * c * c;
    return X;
  });
  let loss = 0;
  for (let i = 0; i < n; i++) loss += logLoss(y[i] * scores[i]);
  const objective = loss / n + penalty;
  assert.ok(relDiff(objective, summary.objective) < 1e-9, `the models' objective ${objective}, the summary's ${summary.objective}`);
  const intercept = parties.some((p) => p.environment.ADMM_PARTY_INTERCEPT === 'true');
  const central = fitCentral(csrHStack(blocks), y, logistic, summary.lambda, { intercept });
  assertNearOptimum(objective, central.objective, 1e-5, 'the compose job\'s objective');

  // Nothing written outside the volumes (in the image the working directory belongs to root),
  // and nothing into the data volume after the data service (the others mount it read-only).
  for (const s of project.services.values()) assert.deepEqual(readdirSync(up.workdir(s.name)), [], `${s.name} wrote into its working directory`);
  assert.deepEqual(listing(dataDir), dataFiles, 'the data volume is unchanged');
  assert.ok(existsSync(join(dataDir, 'credentials.json')));
});
