import { test } from 'node:test';
import assert from 'node:assert/strict';
import { vectorMemory } from '@admm-share/core';
import { seeded } from '@admm-share/core/test-support';
import { NEW_RHS, NEW_SQ, NORM_SQ, ROW, firstPass, nextPoint } from '../numerics/anderson-kernels.js';

/** The vectors of one Anderson call, as views of a WebAssembly memory (with `kernels`) or of plain arrays. */
function vectors(dim: number, memory: number, fill: () => number, wasm: ReturnType<typeof vectorMemory>) {
  let at = 0;
  const view = <T>(C: { new (b: ArrayBufferLike, o: number, n: number): T; BYTES_PER_ELEMENT: number }, n: number): T => {
    const bytes = Math.ceil((n * C.BYTES_PER_ELEMENT) / 16) * 16;
    const v = wasm ? new C(wasm.memory.buffer, at, n) : new C(new ArrayBuffer(bytes), 0, n);
    at += bytes;
    return v;
  };
  const v = {
    f: view(Float64Array, dim),
    point: view(Float64Array, dim),
    prevF: view(Float64Array, dim),
    prevG: view(Float64Array, dim),
    dF: Array.from({ length: memory }, () => view(Float32Array, dim)),
    dG: Array.from({ length: memory }, () => view(Float32Array, dim)),
    out: view(Float64Array, ROW + memory),
  };
  for (const a of [v.f, v.point, v.prevF, v.prevG, ...v.dF, ...v.dG]) for (let i = 0; i < dim; i++) a[i] = fill();
  return v;
}

test("Anderson's WebAssembly passes give the TypeScript twins' bits, and those are the sums and combinations computed here (odd and even ranges, 0 to 4 differences kept, 1 to 5 combined)", () => {
  const dim = 37;
  for (const [from, to] of [[0, dim], [1, dim], [0, 36], [5, 6], [7, 7], [3, 30]] as const)
    for (let kept = 0; kept <= 4; kept++) {
      const what = `[${from}, ${to}), ${kept} kept`;
      const wasm = vectorMemory(1 << 16)!;
      assert.ok(wasm, 'WebAssembly is there');
      // The same numbers in both: each drawn once from the same sequence.
      const [rand1, rand2] = [seeded(`aa ${from} ${to} ${kept}`), seeded(`aa ${from} ${to} ${kept}`)];
      const ts = vectors(dim, 5, () => 2 * rand1() - 1, undefined);
      const wa = vectors(dim, 5, () => 2 * rand2() - 1, wasm);
      const keptOf = (v: typeof ts) => v.dG.slice(1, 1 + kept);
      firstPass(ts.f, ts.point, ts.prevF, ts.prevG, ts.dF[0], ts.dG[0], keptOf(ts), from, to, ts.out);
      firstPass(wa.f, wa.point, wa.prevF, wa.prevG, wa.dF[0], wa.dG[0], keptOf(wa), from, to, wa.out, wasm.kernels);
      assert.deepEqual(Array.from(wa.out.subarray(0, ROW + kept)), Array.from(ts.out.subarray(0, ROW + kept)), `${what}: sums`);
      assert.deepEqual(Array.from(wa.dF[0]), Array.from(ts.dF[0]), `${what}: dF`);
      assert.deepEqual(Array.from(wa.dG[0]), Array.from(ts.dG[0]), `${what}: dG`);
      // Against plain sums, to rounding.
      let n = 0;
      let r = 0;
      let q = 0;
      const dots = Array<number>(kept).fill(0);
      for (let i = from; i < to; i++) {
        const g = ts.f[i] - ts.point[i];
        const d = Math.fround(g - ts.prevG[i]);
        assert.equal(ts.dG[0][i], d, `${what}: dG[${i}]`);
        assert.equal(ts.dF[0][i], Math.fround(ts.f[i] - ts.prevF[i]), `${what}: dF[${i}]`);
        n += g * g;
        r += d * g;
        q += d * d;
        for (let j = 0; j < kept; j++) dots[j] += d * ts.dG[1 + j][i];
      }
      const close = (a: number, b: number, name: string) => assert.ok(Math.abs(a - b) <= 1e-13 * (1 + Math.abs(b)), `${what}: ${name} ${a} against ${b}`);
      close(ts.out[NORM_SQ], n, '||g||^2');
      close(ts.out[NEW_RHS], r, 'dG . g');
      close(ts.out[NEW_SQ], q, 'dG . dG');
      dots.forEach((d, j) => close(ts.out[ROW + j], d, `dG . dG_kept[${j}]`));
      // Without a new difference: the norm alone.
      firstPass(ts.f, ts.point, ts.prevF, ts.prevG, undefined, undefined, [], from, to, ts.out);
      firstPass(wa.f, wa.point, wa.prevF, wa.prevG, undefined, undefined, [], from, to, wa.out, wasm.kernels);
      assert.equal(wa.out[NORM_SQ], ts.out[NORM_SQ], `${what}: norm alone`);
      close(ts.out[NORM_SQ], n, 'norm alone');
      // The combination with 1 + kept differences (1 to 5), and the plain step.
      const gamma = Float64Array.from({ length: 1 + kept }, () => 2 * rand1() - 1);
      const expected = Float64Array.from(ts.f, (fi, i) => fi - gamma.reduce((acc, gj, j) => acc + gj * ts.dF[j][i], 0));
      const before = Float64Array.from(ts.point);
      nextPoint(ts.point, ts.prevF, ts.prevG, ts.f, ts.dF.slice(0, 1 + kept), gamma, from, to);
      nextPoint(wa.point, wa.prevF, wa.prevG, wa.f, wa.dF.slice(0, 1 + kept), gamma, from, to, wasm.kernels);
      for (const key of ['point', 'prevF', 'prevG'] as const) assert.deepEqual(Array.from(wa[key]), Array.from(ts[key]), `${what}: ${key}`);
      for (let i = 0; i < dim; i++) {
        const inside = i >= from && i < to;
        close(ts.point[i], inside ? expected[i] : before[i], `point[${i}]`);
        assert.equal(ts.prevF[i], inside ? ts.f[i] : wa.prevF[i], `${what}: prevF[${i}]`);
        if (inside) assert.equal(ts.prevG[i], ts.f[i] - before[i], `${what}: prevG[${i}]`);
      }
    }
});
