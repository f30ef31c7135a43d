// The files a party keeps next to its model path: the model JSON and the privacy report,
// each written atomically (write, fsync, rename), and where the privacy ledger lives; and
// reading a model back to score new rows with, checked field by field and against its digest.
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { DataError, jsonDigest, writeFileAtomic } from '@admm-share/core';
import { type Classes, type Done, type LossName, type ModelRef, type Role, LOSSES, NAME_RE, ROLES } from '@admm-share/protocol';
import type { Privacy } from '../privacy/privacy.js';

/** The model the job ended with, for the model file. */
export interface FinalModel {
  coefficients: Float64Array;
  /** null: this party's part has no intercept. */
  intercept: number | null;
  /** Aligned training rows it was fitted on. */
  rows: number;
  /** one-shot: how this party's part is applied to new rows and combined (recorded in the model file). */
  oneShot?: object;
  /** one-shot, passive: the clip of its scores, applied to new rows' scores too. */
  scoreClip?: number;
}

/** The model file's format tag; readPartyModel reads this version only. */
export const MODEL_FORMAT = 'admm-share-party-model/2';

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

/**
 * What a party model holds (format admm-share-party-model/2). The fields that decide how a new
 * row is scored are `preprocessing`, `coefficients`, `intercept` and `scoreClip`:
 * score = clip(x . row + intercept) with the row first scaled to norm <= 1 if `rowScaling`.
 */
export interface PartyModel {
  format: typeof MODEL_FORMAT;
  jobId: string;
  partyId: string;
  role: Role;
  features: number;
  featureNames: string[];
  preprocessing: { rowScaling: boolean; intercept: boolean };
  loss: LossName;
  /** logistic loss: which raw label is the positive class (+1); null for squared loss. */
  labels: Classes | null;
  coefficients: number[];
  /** null: this party's part has no intercept. */
  intercept: number | null;
  /** one-shot, passive: each score is clipped to [-scoreClip, scoreClip] (as released in training); null otherwise. */
  scoreClip: number | null;
  /** SHA-256 (hex) of the file's JSON without this field. */
  digest: string;
  [extra: string]: unknown;
}

/** Write the model file, then the privacy report; a reader never sees half of either. */
export function writeModelFiles(m: ModelFileInput & { role: Role }): void {
  const { done, model, privacy } = m;
  const body = {
    format: MODEL_FORMAT,
    jobId: done.jobId,
    partyId: m.partyId,
    role: m.role,
    features: m.features,
    featureNames: m.featureNames,
    preprocessing: { rowScaling: privacy.enabled || model.oneShot !== undefined, intercept: model.intercept !== null },
    loss: done.params.loss,
    labels: done.classes,
    coefficients: Array.from(model.coefficients),
    intercept: model.intercept,
    scoreClip: model.scoreClip ?? null,
    hyperParameters: { ...done.params, rounds: done.rounds, stopReason: done.reason },
    ...(model.oneShot ? { oneShot: model.oneShot } : {}),
    trainingObjective: done.objective,
    rows: model.rows,
    data: m.data,
    createdAt: new Date().toISOString(),
  };
  mkdirSync(dirname(m.path), { recursive: true });
  writeFileAtomic(m.path, JSON.stringify({ ...body, digest: jsonDigest(body) }, null, 2) + '\n');
  writeFileAtomic(privacyReportPath(m.path), JSON.stringify(privacy.report(m.partyId, done.jobId, m.rowsScaled), null, 2) + '\n');
}

/** What a scoring party tells the coordinator about its model (hello.model). */
export function modelRef(m: PartyModel): ModelRef {
  return { jobId: m.jobId, digest: m.digest, rowScaling: m.preprocessing.rowScaling, intercept: m.preprocessing.intercept };
}

/**
 * Read a party model to score with: every field that scoring uses is checked, and the digest
 * must match the content (a file edited by hand, truncated or from an older format is refused
 * with a DataError naming the file and the field).
 */
export function readPartyModel(path: string): PartyModel {
  const bad = (detail: string): never => {
    throw new DataError(path, undefined, `party model: ${detail}`);
  };
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return bad(e.code ? `cannot read it (${e.code})` : `not JSON (${e.message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('expected a JSON object');
  const o = v as Record<string, unknown>;
  if (o.format !== MODEL_FORMAT) bad(`format ${JSON.stringify(o.format)?.slice(0, 60)}, expected '${MODEL_FORMAT}' (a model written by this version of admm-party)`);
  const { digest, ...body } = o;
  if (typeof digest !== 'string' || !/^[0-9a-f]{64}$/.test(digest)) bad('digest: expected 64 hex characters');
  if (jsonDigest(body) !== digest) bad('its content does not match its digest (the file was changed after training)');
  const name = (k: string) => (typeof o[k] === 'string' && NAME_RE.test(o[k] as string) ? (o[k] as string) : bad(`${k}: expected a name`));
  name('jobId');
  name('partyId');
  if (!ROLES.includes(o.role as Role)) bad(`role: expected one of ${ROLES.join(', ')}`);
  if (!LOSSES.includes(o.loss as LossName)) bad(`loss: expected one of ${LOSSES.join(', ')}`);
  const d = o.features;
  if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 1) return bad('features: expected an integer >= 1');
  if (!Array.isArray(o.featureNames) || o.featureNames.length !== d || o.featureNames.some((n) => typeof n !== 'string')) bad(`featureNames: expected ${d} names`);
  if (!Array.isArray(o.coefficients) || o.coefficients.length !== d || o.coefficients.some((c) => typeof c !== 'number' || !Number.isFinite(c))) bad(`coefficients: expected ${d} finite numbers`);
  if (o.intercept !== null && (typeof o.intercept !== 'number' || !Number.isFinite(o.intercept))) bad('intercept: expected a finite number or null');
  if (o.scoreClip !== null && !(typeof o.scoreClip === 'number' && o.scoreClip > 0 && Number.isFinite(o.scoreClip))) bad('scoreClip: expected a positive number or null');
  const p = o.preprocessing as Record<string, unknown> | null;
  if (typeof p !== 'object' || p === null || typeof p.rowScaling !== 'boolean' || typeof p.intercept !== 'boolean') return bad('preprocessing: expected {rowScaling, intercept}');
  if (p.intercept !== (o.intercept !== null)) bad('preprocessing.intercept disagrees with intercept');
  const l = o.labels as Record<string, unknown> | null;
  if (l !== null && (typeof l !== 'object' || typeof l.negative !== 'string' || typeof l.positive !== 'string')) bad('labels: expected null or {negative, positive}');
  return o as PartyModel;
}
