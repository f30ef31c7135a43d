// --class-weight: the flag's syntax, and the weights it gives once the labels are known.
import { ConfigError } from '../errors.js';
import { labelKey } from './labels.js';

/** What --class-weight says: scikit-learn's `balanced`, or a weight for raw label values (a class not named keeps 1). */
export type ClassWeightSpec = { kind: 'balanced' } | { kind: 'explicit'; weights: { label: string; weight: number }[] };

/** The flag's syntax, for messages and --help. */
export const CLASS_WEIGHT_SYNTAX = "'balanced' (N / (2 N_class) on the training rows) or LABEL=W[,LABEL=W] by raw label value, e.g. 'yes=5' or 'no=1,yes=5' (a class not named keeps 1)";

const WEIGHT_RE = /^[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** `text` as a ClassWeightSpec; a ConfigError naming the flag says what is wrong. */
export function parseClassWeight(text: string, flag = '--class-weight'): ClassWeightSpec {
  const s = text.trim();
  if (s === 'balanced') return { kind: 'balanced' };
  const weights: { label: string; weight: number }[] = [];
  for (const part of s.split(',')) {
    const eq = part.indexOf('=');
    const label = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (eq < 0 || label === '' || value === '') throw new ConfigError(`${flag} '${text}': '${part}' is not LABEL=WEIGHT; use ${CLASS_WEIGHT_SYNTAX}`);
    const weight = WEIGHT_RE.test(value) ? Number(value) : NaN;
    if (!(Number.isFinite(weight) && weight > 0)) throw new ConfigError(`${flag} '${text}': the weight of '${label}' is '${value}', not a positive number`);
    if (weights.some((w) => labelKey(w.label) === labelKey(label))) throw new ConfigError(`${flag} '${text}': label '${label}' is given twice`);
    weights.push({ label, weight });
  }
  return { kind: 'explicit', weights };
}

/**
 * The weights of the classes -1 (`classes.negative`, the raw value that became -1) and +1 for
 * training labels `y` (+-1, in the aligned training rows): balanced gives w_c = N / (2 N_c), as
 * scikit-learn's class_weight='balanced'. A named label that is neither class is a ConfigError.
 */
export function resolveClassWeights(spec: ClassWeightSpec, y: Float64Array, classes: { negative: string; positive: string }, flag = '--class-weight'): { negative: number; positive: number } {
  if (spec.kind === 'balanced') {
    let pos = 0;
    for (let i = 0; i < y.length; i++) if (y[i] > 0) pos++;
    const neg = y.length - pos;
    if (pos === 0 || neg === 0) throw new ConfigError(`${flag} balanced: the training rows hold one class only ('${pos === 0 ? classes.negative : classes.positive}')`);
    return { negative: y.length / (2 * neg), positive: y.length / (2 * pos) };
  }
  const out = { negative: 1, positive: 1 };
  for (const { label, weight } of spec.weights) {
    const k = labelKey(label);
    if (k === labelKey(classes.negative)) out.negative = weight;
    else if (k === labelKey(classes.positive)) out.positive = weight;
    else throw new ConfigError(`${flag}: label '${label}' is not a class of the labels (they are '${classes.negative}' and '${classes.positive}')`);
  }
  return out;
}

/** The weights as summary.json records them: each class's raw label value and weight. */
export function describeClassWeights(w: { negative: number; positive: number }, classes: { negative: string; positive: string }): { negative: { label: string; weight: number }; positive: { label: string; weight: number } } {
  return { negative: { label: classes.negative, weight: w.negative }, positive: { label: classes.positive, weight: w.positive } };
}
