/**
 * Every message of the admm-share protocol. See PROTOCOL.md for the state machine.
 * Party -> coordinator: hello, ids, ready, share, exhausted, scores, batchScores, released, fitted, found, partial, part.
 * Coordinator -> party: challenge, welcome, psi, setup, resume, round, evaluate, sgd, release, fit, done, lookup, score, part.
 */
import type { AccountantName, AlgorithmName, LossName, MechanismName, Role, SampleSet, StopReason } from './names.js';

export const PROTOCOL_VERSION = 14;

/** Bytes of a point of the private set intersection: an X25519 u-coordinate (RFC 7748), as core's POINT_BYTES. */
export const POINT_BYTES = 32;
/**
 * Bytes of the challenge nonce: 256 random bits per connection, so a nonce never repeats
 * and a recorded hello proof is worthless on another connection.
 */
export const NONCE_BYTES = 32;
/**
 * Bytes of MessagePack framing allowed on top of a message's vectors (type tag, field names,
 * job id of at most 64 characters, scalars, typed-array headers: a few hundred bytes); each
 * side sets its ws maxPayload to its largest vector plus this.
 */
export const ENVELOPE_BYTES = 4096;
/**
 * Largest magnitude of any value a party sends per sample: its share, its test scores, its
 * batch scores (all scores D_m x_m). Checked on receipt (4003), because a finite value is not
 * a safe one: two shares of 1.7e308 sum to Infinity and the coordinator's c becomes NaN,
 * which every honest party would then refuse. 1e100 refuses nothing a model produces (a
 * logistic score of 40 is already a probability within 4e-18 of 0 or 1; a regression score
 * is on the scale of the labels) and keeps the coordinator's arithmetic finite: a product of
 * two bounded values is at most 1e200, and a sum of fewer than 2^53 of them (the residual
 * norms run over N x M entries) stays below 1e216, far from the largest double, 1.8e308.
 */
export const MAX_SHARE_MAGNITUDE = 1e100;
/** Largest `penaltySq` (||x_m||^2) a party may report: MAX_SHARE_MAGNITUDE squared, by the same reasoning. */
export const MAX_PENALTY_SQ = MAX_SHARE_MAGNITUDE * MAX_SHARE_MAGNITUDE;
/**
 * Values in each `part` of a long vector (parts.ts): 2^16 doubles, 512 KiB, so that a part and
 * its envelope fit one WebSocket frame of a party's (link.ts, FRAME_BYTES).
 */
export const PART_VALUES = 1 << 16;
/**
 * Vectors longer than this (2^17 doubles, 1 MiB) are sent in parts. A shorter one is one frame
 * and is not joined from frames by the receiver; in parts it only costs messages (a round of
 * 1e5 rows and four parties took 47 ms in parts against 39 whole, docs/scaling.md).
 */
export const PARTS_ABOVE = 1 << 17;
/**
 * Label points in each `psi` message (2^15 points, 1 MiB): a set's points are sent in several,
 * in order. Whole, a million label ids were a 32 MB message, which the party's WebSocket joined
 * into a fresh 32 MB buffer from as many bytes of the socket's reads: 64 MB at once, the
 * largest step of a party's memory in the intersection (docs/scaling.md).
 */
export const PSI_PART_POINTS = 1 << 15;
/** Party ids and job ids: short printable names. */
export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The coordinator's first message on every connection. */
export interface Challenge {
  type: 'challenge';
  protocolVersion: number;
  /** NONCE_BYTES random bytes, new for every connection. */
  nonce: Uint8Array;
  /**
   * With --psi-cache: the name (PSI_CACHE_ID_RE) of this coordinator's caches of the private set
   * intersection, the same for every job it runs from that folder. A party that keeps caches
   * looks for its cache with this coordinator under that name (docs/privacy.md, 11.7).
   */
  psiCache?: string;
}

/** A PSI cache's name or id: 128 random bits, as hex. */
export const PSI_CACHE_ID_RE = /^[0-9a-f]{32}$/;

/** Bytes of a hello proof (HMAC-SHA256). */
export const PROOF_BYTES = 32;

