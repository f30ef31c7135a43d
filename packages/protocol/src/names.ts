/**
 * The names the protocol carries, each as one `as const` table with the type derived from
 * it: validators check against the table, yargs offers it as `choices`, and code switches over
 * the type. Add a name here and every place that must handle it fails to compile until it does.
 */

/**
 * How the job trains: ADMM sharing, mini-batch SGD over the same processes (FDML), or the
 * one-shot private training (each passive party releases one noised score vector; the active
 * side fits the combined model; docs/privacy.md section 9).
 */
export const ALGORITHMS = ['admm', 'sgd', 'one-shot'] as const;
export type AlgorithmName = (typeof ALGORITHMS)[number];

/** The ADMM form: exact sharing ADMM (Boyd et al. 2011, section 7.3) or the paper's Algorithm 1. */
export const VARIANTS = ['exact', 'paper'] as const;
export type Variant = (typeof VARIANTS)[number];

/** Per-sample losses (core implements each; a test checks that the two lists agree). */
export const LOSSES = ['logistic', 'squared'] as const;
export type LossName = (typeof LOSSES)[number];

/**
 * The privacy mechanisms that add noise to what a party releases: one clipped score vector
 * (one-shot), or every round's share (ADMM, research mode).
 */
export const NOISE_MECHANISMS = ['score-release', 'gaussian-share', 'paper'] as const;
export type NoiseMechanism = (typeof NOISE_MECHANISMS)[number];
/** A party's privacy mechanism: one that adds noise, or none. */
export const MECHANISMS = [...NOISE_MECHANISMS, 'none'] as const;
export type MechanismName = (typeof MECHANISMS)[number];

/**
 * A party's role: the active party belongs to the label holder's organisation (it may see the
 * labels and sends no noise); every other party is passive and protects its rows itself.
 */
export const ROLES = ['active', 'passive'] as const;
export type Role = (typeof ROLES)[number];

/** Privacy accountants (core implements each; a test checks that the two lists agree). */
export const ACCOUNTANT_NAMES = ['exact', 'rdp', 'advanced'] as const;
export type AccountantName = (typeof ACCOUNTANT_NAMES)[number];

/** Why a job ended, as `done` reports it. */
export const STOP_REASONS = ['converged', 'max-rounds', 'budget', 'stopped'] as const;
export type StopReason = (typeof STOP_REASONS)[number];

/** The sample sets a party aligns. */
export const SAMPLE_SETS = ['train', 'test'] as const;
export type SampleSet = (typeof SAMPLE_SETS)[number];
