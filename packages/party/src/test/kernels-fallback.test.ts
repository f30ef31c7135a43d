import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// The x-update runs its sparse products and triangular solves in WebAssembly where it can, and
// in the TypeScript loops where it cannot (Node with --jitless has no WebAssembly). Both must
// give the same shares to the bit: the same rounds run in this process and in one without it.
const ROUNDS = `
  const { RidgeXUpdate } = await import('@admm-share/party');
  const { csrFromDense } = await import('@admm-share/core');
  const { seeded } = await import('@admm-share/core/test-support');
  const rand = seeded(21);
  const n = 90;
  const out = [];
  // eigen primal (30 features), eigen dual (120 features on 90 rows), Cholesky primal and dual (eigenLimit 10)
  for (const [d, opts] of [[30, {}], [120, {}], [30, { eigenLimit: 10 }], [120, { eigenLimit: 10 }]]) {
    const D = csrFromDense(Array.from({ length: n }, (_, i) => Array.from({ length: d }, (_, j) => ((i * 7 + j * 3) % 5 === 0 ? rand() - 0.5 : 0))), d);
    const x = new RidgeXUpdate(D, 1e-3, true, { ...opts, rho: 0.5 });
    for (let r = 0; r < 3; r++) {
      x.updateFromBroadcast(Float64Array.from({ length: n }, () => rand() - 0.5), 0.5);
      out.push(x.form + ' ' + Buffer.from(x.share.buffer, x.share.byteOffset, x.share.byteLength).toString('base64'));
    }
  }
  console.log(JSON.stringify({ wasm: typeof WebAssembly !== 'undefined', out }));
`;

function run(flags: string[]): { wasm: boolean; out: string[] } {
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', ROUNDS], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('the x-update without WebAssembly (node --jitless) gives the same shares to the bit, in the eigen and Cholesky forms', () => {
  const withKernels = run([]);
  const without = run(['--jitless']);
  assert.equal(withKernels.wasm, true);
  assert.equal(without.wasm, false, 'node --jitless still had WebAssembly: the TypeScript loops were not exercised');
  assert.deepEqual(
    withKernels.out.map((s) => s.split(' ')[0]),
    ['primal', 'primal', 'primal', 'dual', 'dual', 'dual', 'cholesky', 'cholesky', 'cholesky', 'cholesky', 'cholesky', 'cholesky'],
  );
  assert.deepEqual(without.out, withKernels.out);
});
