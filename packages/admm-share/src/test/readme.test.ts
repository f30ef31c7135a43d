// The README's one-party-per-organisation example, run as written. The fenced block after the
// `<!-- readme-test:deployment` marker is read from README.md and its commands run as real
// processes, in order, in a temporary directory (so the relative paths they write land there),
// on the data its own `admm-share generate` writes. The label-privacy example (the block after
// `<!-- readme-test:label-privacy`) is run the same way, and so are docs/commands.md's examples
// (`<!-- readme-test:commands`). Only what a test must change is changed:
// `npx <bin>` becomes node with the workspace's bin script, and the coordinator listens on
// port 0 on loopback (a test neither takes a fixed port nor listens beyond this machine), the
// parties connecting to the port its `listening` line reports.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';
import { COMMANDS_DOC, README, fencedCommands } from './readme-blocks.js';

after(killAll);

const MARKER = '<!-- readme-test:deployment';
const BINS: Record<string, string> = { 'admm-share': BIN.share, 'admm-coordinator': BIN.coordinator, 'admm-party': BIN.party };

/** The value after `flag` (the flag must be there once). */
function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  assert.ok(i < 0 || args.indexOf(name, i + 1) < 0, `${name} given twice`);
  return i < 0 ? undefined : args[i + 1];
}

function withFlag(args: string[], name: string, value: string): string[] {
  const i = args.indexOf(name);
  assert.ok(i >= 0, `the README command has no ${name}: ${args.join(' ')}`);
  return [...args.slice(0, i + 1), value, ...args.slice(i + 2)];
}

test('README: the one-party-per-organisation commands run as written on the data `admm-share generate` writes', async (t) => {
  const cwd = tempDir(t, 'admm-readme-');
  const commands = fencedCommands(readFileSync(README, 'utf8'), MARKER).map((c) => {
    assert.equal(c[0], 'npx', `README commands start with npx: ${c.join(' ')}`);
    assert.ok(BINS[c[1]], `unknown program ${c[1]}`);
    return { program: c[1], args: c.slice(2) };
  });
  assert.deepEqual([...new Set(commands.map((c) => c.program))], ['admm-share', 'admm-coordinator', 'admm-party'], 'generate, then the coordinator, then the parties');
  assert.equal(commands.filter((c) => c.program === 'admm-coordinator').length, 1);

  let coordinator: { proc: Proc; args: string[]; port: number } | undefined;
  const parties: { proc: Proc; args: string[] }[] = [];
  for (const { program, args } of commands) {
    if (program === 'admm-share') {
      assert.equal(args[0], 'generate');
      const p = run(BINS[program], args, { cwd });
      assert.equal((await p.exit).code, 0, p.stderr());
    } else if (program === 'admm-coordinator') {
      const proc = run(BINS[program], withFlag(withFlag(args, '--port', '0'), '--host', '127.0.0.1'), { cwd });
      const { port } = (await proc.waitFor((r) => r.msg === 'listening', 'listening')) as { port: number };
      coordinator = { proc, args, port };
    } else {
      assert.ok(coordinator, 'the README starts the coordinator before the parties');
      const url = new URL(flag(args, '--coordinator')!);
      assert.ok(['127.0.0.1', 'localhost'].includes(url.hostname), `the parties of the one-machine example connect to this machine: ${url}`);
      url.port = String(coordinator.port);
      parties.push({ proc: run(BINS[program], withFlag(args, '--coordinator', url.toString()), { cwd }), args });
    }
  }
  assert.ok(coordinator && parties.length >= 2);
  for (const [name, p] of [['admm-coordinator', coordinator.proc], ...parties.map((q) => [`admm-party ${flag(q.args, '--id')}`, q.proc] as const)] as const) {
    const { code } = await p.exit;
    assert.equal(code, 0, `${name}: ${p.stderr()}`);
  }

  // Every party's model (and privacy report) is written where its --model says.
  for (const { args } of parties) {
    const model = join(cwd, flag(args, '--model')!);
    assert.ok(existsSync(model), `${flag(args, '--id')}: ${model}`);
    assert.ok(Array.isArray(JSON.parse(readFileSync(model, 'utf8')).coefficients));
    assert.ok(existsSync(model.replace(/\.json$/, '.privacy.json')));
  }
  const out = join(cwd, flag(coordinator.args, '--out')!);
  assert.ok(existsSync(join(out, 'trace.jsonl')));
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.deepEqual(summary.parties.map((q: { id: string }) => q.id), flag(coordinator.args, '--parties')!.split(','));
  assert.ok(Number.isFinite(summary.objective));
  assert.equal(summary.jobId, flag(coordinator.args, '--job'));

  // Evaluation: metrics if every party sends test scores, otherwise one warning and the reason.
  const sendsTestScores = (a: string[]) => {
    const privacy = (flag(a, '--mechanism') ?? (a.includes('--epsilon') ? 'gaussian-share' : 'none')) !== 'none';
    return flag(a, '--test') !== undefined && (!privacy || a.includes('--release-test-scores'));
  };
  const without = parties.filter((q) => !sendsTestScores(q.args)).map((q) => flag(q.args, '--id')!);
  if (flag(coordinator.args, '--test-labels') === undefined) {
    assert.equal(summary.test, undefined);
    assert.equal(summary.evaluation, undefined);
  } else if (without.length === 0) {
    assert.equal(summary.evaluation, undefined);
    for (const k of ['logLoss', 'accuracy', 'auc']) assert.ok(Number.isFinite(summary.test[k]), k);
  } else {
    assert.equal(summary.test, undefined);
    assert.equal(summary.rows.test, 0);
    const who = without.length === 1 ? `party ${without[0]} has` : `parties ${without.join(', ')} have`;
    assert.equal(summary.evaluation.skipped, `${who} no test set: no test metrics for this job; give every party --test (with privacy also --release-test-scores) to evaluate`);
    const warnings = coordinator.proc.records.filter((r) => r.level === 40 && r.msg === summary.evaluation.skipped);
    assert.equal(warnings.length, 1, 'one warning naming the party');
    assert.deepEqual(warnings[0].parties, without);
  }
});

