// One thread of the PSI team (psi-team.ts): hashes ids onto the curve, checks and blinds
// points, digests ids, one chunk per message, and answers with the result or the point that
// failed.
import { parentPort } from 'node:worker_threads';
import { type PsiTask, runPsiTask } from './psi-team.js';
import { PointError } from './psi.js';

parentPort!.on('message', (task: PsiTask) => {
  try {
    const out = runPsiTask(task);
    parentPort!.postMessage({ out }, [out.buffer as ArrayBuffer]);
  } catch (err) {
    if (err instanceof PointError) parentPort!.postMessage({ point: { index: err.index, reason: err.reason } });
    else parentPort!.postMessage({ failure: err instanceof Error ? err.message : String(err) });
  }
});
