// One thread of DenseThreads (dense-threads.ts): waits for the call number to change, does its
// part of the call on the shared block, and counts itself done.
import { receiveMessageOnPort, workerData } from 'node:worker_threads';
import { type DenseWorkerData, FAILED, GEN, type PackedPart, OP, Op, PENDING } from './dense-threads.js';
import { choleskyRows, denseGramRows, denseMatTVecRows, denseMatVecRows, denseOuterGramRows } from './dense.js';

const { a, from, to, ctrl, x, w, out, partial, port } = workerData as DenseWorkerData;

function part(op: number): void {
  switch (op) {
    case Op.MatVec:
      return denseMatVecRows(out, a, x, from, to);
    case Op.MatTVec:
      return denseMatTVecRows(partial, a, w, from, to);
    case Op.Gram:
    case Op.OuterGram:
    case Op.CholeskyLeft: {
      const m = packedPart();
      if (op === Op.Gram) denseGramRows(a, m.g, 0, a.rows, undefined, m.from, m.to);
      else if (op === Op.OuterGram) denseOuterGramRows(a, m.g, m.from, m.to);
      else choleskyRows(m.g, m.n!, m.from, m.to, 0, m.upTo);
      return;
    }
    default:
      throw new Error(`unknown op ${op}`);
  }
}

/** The call's message, posted before the call (a short wait in case it is not here yet). */
function packedPart(): PackedPart {
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (let tries = 0; tries < 1000; tries++) {
    const m = receiveMessageOnPort(port);
    if (m) return m.message as PackedPart;
    Atomics.wait(nap, 0, 0, 1);
  }
  throw new Error(`a call (op ${Atomics.load(ctrl, OP)}) came without its matrix`);
}

// The call number starts at 0: a call begun before this thread got here is not missed.
for (let gen = 0; ; ) {
  Atomics.wait(ctrl, GEN, gen);
  gen = Atomics.load(ctrl, GEN);
  const op = Atomics.load(ctrl, OP);
  if (op === Op.Exit) break;
  try {
    part(op);
  } catch (err) {
    port.postMessage({ failure: err instanceof Error ? err.message : String(err) });
    Atomics.store(ctrl, FAILED, 1);
  }
  if (Atomics.sub(ctrl, PENDING, 1) === 1) Atomics.notify(ctrl, PENDING);
}
port.close();
