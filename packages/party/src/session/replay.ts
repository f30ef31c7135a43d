// Protocol 6's replay: a party that rejoins a running ADMM job (restarted, or reconnected to
// a restarted coordinator) recomputes x_m of the last round the coordinator holds from it,
// instead of reporting from x = 0, and checks the result where it can.
import type { Logger } from 'pino';
import { assertLength } from '@admm-share/core';
import type { Resume } from '@admm-share/protocol';
import type { Privacy } from '../privacy/privacy.js';
import type { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';

/**
 * Without noise a replayed round must reproduce the share that was sent (same code, same
 * inputs: bit for bit on the same machine); more than this relative difference, measured
 * against the largest coordinate of the share, means the party's data changed.
 */
export const REPLAY_TOLERANCE = 1e-9;

/**
 * Recompute x_m of round k (k >= 1) from the inputs of that round's update, c and rho of
 * round k and what this party released in round k - 1, with the same code as the round
 * itself (RidgeXUpdate.updateFromBroadcast, within the privacy bounds), and release nothing:
 * no noise is drawn and the ledger is not charged, because x never leaves the party.
 * Afterwards `released` is the share that was sent in round k (with privacy on it holds that
 * round's noise), so the next round continues exactly as it would have without the restart.
 */
export function replayRound(x: RidgeXUpdate, msg: Resume, privacy: Privacy, log: Logger): void {
  if (!(msg.round >= 1)) throw new RangeError(`replayRound: round ${msg.round}; round 0 has nothing to replay`);
  assertLength('previousShare', msg.previousShare, x.n);
  assertLength('share', msg.share, x.n);
  x.released.set(msg.previousShare);
  x.updateFromBroadcast(msg.c, msg.rho, privacy.bounds);
  if (!privacy.enabled) checkReplay(x.released, msg.share, msg.round, log);
  x.released.set(msg.share);
}

/** Warn, naming the largest difference, when a replay without noise did not give the share that was sent. */
function checkReplay(recomputed: Float64Array, sent: Float64Array, round: number, log: Logger): void {
  let scale = 0;
  let worst = 0;
  let row = -1;
  for (let i = 0; i < sent.length; i++) {
    scale = Math.max(scale, Math.abs(sent[i]));
    const d = Math.abs(recomputed[i] - sent[i]);
    if (d > worst) {
      worst = d;
      row = i;
    }
  }
  if (worst > REPLAY_TOLERANCE * scale)
    log.warn(
      { round, row, recomputed: recomputed[row], sent: sent[row], difference: worst, relative: scale > 0 ? worst / scale : null },
      'resume: the replayed round does not reproduce the share this party sent (has its data file changed?)',
    );
}
