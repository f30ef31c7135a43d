// Helpers of the prepare tests: a bank-like table in raw units written as CSV together with its
// values (so that expectations are computed from the values, not from the code under test), and
// the plain statistics the tests compare with.
import { type NumericColumn, type RawTable } from '../index.js';
import { gaussian } from './support.js';

export interface BankTable {
  text: string;
  ids: string[];
  /** Numeric columns by name, NaN where missing. */
  numeric: Record<string, number[]>;
  /** The categorical column, undefined where missing. */
  job: (string | undefined)[];
}

export const JOBS = ['admin', 'blue-collar', 'technician', 'services', 'retired'] as const;
const JOB_WEIGHTS = [0.4, 0.3, 0.2, 0.09, 0.01];

/**
 * n rows of a bank's table in raw units: `rate` near 1e-2, `age` near 1e1, `income` near 1e5,
 * `change` around 0 of both signs; `job` categorical; `missingShare` of each value missing ('NA'
 * or empty); a yes/no label `subscribed` in the same file.
 */
export function bankTable(rand: () => number, n: number, missingShare = 0.05): BankTable {
  const g = gaussian(rand);
  const miss = () => rand() < missingShare;
  const numeric: Record<string, number[]> = { rate: [], age: [], income: [], change: [] };
  const job: (string | undefined)[] = [];
  const ids: string[] = [];
  const lines = ['id,rate,age,income,job,change,subscribed'];
  const cell = (v: number) => (Number.isNaN(v) ? (rand() < 0.5 ? 'NA' : '') : String(v));
  for (let i = 0; i < n; i++) {
    const id = `c${i}`;
    const rate = miss() ? NaN : Number((0.02 * Math.exp(0.5 * g())).toPrecision(6));
    const age = miss() ? NaN : Math.round(Math.min(95, Math.max(18, 45 + 12 * g())));
    const income = miss() ? NaN : Math.round(5e4 * Math.exp(0.6 * g()));
    const change = miss() ? NaN : Number((5 * g()).toPrecision(6));
    let u = rand();
    let k = 0;
    while (k < JOB_WEIGHTS.length - 1 && u >= JOB_WEIGHTS[k]) u -= JOB_WEIGHTS[k++];
    const j = miss() ? undefined : JOBS[k];
    ids.push(id);
    numeric.rate.push(rate);
    numeric.age.push(age);
    numeric.income.push(income);
    numeric.change.push(change);
    job.push(j);
    lines.push([id, cell(rate), cell(age), cell(income), j ?? '?', cell(change), rand() < 0.2 ? 'yes' : 'no'].join(','));
  }
  return { text: lines.join('\n') + '\n', ids, numeric, job };
}

/** Mean, population standard deviation and median of the present values, by plain loops over a sorted copy. */
export function plainStats(values: number[]): { mean: number; std: number; median: number } {
  const v = values.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const std = Math.sqrt(v.reduce((a, b) => a + (b - mean) * (b - mean), 0) / v.length);
  const median = v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  return { mean, std, median };
}

/** A copy of `t` with row i's values replaced (a neighbour under the project's relation): numeric by name, NaN for missing. */
export function replaceRow(t: RawTable, i: number, numeric: Record<string, number>, categories: Record<string, string | undefined> = {}): RawTable {
  const columns = t.columns.map((c) => {
    if (c.kind === 'numeric') {
      const values = Float64Array.from(c.values);
      if (c.name in numeric) values[i] = numeric[c.name];
      return { ...c, values } satisfies NumericColumn;
    }
    if (!(c.name in categories)) return c;
    const dictionary = [...c.dictionary];
    const codes = Uint32Array.from(c.codes);
    const v = categories[c.name];
    if (v === undefined) codes[i] = 0xffffffff;
    else {
      let k = dictionary.indexOf(v);
      if (k < 0) k = dictionary.push(v) - 1;
      codes[i] = k;
    }
    return { ...c, codes, dictionary };
  });
  return { ...t, columns };
}
