// Coefficients of a model fit on prepared columns, read back in the units of the data file.
import { InternalError } from '../errors.js';
import type { Preparation } from './preparation.js';

export interface OriginalUnits {
  columns: Array<{
    /** The prepared column. */
    name: string;
    /** The column of the data file it comes from. */
    original: string;
    kind: 'numeric' | 'indicator' | 'category';
    /** The coefficient on the prepared column. */
    coefficient: number;
    /** Per unit of the original column (coefficient / scale): numeric columns only. */
    perUnit: number | null;
    center: number | null;
    scale: number | null;
  }>;
  /** What the standardisation adds to the intercept: -sum coefficient * center / scale. */
  offset: number;
}

/**
 * A model's coefficients on the prepared columns of `p`, in the original units: a numeric
 * column enters as (x - center) / scale, so its coefficient b is b / scale per unit of x, and the
 * model's intercept gains -b center / scale. Exact for values inside the clipping range; a
 * clipped value contributes as the range's end.
 */
export function originalUnits(p: Preparation, coefficients: ArrayLike<number>): OriginalUnits {
  if (coefficients.length !== p.outputs.length) throw new InternalError('reading coefficients in original units', `${coefficients.length} coefficients for ${p.outputs.length} prepared columns`);
  const byName = new Map(p.inputs.map((c) => [c.name, c]));
  let offset = 0;
  const columns = p.outputs.map((o, j) => {
    const b = coefficients[j];
    const inp = byName.get(o.source);
    if (o.kind === 'numeric' && inp?.kind === 'numeric') {
      offset -= (b * inp.center) / inp.scale;
      return { name: o.name, original: o.source, kind: o.kind, coefficient: b, perUnit: b / inp.scale, center: inp.center, scale: inp.scale };
    }
    return { name: o.name, original: o.source, kind: o.kind, coefficient: b, perUnit: null, center: null, scale: null };
  });
  return { columns, offset };
}
