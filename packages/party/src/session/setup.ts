// The set-up of a job: the rows the coordinator aligned, selected into this party's model
// (the x-update's block, an SGD model, or a one-shot party's), and the privacy calibrated.
import { type Csr, type Dense, ConfigError, DenseRows, SpilledCsr, WasmCsr, csrSelectRows, csrSelectRowsDense, preferDense } from '@admm-share/core';
import type { Setup } from '@admm-share/protocol';
import { peakMemoryBytes } from '@admm-share/runtime';
import { normaliseRows } from '../privacy/mechanism.js';
import { PassiveModel, releaseTarget } from '../privacy/release.js';
import { CHOLESKY_LIMIT } from '../xupdate/cholesky.js';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { SgdModel } from '../xupdate/sgd.js';
import { collectGarbage } from './gc.js';
import { type Model, type Outcome, type SessionEnv, type SessionRows, type SessionState, expectPhase, reply } from './state.js';

/** Rows `order` of a session's file as CSR (a copy). */
function selectCsr(X: SessionRows['X'], order: ArrayLike<number>): Csr {
  return X instanceof DenseRows || X instanceof SpilledCsr ? X.selectCsr(order) : csrSelectRows(X, order);
}

/**
 * Rows `order` of a sparse file as the x-update's block: straight into the kernels'
 * WebAssembly memory (one copy, not two), or as CSR where that memory cannot hold them.
 */
function selectSparseBlock(X: Csr | SpilledCsr, order: ArrayLike<number>): WasmCsr | Csr {
  if (!(X instanceof SpilledCsr)) return WasmCsr.fromRows(X, order) ?? csrSelectRows(X, order);
  const w = WasmCsr.empty(order.length, X.cols, X.selectedEntries(order));
  if (!w) return X.selectCsr(order);
  X.selectInto(w.csr, order);
  return w;
}

/**
 * The file the test rows come from: the test file, or (testFrom 'train') the training file,
 * whose rows the coordinator held out (validated: none of them is a training row, so none is
 * in the block, a share, a release or a fit). A party with a privacy budget sends test scores
 * un-noised only with --release-test-scores, held out or not.
 */
function testSource(env: SessionEnv, msg: Setup): SessionRows['X'] | undefined {
  if (msg.testFrom === 'test') return env.test?.X;
  if (env.privacy.enabled && !env.releaseTestScores)
    throw new ConfigError(
      `the coordinator holds out ${msg.testRows.length} of this party's rows as test rows (admm-coordinator --holdout or --test-ids); with a privacy budget their scores would be sent without noise, outside the guarantee: pass --release-test-scores to send them, or the coordinator runs without --holdout/--test-ids`,
    );
  if (env.test) env.log.warn({ testFile: env.test.ids.length }, "the coordinator holds out test rows from this party's training file; its --test file is not used");
  if (env.privacy.enabled) env.log.warn({ testRows: msg.testRows.length }, 'privacy: the held-out test rows are scored without noise (--release-test-scores): those scores are not covered by the privacy guarantee');
  return env.train.X;
}