export interface Hello {
  type: 'hello';
  /**
   * HMAC-SHA256 under the party's secret of the challenge nonce, the party id and the job id
   * (see core's helloProof), or null for a party without a credential.
   */
  proof: Uint8Array | null;
  protocolVersion: number;
  partyId: string;
  /** The job the party expects to join, or null to join whatever job the coordinator runs. */
  jobId: string | null;
  /** Feature columns (d_m), reported for the summary. */
  features: number;
  trainRows: number;
  /** 0 when the party has no test set. */
  testRows: number;
  /** Whether the party adds noise (has a privacy budget): with --algorithm auto, any noise makes the job one-shot. */
  noise: boolean;
  /** A prediction job: the trained model the party scores with (null when training). */
  model: ModelRef | null;
  /**
   * Only for a coordinator that named its PSI caches (challenge.psiCache) and a party with
   * --psi-cache: the id of the party's usable cache with it, or null (none yet, or not usable).
   */
  psiCache?: string | null;
}

/** Bytes of a model digest (SHA-256), sent as 64 hex characters. */
export const DIGEST_RE = /^[0-9a-f]{64}$/;

/** What a party scoring new rows says about the model it scores with (its model file). */
export interface ModelRef {
  /** The training job the model comes from. */
  jobId: string;
  /** The model file's digest (SHA-256 of its content). */
  digest: string;
  /** Rows are scaled to norm <= 1 before scoring (as in training with privacy, or one-shot). */
  rowScaling: boolean;
  /** This party's part includes the model's intercept. */
  intercept: boolean;
}

export interface Welcome {
  type: 'welcome';
  protocolVersion: number;
  jobId: string;
}

/**
 * Private set intersection (ECDH over X25519, docs/privacy.md section 11), coordinator's
 * half: its label ids of one set, each hashed onto the curve and blinded with the
 * coordinator's key a, in an order shuffled by the coordinator. The party answers with `ids`.
 */
export interface Psi {
  type: 'psi';
  jobId: string;
  set: SampleSet;
  /** The set's label ids, and the place among them of the first of `points` (PSI_PART_POINTS at most a message, in order). */
  total: number;
  at: number;
  /** POINT_BYTES per label id: H(id)^a, shuffled. */
  points: Uint8Array;
  /**
   * Only with PSI caches on both sides (hello.psiCache): the cache this intersection uses, and
   * whether it is the one the party named (warm: a and b are the cache's keys, and `points` are
   * only the label ids the party has not blinded before, possibly none) or a new one the party
   * starts with a new key b (every label id is sent).
   */
  cache?: { id: string; warm: boolean };
}

/** The party's half of the private set intersection of one set, the answer to `psi`. */
export interface Ids {
  type: 'ids';
  jobId: string;
  set: SampleSet;
  /** POINT_BYTES per row of the party's file: H(id)^b under the party's key b, in an order shuffled by the party. */
  points: Uint8Array;
  /** The `psi` points blinded again with b: H(label id)^(ab), in the order they came. */
  labelPoints: Uint8Array;
}

export interface Setup {
  type: 'setup';
  jobId: string;
  /**
   * Row i of the aligned training set is the party's point trainRows[i] of its `ids`, in the
   * order the party sent them (which the party maps back to a row of its file).
   */
  trainRows: Uint32Array;
  /** The aligned test rows, positions in the party's points of the set `testFrom`, in the order of the coordinator's test labels. */
  testRows: Uint32Array;
  /**
   * Where `testRows` point: 'test', the party's test file (its second intersection, with the
   * coordinator's --test-labels); or 'train', its training file, whose rows the coordinator held
   * out of training (--holdout, --test-ids): no test row is then a training row.
   */
  testFrom: SampleSet;
  lambda: number;
  loss: LossName;
  /** The rounds the coordinator plans to run (parties calibrate their noise for them). */
  rounds: number;
  /** rho of every round (parties with privacy refuse a larger one). */
  rho: number;
  /** Number of parties M. */
  parties: number;
  /** ADMM sharing, mini-batch SGD over the same processes (FDML-style), or the one-shot private training. */
  algorithm: AlgorithmName;
  /** The role the coordinator gives this party; the party refuses one it was not started with. */
  role: Role;
  /**
   * one-shot only: the training labels (+1 / -1) in aligned row order, the passive party's
   * regression target and the active party's fitting target; empty otherwise. With label
   * privacy (`labelFlip` > 0) these are the flipped labels.
   */
  labels: Float64Array;
  /**
   * The probability p in [0, 1/2) with which the coordinator flipped each training label
   * (randomized response, label differential privacy), 0 without. Whoever fits on the labels
   * uses the logistic loss corrected for it: l(t, y) - (p / (1 - 2p)) y t.
   */
  labelFlip: number;
  /**
   * Optional, sent to the active party of a one-shot job only: the weights of the classes -1 and
   * +1 in its fits' logistic loss, (1/N) sum_i w_{y_i} l(y_i, z_i) (admm-coordinator
   * --class-weight). Absent, or 1 and 1: unweighted.
   */
  classWeights?: ClassWeights;
}

