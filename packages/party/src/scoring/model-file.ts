// The files a party keeps next to its model path: the model JSON and the privacy report,
// each written atomically (write, fsync, rename), and where the privacy ledger lives; and
// reading a model back to score new rows with, checked field by field and against its digests.
// The digest (SHA-256) names a corrupted file; whoever edits the file can compute it again. The
// mac (HMAC-SHA256 under party.key, beside the model, mode 0600) also refuses an edit by anyone
// who cannot read that key. A model copied elsewhere to score with takes its party.key along.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { type Preparation, DataError, expectedValue, jsonDigest, parseWith, preparationSchema, readSignedJson, signedJson, writeFileAtomic, z } from '@admm-share/core';
import { type Done, type ModelRef, type Role, type SampleSet, DIGEST_RE, LOSSES, NAME_RE, ROLES } from '@admm-share/protocol';
import { PARTY_KEY_FILE, partyKey, partyKeyPath } from '../privacy/party-key.js';
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
export const MODEL_FORMAT = 'admm-share-party-model/4';

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
  /** How the rows were prepared before that, applied again to new rows (null: read as they are). */
  preparation: Preparation | null;
  /** With privacy on, the test rows whose scores were sent without noise (--release-test-scores), and the file they are from. */
  testScores?: { rows: number; from: SampleSet };
}


const formatField = z.literal(MODEL_FORMAT, { error: expectedValue(`'${MODEL_FORMAT}' (a model written by this version of admm-party)`) });
const digestField = z.string({ error: expectedValue('64 hex characters') }).regex(DIGEST_RE, { error: expectedValue('64 hex characters') });

/**
 * What a party model holds (format admm-share-party-model/4). The fields that decide how a new
 * row is scored are `preparation`, `preprocessing`, `coefficients`, `intercept` and `scoreClip`:
 * score = clip(x . row + intercept) with the row first prepared as `preparation` says (columns,
 * missing values, categories, standardisation) and then scaled to norm <= 1 if `rowScaling`.
 * The other fields writeModelFiles writes (hyperParameters, oneShot, trainingObjective, rows,
 * data, createdAt) are records for people, kept as they are and covered by the digest.
 */
const modelBody = z.looseObject(
  {
    format: formatField,
    jobId: z.string({ error: expectedValue('a name') }).regex(NAME_RE, { error: expectedValue('a name') }),
    partyId: z.string({ error: expectedValue('a name') }).regex(NAME_RE, { error: expectedValue('a name') }),
    role: z.enum(ROLES, { error: expectedValue(`one of ${ROLES.join(', ')}`) }),
    features: z.int({ error: expectedValue('an integer >= 1') }).min(1, { error: expectedValue('an integer >= 1') }),
    featureNames: z.array(z.string()),
    preparation: preparationSchema.nullable(),
    preprocessing: z.object({ rowScaling: z.boolean(), intercept: z.boolean() }, { error: expectedValue('{rowScaling, intercept}') }),
    loss: z.enum(LOSSES, { error: expectedValue(`one of ${LOSSES.join(', ')}`) }),
    /** logistic loss: which raw label is the positive class (+1); null for squared loss. */
    labels: z.object({ negative: z.string(), positive: z.string() }, { error: expectedValue('null or {negative, positive}') }).nullable(),
    coefficients: z.array(z.number({ error: expectedValue('a finite number') })),
    /** null: this party's part has no intercept. */
    intercept: z.number({ error: expectedValue('a finite number or null') }).nullable(),
    /** one-shot, passive: each score is clipped to [-scoreClip, scoreClip] (as released in training); null otherwise. */
    scoreClip: z.number({ error: expectedValue('a positive number or null') }).positive({ error: expectedValue('a positive number or null') }).nullable(),
  },
  { error: 'expected a JSON object' },
);

const partyModelFile = modelBody
  .extend({
    /** SHA-256 (hex) of the file's JSON without this field and mac (the HMAC over both, checked by readSignedJson). */
    digest: digestField,
  })
  .superRefine((m, ctx) => {
    const d = m.features;
    if (m.featureNames.length !== d) ctx.issues.push({ code: 'custom', path: ['featureNames'], message: `expected ${d} names, got ${m.featureNames.length}`, input: m });
    if (m.coefficients.length !== d) ctx.issues.push({ code: 'custom', path: ['coefficients'], message: `expected ${d} finite numbers, got ${m.coefficients.length}`, input: m });
    if (m.preprocessing.intercept !== (m.intercept !== null)) ctx.issues.push({ code: 'custom', path: ['preprocessing', 'intercept'], message: 'disagrees with intercept', input: m });
  });

/** A party model, as read back (readPartyModel). */
export type PartyModel = z.output<typeof partyModelFile>;

/** Write the model file, then the privacy report; a reader never sees half of either. */
export function writeModelFiles(m: ModelFileInput & { role: Role }): void {
  const { done, model, privacy } = m;
  const body: z.input<typeof modelBody> = {
    format: MODEL_FORMAT,
    jobId: done.jobId,
    partyId: m.partyId,
    role: m.role,
    features: m.features,
    featureNames: m.featureNames,
    preparation: m.preparation,
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
  writeFileAtomic(m.path, JSON.stringify(signedJson(partyKey(dirname(m.path)), { ...body, digest: jsonDigest(body) }), null, 2) + '\n');
  const testScores = m.testScores && {
    rows: m.testScores.rows,
    from: m.testScores.from === 'train' ? 'rows the coordinator held out of the training file' : 'the test file',
    guarantee: 'not covered: sent without noise (--release-test-scores)',
  };
  writeFileAtomic(privacyReportPath(m.path), JSON.stringify({ ...privacy.report(m.partyId, done.jobId, m.rowsScaled), ...(testScores ? { testScores } : {}) }, null, 2) + '\n');
}

/** What a scoring party tells the coordinator about its model (hello.model). */
export function modelRef(m: PartyModel): ModelRef {
  return { jobId: m.jobId, digest: m.digest, rowScaling: m.preprocessing.rowScaling, intercept: m.preprocessing.intercept };
}

/**
 * Read a party model to score with: every field that scoring uses is checked, and the digest
 * and the mac (under the party.key of its folder) must match the content (a file edited by
 * hand, truncated or from an older format is refused with a DataError naming the file and the field).
 */
export function readPartyModel(path: string): PartyModel {
  // The format, then the digests, then the fields, so that a hand edit which breaks a field is
  // reported as an edit, not as that field.
  const signed = readSignedJson(path, partyKeyPath(dirname(path)), {
    what: 'party model',
    format: MODEL_FORMAT,
    older: `train the model again with this version of admm-party (it signs the model with the ${PARTY_KEY_FILE} of its folder)`,
    unkeyed: ({ digest, ...body }) => {
      if (typeof digest !== 'string' || jsonDigest(body) !== digest) throw new DataError(path, undefined, 'party model: its content does not match its digest (the file was changed after training)');
    },
  });
  return parseWith(partyModelFile, signed, path, 'party model');
}