test('README: the label-privacy example runs as written and reports its label epsilon', async (t) => {
  const cwd = tempDir(t, 'admm-readme-');
  const commands = fencedCommands(readFileSync(README, 'utf8'), '<!-- readme-test:label-privacy');
  assert.equal(commands.length, 1);
  const [npx, program, ...args] = commands[0];
  assert.deepEqual([npx, program, args[0]], ['npx', 'admm-share', 'simulate']);
  const epsilon = Number(flag(args, '--label-epsilon'));
  assert.ok(epsilon > 0, 'the example uses --label-epsilon');
  const p = run(BINS[program], args, { cwd });
  assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(p.stdout(), new RegExp(`label privacy: label epsilon ${epsilon} at the coordinator`));
  const out = join(cwd, flag(args, '--out')!);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.labelPrivacy.epsilon, epsilon);
  assert.equal(summary.labelPrivacy.flipProbability, 1 / (1 + Math.exp(epsilon)));
  assert.equal(statSync(join(out, 'label-flips.json')).mode & 0o777, 0o600);
});

test('docs/commands.md: its examples run as written (privacy accounting both ways, credentials for three parties)', async (t) => {
  const cwd = tempDir(t, 'admm-readme-');
  const commands = fencedCommands(readFileSync(COMMANDS_DOC, 'utf8'), '<!-- readme-test:commands');
  assert.ok(commands.length >= 3);
  let sigma: number | undefined;
  for (const [npx, program, ...args] of commands) {
    assert.equal(npx, 'npx');
    assert.ok(BINS[program], `unknown program ${program}`);
    const p = run(BINS[program], args, { cwd });
    assert.equal((await p.exit).code, 0, `${args.join(' ')}: ${p.stderr()}`);
    if (args[0] === 'privacy' && args[1] === 'calibrate') {
      sigma = Number(/sigma = ([\d.e+-]+)/.exec(p.stdout())?.[1]);
      assert.ok(sigma > 0, p.stdout());
    } else if (args[0] === 'privacy' && args[1] === 'account') {
      // More noise than calibrate asked for the same rounds spends less than its epsilon.
      const out = JSON.parse(p.stdout());
      assert.ok(sigma !== undefined && out.sigma >= sigma, 'the example accounts at least the calibrated noise');
      assert.ok(out.epsilon > 0 && out.epsilon <= Number(flag(commands[0].slice(2), '--epsilon')), `epsilon ${out.epsilon}`);
    } else if (args[0] === 'credentials') {
      const dir = join(cwd, flag(args, '--out')!);
      const parties = flag(args, '--parties')!.split(',');
      assert.deepEqual(Object.keys(JSON.parse(readFileSync(join(dir, 'credentials.json'), 'utf8'))).sort(), [...parties].sort());
      for (const party of parties) assert.equal(statSync(join(dir, `${party}.token`)).mode & 0o777, 0o600, party);
    } else assert.fail(`an example readme.test does not check: ${args.join(' ')}`);
  }
});
