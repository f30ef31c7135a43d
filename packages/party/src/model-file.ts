// The files a party keeps next to its model path: the model JSON and the privacy report,
// each written atomically (write, fsync, rename), and where the privacy ledger lives.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeFileAtomic } from '@admm-share/core';
import type { Done } from '@admm-share/protocol';
import type { Privacy } from './privacy.js';
import type { FinalModel } from './session.js';

/** model-p1.json -> model-p1.privacy.json */
export function privacyReportPath(model: string): string {
  return model.replace(/(\.json)?$/, '.privacy.json');
}

/** model-p1.json -> model-p1.ledger.json: the privacy ledger, kept between restarts. */
export function ledgerPath(model: string): string {
  return model.replace(/(\.json)?$/, '.ledger.json');
}

export interface ModelFileInput {
  /** Where the model goes; the privacy report goes next to it. */
  path: string;
  partyId: string;
  /** The training file, recorded in the model. */
  data: string;
  features: number;
  featureNames: string[];
  done: Done;
  model: FinalModel;
  privacy: Privacy;
  /** Training rows scaled to norm 1 (privacy on). */
  rowsScaled: number;
}

/** Write the model file, then the privacy report; a reader never sees half of either. */
export function writeModelFiles(m: ModelFileInput): void {
  const { done, model, privacy } = m;
  const json = {
    format: 'admm-share-party-model/1',
    jobId: done.jobId,
    partyId: m.partyId,
    features: m.features,
    featureNames: m.featureNames,
    coefficients: Array.from(model.coefficients),
    intercept: model.intercept,
    hyperParameters: { ...done.params, rounds: done.rounds, stopReason: done.reason },
    rowNormalisation: privacy.enabled || model.oneShot ? 'rows with norm > 1 scaled to norm 1 (apply the same to new data)' : null,
    ...(model.oneShot ? { oneShot: model.oneShot } : {}),
    trainingObjective: done.objective,
    rows: model.rows,
    data: m.data,
    createdAt: new Date().toISOString(),
  };
  mkdirSync(dirname(m.path), { recursive: true });
  writeFileAtomic(m.path, JSON.stringify(json, null, 2) + '\n');
  writeFileAtomic(privacyReportPath(m.path), JSON.stringify(privacy.report(m.partyId, done.jobId, m.rowsScaled), null, 2) + '\n');
}
