// The numbers a data file may hold (feature values and numeric labels).

/**
 * The numbers data files may hold: decimal notation only, i.e. an optional sign, digits with
 * an optional fraction (`5`, `5.`, `5.25`, `.5`) and an optional exponent (`e-3`, `E+7`).
 * `Number()` alone is far more lenient: it reads `0x10` as 16, `0b1`, `0o7`, `Infinity`,
 * surrounding whitespace and the empty string (as 0); all of these are typos or foreign
 * formats in a data file, so they are rejected rather than guessed at.
 */
export const DECIMAL_RE = /^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;

/**
 * Largest magnitude accepted for a feature value or a numeric (squared-loss) label.
 * The party squares and sums values (row norms for normalisation, the Gram matrices
 * D^T D and D D^T, squared residuals): with |v| <= 1e100 a square is at most 1e200, so a sum
 * stays below Number.MAX_VALUE (1.8e308) for up to 1e108 terms, i.e. for any N and d that
 * fit in memory. 1e308 passed the old finiteness check and overflowed to Infinity there.
 * No real feature needs more than 100 orders of magnitude; rescale the data if one does.
 */
export const MAX_ABS_VALUE = 1e100;

/**
 * A number in a data file: decimal notation (see DECIMAL_RE), finite and within
 * MAX_ABS_VALUE; otherwise a message saying what is wrong with `text`.
 */
export function parseDataNumber(text: string): number | string {
  if (!DECIMAL_RE.test(text)) return `'${text}' is not a decimal number`;
  const v = Number(text);
  if (!(Math.abs(v) <= MAX_ABS_VALUE)) return `'${text}' exceeds the largest accepted magnitude ${MAX_ABS_VALUE}`;
  return v;
}