export function onSetup(s: SessionState, env: SessionEnv, msg: Setup): Outcome {
  expectPhase(s, 'setup');
  env.psi.settle();
  // The intersection's messages and points are garbage by now; the rows selected come next.
  collectGarbage();
  const { privacy } = env;
  const t0 = performance.now();
  if (msg.role !== env.role)
    throw new ConfigError(
      msg.role === 'active'
        ? "the coordinator names this party its active party (the label holder's organisation: it gets the labels and sends no noise), but it was started as passive; only a party of that organisation should agree, with --role active"
        : `this party was started with --role active, but the coordinator does not name it its active party (admm-coordinator --active-party ${env.partyId})`,
    );
  // The coordinator names rows by their position in the order this party sent its ids.
  const trainRows = env.psi.fileRows('train', msg.trainRows);
  const testRows = env.psi.fileRows(msg.testFrom, msg.testRows);
  const n = trainRows.length;
  const test = testRows.length > 0 ? testSource(env, msg) : undefined;
  let testX: Csr | Dense | undefined;
  let model: Model;
  let bw: number | undefined;
  if (msg.algorithm === 'sgd') {
    model = { kind: 'sgd', sgd: new SgdModel(selectCsr(env.train.X, trainRows), msg.lambda, env.intercept), step: 0, rows: new Uint32Array(0) };
    testX = test && selectCsr(test, testRows);
  } else if (msg.algorithm === 'one-shot') {
    // The bounds of the one-shot models are for rows of norm <= 1 (docs/privacy.md, section 9).
    const D = normaliseRows(selectCsr(env.train.X, trainRows)).X;
    testX = test && normaliseRows(selectCsr(test, testRows)).X;
    // With label privacy the labels are the coordinator's flipped ones: the active party fits
    // with the loss corrected for their flip probability; the passive target is the flipped
    // labels as they are (in expectation they, and so its ridge fit, are 1 - 2p times the true
    // ones; the active party's weight on its scores absorbs the scale).
    if (env.role === 'active') model = { kind: 'active', D, y: msg.labels, lambda: msg.lambda, loss: msg.loss, labelFlip: msg.labelFlip, classWeights: msg.classWeights, fit: undefined };
    else {
      if (env.intercept) throw new ConfigError('--intercept at a passive party of a one-shot job: the intercept lives at the active party (or, without one, at the coordinator)');
      const target = releaseTarget(msg.labels);
      bw = target.bw;
      const passive = new PassiveModel(D, target.target, privacy.releaseBounds);
      model = { kind: 'passive', passive, rows: trainRows };
    }
  } else {
    const X = env.train.X;
    // A dense file's aligned rows are moved to its top and used there (no copy; a rejoin moves
    // them again). A sparse block's rows go straight into the x-update kernels' memory.
    const block = X instanceof DenseRows ? X.front(trainRows) : !(X instanceof SpilledCsr) && preferDense(X) ? csrSelectRowsDense(X, trainRows) : selectSparseBlock(X, trainRows);
    // Held-out rows of the training file are copied: moving them to its top would move the block's rows.
    testX = test && (test instanceof DenseRows && test !== X ? test.front(testRows) : selectCsr(test, testRows));
    const x = new RidgeXUpdate(block, msg.lambda, env.intercept, { noiseFree: !privacy.enabled, threads: env.threads });
    if (privacy.enabled && x.form === 'cg') {
      void x.close();
      throw new ConfigError(
        msg.lambda > 0
          ? `privacy needs a factorised x-update, and this block (${n} rows x ${X.cols} features) is too large for one (limit ${CHOLESKY_LIMIT} on the smaller side)`
          : `privacy needs a factorised x-update, and this block (${n} rows x ${X.cols} features) is factorised only with lambda > 0`,
      );
    }
    if (x.form === 'cholesky') {
      // Seconds of work on a large block, in pieces with the event loop's turns between them,
      // then the rest of the set-up (unless the connection was lost meanwhile: a rejoin sets up again).
      const connection = s.connection;
      s.factoring = x;
      // Lost meanwhile: the phase left 'setup' (and a new connection has another number).
      const work = x.factorInPieces(msg.rho).then(
        (pieces): Outcome => {
          if (s.factoring === x) s.factoring = undefined;
          return s.connection !== connection || s.phase !== 'setup' ? reply() : ready(s, env, msg, { kind: 'admm', x }, testX, n, undefined, t0, pieces);
        },
        (err: unknown) => {
          if (s.factoring === x) s.factoring = undefined;
          void x.close(); // set-up failed: this x-update is not used
          throw err;
        },
      );
      return { kind: 'later', work };
    }
    model = { kind: 'admm', x };
  }
  return ready(s, env, msg, model, testX, n, bw, t0, undefined);
}

/** The end of the set-up: the model in place, the privacy calibrated and `ready` sent. */
function ready(s: SessionState, env: SessionEnv, msg: Setup, model: Model, testX: Csr | Dense | undefined, n: number, bw: number | undefined, t0: number, factorPieces: number | undefined): Outcome {
  const { privacy } = env;
  s.testX = testX;
  s.testFrom = testX ? msg.testFrom : undefined;
  // A rejoin's new model replaces the old one: its threads, if any, stop.
  if (s.model?.kind === 'admm' && (model.kind !== 'admm' || s.model.x !== model.x)) void s.model.x.close();
  const info = privacy.calibrate({ lambda: msg.lambda, rho: msg.rho, rounds: msg.rounds, parties: msg.parties, features: env.features, n, algorithm: msg.algorithm, bw });
  s.model = model;
  // A fresh model is x = 0: that of round 0. A rejoin past round 0 waits for resume to recompute it.
  s.current = s.round === 0;
  s.previous = undefined;
  s.phase = 'training';
  env.log.info(
    {
      rows: n,
      droppedRows: env.train.ids.length - n,
      testRows: s.testX?.rows ?? 0,
      algorithm: msg.algorithm,
      role: msg.role,
      form: model.kind === 'admm' ? model.x.form : undefined,
      dense: model.kind === 'admm' ? model.x.dense : undefined,
      threads: model.kind === 'admm' ? model.x.threads : undefined,
      factorMs: Math.round(performance.now() - t0),
      factorPieces,
      peakMemoryBytes: peakMemoryBytes(),
    },
    'aligned and factorised',
  );
  env.log.info({ ...info }, `privacy: ${info.mechanism === 'none' ? 'none, shares are sent without noise' : info.mechanism}`);
  // The set-up's garbage (the setup message, the selection's arrays, the reads of the spilled
  // rows) would otherwise wait through the first rounds, whose own collections are of the young
  // generation (RoundGarbage), and add to their peak: 13-20 MB more in the first rounds of a
  // million-row run.
  collectGarbage();
  return reply({ type: 'ready', jobId: s.jobId!, privacy: info });
}
