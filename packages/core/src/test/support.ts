// Test helpers shared by the packages' tests (exported as @admm-share/core/test-support):
// seeded randomness, temporary directories, relative differences and the reference files
// the repository ships (data/, test-data/). Written independently of the code under test; nothing here is used by it.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import seedrandom from 'seedrandom';

/** A seeded generator of floats in [0, 1), so failures reproduce. */
export function seeded(seed: number | string): () => number {
  return seedrandom(String(seed));
}

/** One standard normal draw from `rand` (Box-Muller: two uniforms, the first kept away from 0). */
export function normal(rand: () => number): number {
  const u = 1 - rand();
  const v = rand();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** A generator of standard normal draws from `rand`. */
export function gaussian(rand: () => number): () => number {
  return () => normal(rand);
}

/** n independent draws of offset + scale * N(0, 1). */
export function randomVector(rand: () => number, n: number, scale = 1, offset = 0): Float64Array {
  const g = gaussian(rand);
  return Float64Array.from({ length: n }, () => offset + scale * g());
}

/** |a - b| / |b|. */
export function relDiff(a: number, b: number): number {
  return Math.abs(a - b) / Math.abs(b);
}

/**
 * How far below the optimum f* a reported objective may lie: rounding only. The objective of
 * any model (every ADMM iterate is one: its shares are D_m x_m) is at least f*, so a value
 * further below means the objective or the model is computed wrongly.
 */
export const BELOW_OPTIMUM_RTOL = 1e-9;

/**
 * Two-sided convergence check of an objective f against the optimum fStar computed by another
 * algorithm (Newton's method in fitCentral, or a published value): f is not below fStar beyond
 * rounding, and not more than `rtol` (relative) above it.
 */
export function assertNearOptimum(f: number, fStar: number, rtol: number, what = 'objective'): void {
  const gap = (f - fStar) / Math.abs(fStar);
  assert.ok(Number.isFinite(gap), `${what} ${f}, optimum ${fStar}`);
  assert.ok(gap >= -BELOW_OPTIMUM_RTOL, `${what} ${f} is below the optimum ${fStar} (relative gap ${gap.toExponential(3)}), which no model can reach`);
  assert.ok(gap <= rtol, `${what} ${f} is above the optimum ${fStar} by ${gap.toExponential(3)} relative (at most ${rtol} allowed)`);
}

/**
 * A fresh directory, removed when `t` ends: pass a test's context, or `{ after }` from
 * node:test for one directory per file.
 */
export function tempDir(t: { after(fn: () => void): void }, prefix = 'admm-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Reference data in the repository, the same from every package's dist/test (nothing outside the repository is read). */
export const SHARED = {
  /** a9a/a9a and a9a/a9a.t (LIBSVM; data/a9a/README.md has their origin and checksums). */
  a9a: fileURLToPath(new URL('../../../../data/a9a/', import.meta.url)),
  /** The bank-telecom CSV files, generated with the default seed (bankTelecomDataset). */
  bankTelecom: fileURLToPath(new URL('../../../../data/bank-telecom/', import.meta.url)),
  /** test-data/README.md says where these come from. */
  privacyVectors: fileURLToPath(new URL('../../../../test-data/gaussian-composition-vectors.json', import.meta.url)),
};

/** Independently computed sigma and epsilon values for T-fold Gaussian composition (see test-data/README.md). */
export interface PrivacyVectors {
  calibrate: { sensitivity: number; rounds: number; epsilon: number; delta: number; sigma_exact: number; sigma_rdp: number; sigma_zcdp: number; sigma_advanced: number; check_eps_exact_at_sigma_exact: number }[];
  account: { sensitivity: number; rounds: number; sigma: number; delta: number; epsilon_exact: number; epsilon_rdp: number; epsilon_zcdp: number }[];
}

export function privacyVectors(): PrivacyVectors {
  return JSON.parse(readFileSync(SHARED.privacyVectors, 'utf8')) as PrivacyVectors;
}

/** Every byte of something read by pieces (a SpilledBytes, an encoded message's ByteSource), in a new array. */
export function readAll(source: { length: number; readAt(at: number, into: Uint8Array): void }): Uint8Array {
  const into = new Uint8Array(source.length);
  source.readAt(0, into);
  return into;
}

/** The lower triangle of the n x n row-major `a`, packed by rows (the kernels' packed form). */
export function packLower(a: Float64Array, n: number): Float64Array {
  assert.equal(a.length, n * n);
  const p = new Float64Array((n * (n + 1)) / 2);
  for (let i = 0, r = 0; i < n; r += ++i) p.set(a.subarray(i * n, i * n + i + 1), r);
  return p;
}

/**
 * AUC by brute force (Mann-Whitney): the share of (positive, negative) pairs the scores order
 * correctly, ties counting 1/2; labels > 0 are positive.
 */
export function pairAuc(scores: ArrayLike<number>, y: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < y.length; i++) {
    if (y[i] <= 0) continue;
    for (let j = 0; j < y.length; j++) {
      if (y[j] > 0) continue;
      den++;
      num += scores[i] > scores[j] ? 1 : scores[i] === scores[j] ? 0.5 : 0;
    }
  }
  return num / den;
}

/** Runs `fn` with the system's temporary folder set to `folder` (TMPDIR). */
export function withTmp<T>(folder: string, fn: () => T): T {
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = folder;
  try {
    return fn();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}