/** Positive finite weights of the classes -1 (negative) and +1 (positive). */
export interface ClassWeights {
  negative: number;
  positive: number;
}

/** What a party tells the coordinator about its privacy setting (for the summary). */
export interface PrivacyInfo {
  mechanism: MechanismName;
  /** The party's total budget (null without noise). */
  epsilon: number | null;
  delta: number | null;
  /** Rounds the budget pays for; the coordinator runs no more. */
  rounds: number;
  /** Noise standard deviation per share coordinate (0 without noise). */
  sigma: number;
  /** L2 sensitivity of one round's release that sigma is calibrated for. */
  sensitivity: number;
  accountant: AccountantName | null;
  /** True when the noise comes from a seeded, predictable generator. */
  seeded: boolean;
  /**
   * What the party's data preparation spent on its statistics before the job: differentially
   * private estimates, mu-GDP plus the categories' threshold delta, composed with the release in
   * GDP (epsilon and delta above are the release's). Absent when nothing was estimated.
   */
  preparation?: { mu: number; deltaThreshold: number };
}

/**
 * Sent to a party that rejoins a running ADMM job (after `setup` and its `ready`): what the
 * party needs to replay round k, the last round whose share the coordinator holds from it,
 * and so recompute its x_m (a restarted party has lost it). The party runs round k's update
 * again from `previousShare` and `c`, without releasing anything, then continues from
 * `share` (its next target is share - c of round k + 1). For k = 0 there is nothing to replay
 * (x = 0) and every vector is empty.
 */
export interface Resume {
  type: 'resume';
  jobId: string;
  /** k: 0, or the last round whose share the coordinator holds from this party. */
  round: number;
  /** rho of round k. */
  rho: number;
  /** The vector broadcast in round k (length N; empty for k = 0). */
  c: Float64Array;
  /** What this party released in round k - 1 (zeros for k = 1; empty for k = 0). */
  previousShare: Float64Array;
  /** What this party released in round k (with privacy on, including its noise; empty for k = 0). */
  share: Float64Array;
}

export interface Ready {
  type: 'ready';
  jobId: string;
  privacy: PrivacyInfo;
}

export interface Round {
  type: 'round';
  jobId: string;
  round: number;
  rho: number;
  /** The party's next target is w = s_m - c. */
  c: Float64Array;
}

export interface Share {
  type: 'share';
  jobId: string;
  round: number;
  /** s_m = D_m x_m (+ intercept), one number per aligned training sample. */
  share: Float64Array;
  /** ||x_m||^2, for the training objective. */
  penaltySq: number;
  /** Privacy budget spent after this round (0 without noise). */
  epsilonSpent: number;
  /** The x-update's conjugate gradients (a block too large to factor), null otherwise and with privacy on. */
  solver: SolverStats | null;
}

/** One round's conjugate gradient solve at a party. */
export interface SolverStats {
  iterations: number;
  /** Relative residual ||b - A x|| / ||b|| at the end (the recurrence's). */
  residual: number;
}

/** The party refuses round `round`: running it would overspend its privacy budget. */
export interface Exhausted {
  type: 'exhausted';
  jobId: string;
  round: number;
  epsilonSpent: number;
}

/**
 * One SGD step (algorithm 'sgd'). The party first applies `gradient` (the loss derivative
 * with respect to the summed score, one number per row of the previous step's batch):
 * x -= lr (D_B^T gradient / |B| + lambda x). Then, if `full`, it sends its whole share
 * (a `share` message for round `epoch`), otherwise its scores on the rows of `rows`.
 */
export interface Sgd {
  type: 'sgd';
  jobId: string;
  step: number;
  epoch: number;
  lr: number;
  gradient: Float64Array;
  rows: Uint32Array;
  full: boolean;
}

/** A party's scores D_B x_m (+ b) on an SGD batch. */
export interface BatchScores {
  type: 'batchScores';
  jobId: string;
  step: number;
  scores: Float64Array;
}

export interface Evaluate {
  type: 'evaluate';
  jobId: string;
  round: number;
}

