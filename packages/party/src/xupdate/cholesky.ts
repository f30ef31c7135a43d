// The Cholesky form of the x-update: the factor of lambda I + rho G~ (G~ the centred Gram
// matrix of the side), formed at once or a piece at a time with the event loop's turns between
// pieces (and threads for a dense block), and its two triangular solves.
import { setImmediate as nextTurn } from 'node:timers/promises';
import { type DenseTeam, ConfigError, WasmCholesky, assertLength, choleskyRows, choleskySolveInPlace, packedAt, packedLength, sharedFloat64 } from '@admm-share/core';
import { type BlockSource, blockCols, blockRows } from './block-operator.js';
import { centredGramPieces, inPieces } from './gram.js';

/**
 * Largest min(d, N) factored by Cholesky: min(d, N)^2 doubles (50 MB at 2500) and, to form and
 * factor, N d^2 / 2 + d^3 / 3 multiply-adds (a few seconds at 2000; docs/scaling.md). Larger
 * blocks solve each round by conjugate gradients.
 */
export const CHOLESKY_LIMIT = 2500;

/** Multiply-adds in a piece of factorPieces: some 20 ms at the kernels' 1.5-2e9 a second. */
const PIECE_WORK = 2 ** 25;

/** What the Cholesky factorisation needs: the block, and `into`, packedLength(k) zeros where the factor is formed (packed). */
export type FactorInput = BlockSource & { side: 'primal' | 'dual'; mu: Float64Array | undefined; lambda: number; rho: number; into: Float64Array };

/**
 * The Cholesky factor (lower triangle) of lambda I + rho G~, G~ the side's centred Gram
 * matrix, formed in `input.into`, in pieces of about `work` multiply-adds (some 20 ms by
 * default; inPieces): the caller runs them all at once (factorSystem) or gives its event loop
 * a turn between them (RidgeXUpdate.factorInPieces). With `pool`, threads form parts of a
 * dense block's Gram matrix and factor (DenseTeam), and a yielded promise is awaited before
 * going on.
 */
export function* factorPieces(input: FactorInput, work = PIECE_WORK, pool?: DenseTeam): Generator<Promise<void> | void, void, void> {
  const { side, mu, lambda, rho, into: a } = input;
  const k = side === 'primal' ? blockCols(input) : blockRows(input);
  assertLength('factor', a, packedLength(k));
  // Threads work on a dense block's matrix where it is formed (`into` in shared memory).
  const threads = pool && input.dense ? pool : undefined;
  yield* centredGramPieces(input, side, mu, a, work, threads);
  for (let i = 0; i < a.length; i++) a[i] *= rho;
  for (let i = 0; i < k; i++) a[packedAt(i) + i] += lambda;
  const notDefinite = (): ConfigError =>
    new ConfigError(`the x-update's system (${k} x ${k}, lambda ${lambda}, rho ${rho}) is not positive definite to working precision: lambda is too small for the scale of this block's features (raise --lambda, or scale the features)`);
  if (threads) {
    if (!(yield* threads.cholesky(a, k, work))) throw notDefinite();
    return;
  }
  // Row i of the factor costs about i^2 / 2 multiply-adds.
  yield* inPieces(
    k,
    work,
    (i) => (i * i) / 2 + 1,
    (from, to) => {
      if (!choleskyRows(a, k, from, to)) throw notDefinite();
    },
  );
}

/**
 * The factor of one block's system, k x k, for the rho it was last formed for: formed where
 * the solves read it (WebAssembly memory, or an array of its own when it does not fit there;
 * both shared memory, so threads form it in place). The Gram matrix is formed again for each
 * rho; it is not kept.
 */
export class CholeskyFactor {
  /** Milliseconds of the last factorisation (Gram matrix and Cholesky). */
  factorMs = 0;
  /** The lower triangle holds L, L L^T = lambda I + rho times the Gram matrix, for `rho`. */
  private chol: Float64Array | undefined;
  /** The factor's solves in WebAssembly (chol views its memory); undefined if it did not fit there. */
  private cholW: WasmCholesky | undefined;
  /** The rho of the factor (NaN: none). */
  rho = NaN;
  /** The factorisation under way, if any. */
  private factoring: symbol | undefined;

  constructor(
    readonly k: number,
    /** What factorPieces needs to form the factor for `rho` in `into`. */
    private readonly input: (rho: number, into: Float64Array) => FactorInput,
  ) {}

  /** Zeros for a k x k factor (packed: packedLength(k)), formed where the solves read it. */
  private target(): { cholW: WasmCholesky | undefined; chol: Float64Array } {
    const cholW = WasmCholesky.zeros(this.k);
    return { cholW, chol: cholW?.data ?? sharedFloat64(packedLength(this.k)) };
  }

  /** Factor lambda I + rho G~ for this rho, at once. */
  factor(rho: number): void {
    const t0 = performance.now();
    this.drop(); // the old factor can go before the new one is formed
    const target = this.target();
    for (const _ of factorPieces(this.input(rho, target.chol), Infinity));
    this.factored(target, rho, t0);
  }

  private drop(): void {
    this.chol = this.cholW = undefined;
    this.rho = NaN;
  }

  /** `target` holds the factor for `rho`, begun at `t0`. */
  private factored(target: { cholW: WasmCholesky | undefined; chol: Float64Array }, rho: number, t0: number): void {
    this.cholW = target.cholW;
    this.chol = target.chol;
    this.rho = rho;
    this.factorMs = performance.now() - t0;
  }

  /**
   * The factorisation for `rho` on this thread a piece at a time (factorPieces, some 20 ms
   * each), giving the event loop a turn between pieces; with `pool`, threads form their parts
   * of the Gram matrix and the factor meanwhile. Resolves with the number of pieces on this
   * thread (0: already factored for `rho`, or cancelled).
   */
  async factorInPieces(rho: number, pool: DenseTeam | undefined): Promise<number> {
    if (rho === this.rho) return 0;
    const t0 = performance.now();
    this.drop();
    const target = this.target();
    const token = Symbol('factorisation');
    this.factoring = token;
    let pieces = 0;
    try {
      for (const step of factorPieces(this.input(rho, target.chol), PIECE_WORK, pool)) {
        pieces++;
        await (step ?? nextTurn());
        if (this.factoring !== token) return 0; // cancelled: nothing factored
      }
    } finally {
      if (this.factoring === token) this.factoring = undefined;
    }
    this.factored(target, rho, t0);
    return pieces;
  }

  /** Stop a factorisation under way: its promise resolves with nothing factored; a later solve factors again. */
  cancel(): void {
    this.factoring = undefined;
  }

  /** b = (L L^T)^-1 b with the factor (k x k), in WebAssembly when it is there. */
  solveInPlace(b: Float64Array): void {
    if (this.cholW) this.cholW.solveInPlace(b);
    else choleskySolveInPlace(this.chol!, this.k, b);
  }
}
