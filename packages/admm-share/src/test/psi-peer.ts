// The private set intersection as a scripted peer in a test does it (hostile parties and
// coordinators): the real group operations, with no shuffle, so that a fake party's positions
// are the rows of its file.
import { blindPoints, hashToPoints, newPsiKey } from '@admm-share/core';
import type { Ids, Psi } from '@admm-share/protocol';

/** A fake party's `ids` for a `psi`: its ids in file order, and the coordinator's points blinded again, under one key. */
export function psiAnswer(ids: readonly string[], psi: Psi): Ids {
  const key = newPsiKey();
  return { type: 'ids', jobId: psi.jobId, set: psi.set, points: blindPoints(hashToPoints(ids), key), labelPoints: blindPoints(psi.points, key) };
}

/** A fake coordinator's `psi` for label ids (in file order). */
export function psiLabels(jobId: string, ids: readonly string[]): Psi {
  return { type: 'psi', jobId, set: 'train', total: ids.length, at: 0, points: blindPoints(hashToPoints(ids), newPsiKey()) };
}