export interface Scores {
  type: 'scores';
  jobId: string;
  round: number;
  /** D_test,m x_m (+ intercept), one number per aligned test sample. */
  scores: Float64Array;
}

/** one-shot, to a passive party: release your noised score vector (once; a repeat gets the same vector). */
export interface Release {
  type: 'release';
  jobId: string;
}

/** A passive party's one release. */
export interface Released {
  type: 'released';
  jobId: string;
  /** clip(D_m x_m) + noise, one number per aligned training sample. */
  scores: Float64Array;
  /** clip(D_test,m x_m) without noise (only with --release-test-scores), or empty. */
  testScores: Float64Array;
  epsilonSpent: number;
}

/** one-shot, to the active party: every passive release, to fit the combined model on. */
export interface Fit {
  type: 'fit';
  jobId: string;
  /** The passive parties, in the order of their releases. */
  parties: string[];
  /** Their releases concatenated: N numbers each. */
  releases: Float64Array;
  /** The noise standard deviation of each release (from its party's ready). */
  sigmas: Float64Array;
}

/** The active party's combined model, as far as the coordinator needs it. */
export interface Fitted {
  type: 'fitted';
  jobId: string;
  /** The combined model's weight on each passive party's clipped score, in the order of `fit`. */
  weights: Float64Array;
  /** Its training objective (mean loss + lambda/2 ||coefficients||^2). */
  objective: number;
  /** The same for the active party's local-only model. */
  localObjective: number;
  /** The active part of the combined model's test scores (features and intercept), or empty without a test set. */
  testScores: Float64Array;
  /** The local-only model's test scores, or empty. */
  localTestScores: Float64Array;
}

export interface Done {
  type: 'done';
  jobId: string;
  reason: StopReason;
  rounds: number;
  objective: number;
  /** Hyper-parameters of the run, recorded in each party's model file. */
  params: { variant: string; rho: number; alpha: number; lambda: number; loss: LossName };
  /** logistic loss: which raw label became -1 and which +1 (recorded in each party's model file); null otherwise. */
  classes: Classes | null;
}

export interface Classes {
  negative: string;
  positive: string;
}

/**
 * Prediction (batch, and each online request after its lookup): score the rows at these
 * positions of the party's `ids` points (in the party's order, which it maps back to rows of
 * its file), and answer with `partial`.
 */
export interface Score {
  type: 'score';
  jobId: string;
  rows: Uint32Array;
}

/** A party's part of the scores of the rows `score` named, in that order. */
export interface PartialScores {
  type: 'partial';
  jobId: string;
  /** D_m x_m (+ intercept) per row, clipped and noised when the party scores with a budget. */
  scores: Float64Array;
  /** This party's scoring budget spent so far (0 without noise). */
  epsilonSpent: number;
}

/** Online scoring: the ids of one request, hashed onto the curve and blinded with the coordinator's key (as `psi`). */
export interface Lookup {
  type: 'lookup';
  jobId: string;
  points: Uint8Array;
}

/**
 * The `lookup` points blinded again with the party's key, in the order they came; or, with
 * `refused` (and no points), the party's refusal of this one lookup (its caps on ids looked
 * up, docs/privacy.md "Membership probing"): the request fails, the connection stays.
 */
export interface Found {
  type: 'found';
  jobId: string;
  points: Uint8Array;
  refused?: string;
}

/** The longest `found.refused` reason, in characters. */
export const MAX_REFUSAL_CHARS = 500;

/**
 * Values at..at + PART_VALUES (fewer in the last part) of the vector of the `round` or `share`
 * of round `round` that follows, sent with an empty vector (parts.ts).
 */
export interface Part {
  type: 'part';
  jobId: string;
  round: number;
  at: number;
  values: Float64Array;
}

export type PartyMessage = Hello | Ids | Ready | Share | Exhausted | Scores | BatchScores | Released | Fitted | Found | PartialScores | Part;
export type CoordinatorMessage = Challenge | Welcome | Psi | Setup | Resume | Round | Evaluate | Sgd | Release | Fit | Done | Lookup | Score | Part;
/** A coordinator message as a party's session gets it: a long vector's parts already put together (parts.ts). */
export type WholeCoordinatorMessage = Exclude<CoordinatorMessage, Part>;
export type Message = PartyMessage | CoordinatorMessage;
export type MessageType = Message['type'];

export function assertNever(x: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(x)}`);
}
