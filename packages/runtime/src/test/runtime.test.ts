// The exit paths over real processes: every failure that ends in "internal error" (exit 70)
// prints its stack with ADMM_DEBUG=1 and no stack without it; known kinds never print one.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { EXIT } from '@admm-share/core';
import { Progress, debugEnabled, stackOf } from '../index.js';
import { STACK_LINE, killAll, run } from './support.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/exit-paths.js', import.meta.url));
after(killAll);

async function fail(mode: string, debug: string | undefined) {
  const env = { ...process.env };
  delete env.ADMM_DEBUG;
  if (debug !== undefined) env.ADMM_DEBUG = debug;
  const p = run(FIXTURE, [mode], { env });
  const { code } = await p.exit;
  return { code, stderr: p.stderr(), stdout: p.stdout() };
}

const INTERNAL = ['parse', 'start', 'done', 'wrapped', 'string', 'uncaught', 'rejection', 'command', 'command-async'];

for (const mode of INTERNAL) {
  test(`internal error (${mode}): exit 70, a stack only with ADMM_DEBUG=1`, async () => {
    const [quiet, debug] = await Promise.all([fail(mode, undefined), fail(mode, '1')]);
    assert.equal(quiet.code, EXIT.internal, quiet.stderr);
    assert.match(quiet.stderr, /^exit-paths: error: /);
    assert.doesNotMatch(quiet.stderr, STACK_LINE, 'a stack without ADMM_DEBUG');
    assert.equal(quiet.stderr.trimEnd().split('\n').length, 1, quiet.stderr);
    assert.doesNotMatch(quiet.stdout, STACK_LINE);

    if (mode === 'done') {
      const off = await fail(mode, '0');
      assert.equal(off.code, EXIT.internal);
      assert.doesNotMatch(off.stderr, STACK_LINE, 'ADMM_DEBUG=0 printed a stack');
    }

    assert.equal(debug.code, EXIT.internal, debug.stderr);
    assert.match(debug.stderr, /^exit-paths: error: /);
    if (mode === 'string') {
      // Nothing to print but the value itself: no stack exists.
      assert.match(debug.stderr, /a thrown string/);
      return;
    }
    assert.match(debug.stderr, STACK_LINE, 'no stack with ADMM_DEBUG=1');
    assert.match(debug.stderr, /at (\S+\.)?fixtureBug /, 'the stack is not the bug\'s');
    if (mode === 'wrapped') {
      assert.match(debug.stderr, /^exit-paths: error: internal error handling a message: fixtureBug went wrong$/m);
      assert.match(debug.stderr, /^Caused by: TypeError: fixtureBug went wrong$/m);
    }
  });
}

for (const [mode, code] of [['config', EXIT.config], ['data', EXIT.data], ['peer', EXIT.peer], ['bad-flag', EXIT.config]] as const) {
  test(`known error (${mode}): exit ${code} and never a stack, even with ADMM_DEBUG=1`, async () => {
    for (const debug of [undefined, '1']) {
      const r = await fail(mode, debug);
      assert.equal(r.code, code, r.stderr);
      assert.match(r.stderr, /exit-paths: error: /);
      assert.doesNotMatch(r.stderr, STACK_LINE);
      assert.doesNotMatch(r.stdout, STACK_LINE);
    }
  });
}

test('debugEnabled: unset, empty, 0 and false are off; anything else is on', () => {
  for (const v of [undefined, '', '0', 'false', 'FALSE', ' 0 ']) assert.equal(debugEnabled({ ADMM_DEBUG: v }), false, String(v));
  for (const v of ['1', 'true', 'yes']) assert.equal(debugEnabled({ ADMM_DEBUG: v }), true, v);
});

test('stackOf follows the cause chain and stops on a cycle', () => {
  const inner = new RangeError('inner');
  const outer = new Error('outer', { cause: inner });
  const s = stackOf(outer);
  assert.match(s, /^Error: outer/);
  assert.match(s, /^Caused by: RangeError: inner/m);
  const a = new Error('a');
  const b = new Error('b', { cause: a });
  (a as { cause?: unknown }).cause = b;
  assert.ok(stackOf(a).split('Caused by:').length <= 10);
  assert.equal(stackOf('plain'), 'plain');
});

test('Progress.counter draws a bar with the rate on a terminal, clears it when all is done, and is silent elsewhere', () => {
  const written: string[] = [];
  const stream = { isTTY: true, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream;
  const ci = process.env.CI;
  delete process.env.CI;
  try {
    const count = new Progress(stream).counter('train hashing ids');
    count(250, 1000);
    count(1000, 1000);
  } finally {
    if (ci !== undefined) process.env.CI = ci;
  }
  assert.equal(written.length, 2);
  assert.match(written[0], /^\r\x1b\[K\[#{8}\.{22}\] train hashing ids 250\/1000 \(\d+\/s\)$/);
  assert.equal(written[1], '\r\x1b[K');
  const quiet: string[] = [];
  new Progress({ isTTY: false, write: (s: string) => quiet.push(s) } as unknown as NodeJS.WriteStream).counter('x')(1, 2);
  assert.deepEqual(quiet, []);
});
