import seedrandom from 'seedrandom';

/** The files `bankTelecomDataset` writes, by name. */
export const BANK_TELECOM_FILES = ['bank.csv', 'telecom.csv', 'new-bank.csv', 'new-telecom.csv', 'new-subscribed.csv'] as const;
export type BankTelecomFile = (typeof BANK_TELECOM_FILES)[number];

export const BANK_TELECOM_DEFAULTS = { seed: 'bank-telecom', rows: 10_000 } as const;
/** Share of each organisation's customers the other also holds. */
export const BANK_TELECOM_OVERLAP = 0.8;
/** Share of each file's numeric feature cells left empty (as '', 'NA' or '?'). */
export const BANK_TELECOM_MISSING = 0.05;
export const BANK_REGIONS = ['north', 'south', 'east', 'west', 'central'] as const;
export const TELECOM_PLANS = ['prepaid', 'basic', 'plus', 'premium'] as const;
export const BANK_TELECOM_MISSING_MARKERS = ['', 'NA', '?'] as const;

export interface BankTelecomOptions {
  seed?: string;
  /** Rows of bank.csv (telecom.csv has as many); the new-customer files have a tenth. */
  rows?: number;
}

interface Column {
  name: string;
  /** Decimals written. */
  decimals: number;
  /** Weight of the standardised column in the target's logit (0: no effect). */
  weight: number;
  /** Whether some of its cells are missing. */
  gaps: boolean;
}

const BANK_COLUMNS: Column[] = [
  { name: 'age', decimals: 0, weight: 0.25, gaps: true },
  { name: 'income', decimals: 0, weight: 0.45, gaps: true },
  { name: 'balance', decimals: 2, weight: 0.3, gaps: true },
  { name: 'credit_utilisation', decimals: 3, weight: -0.4, gaps: false },
  { name: 'products', decimals: 0, weight: 0.4, gaps: false },
];
const TELECOM_COLUMNS: Column[] = [
  { name: 'monthly_minutes', decimals: 0, weight: 0, gaps: false },
  { name: 'data_gb', decimals: 2, weight: 0.6, gaps: true },
  { name: 'tenure_months', decimals: 0, weight: 0.5, gaps: true },
  { name: 'dropped_calls', decimals: 0, weight: -0.5, gaps: false },
  { name: 'monthly_bill', decimals: 2, weight: 0.2, gaps: true },
];
const REGION_SHARE = [0.3, 0.25, 0.2, 0.15, 0.1];
const REGION_EFFECT = [0, 0.3, -0.15, 0.15, -0.4];
const PLAN_SHARE = [0.3, 0.35, 0.25, 0.1];
const PLAN_EFFECT = [-0.4, 0, 0.3, 0.6];
const PLAN_FEE = [5, 15, 30, 55];
const INTERCEPT = -1.9;

interface Customer {
  id: string;
  bank: number[];
  region: number;
  telecom: number[];
  plan: number;
  subscribed: boolean;
}

const clamp = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, v));

/**
 * A seeded data set shaped like a bank (the label holder) and a telecom partner, each with
 * its own CSV in raw units, for the "bring your own data" path. The generating model:
 *
 * - A population of customers, each with every feature of both organisations, drawn
 *   independently (n: a standard normal): bank `age` = 44 + 14 n in [18, 90] (whole years),
 *   `income` = e^(ln 42000 + 0.55 n) in [1e4, 3e5], `balance` = e^(ln 6000 + n) - 5000 in
 *   [-5e3, 1e5], `credit_utilisation` = e^(ln 0.2 + 0.9 n) in [0.01, 1], `products` = 2.2 + 1.1 n
 *   in 1..6, `region` one of BANK_REGIONS (30/25/20/15/10 %); telecom `monthly_minutes` =
 *   e^(ln 350 + 0.8 n) in [0, 3000] (3 % exactly 0), `data_gb` = e^(ln 4 + 1.4 n) in [0.01, 100],
 *   `tenure_months` = e^(ln 30 + 0.9 n) in 1..240, `dropped_calls` Poisson with mean
 *   2 + minutes / 500, `plan` one of TELECOM_PLANS (30/35/25/10 %), `monthly_bill` = the plan's
 *   fee + 0.01 minutes + 0.8 GB + 3 n (at least 5).
 * - The target `subscribed` (yes/no) is drawn from a logistic model on the population's
 *   standardised columns, (value - mean) / deviation over the population: logit =
 *   INTERCEPT + sum of each column's weight times its standardised value + the region's and
 *   the plan's effect (the weights in BANK_COLUMNS, TELECOM_COLUMNS, REGION_EFFECT,
 *   PLAN_EFFECT). About a fifth are yes. The telecom's part of the logit varies about twice as
 *   much as the bank's, so a model on both organisations' columns clearly beats the bank's own.
 * - bank.csv holds `rows` customers and telecom.csv as many, BANK_TELECOM_OVERLAP of them
 *   shared, each file in its own random order; ids are `C` and six digits. 5 % of each file's
 *   numeric cells (in three of its five numeric columns) are missing, written as '', 'NA' or
 *   '?' at random. new-bank.csv and new-telecom.csv are a tenth as many new customers (no
 *   target, the same overlap and gaps); new-subscribed.csv is their target, observed later.
 */
export function bankTelecomDataset(opts: BankTelecomOptions = {}): Record<BankTelecomFile, string> {
  const rows = opts.rows ?? BANK_TELECOM_DEFAULTS.rows;
  if (!Number.isSafeInteger(rows) || rows < 10) throw new RangeError(`bank-telecom: rows must be an integer >= 10, got ${rows}`);
  const rng = seedrandom(opts.seed ?? BANK_TELECOM_DEFAULTS.seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng());
  const pick = (shares: readonly number[]) => {
    let u = rng();
    for (let k = 0; k < shares.length - 1; k++) if ((u -= shares[k]) < 0) return k;
    return shares.length - 1;
  };
  const poisson = (mean: number) => {
    const limit = Math.exp(-mean);
    let k = 0;
    for (let p = rng(); p > limit; p *= rng()) k++;
    return k;
  };
  const round = (v: number, decimals: number) => Number(v.toFixed(decimals));

  const newRows = Math.max(10, Math.round(rows / 10));
  const sizes = [rows, newRows];
  const population = sizes.map((n) => n + (n - Math.round(BANK_TELECOM_OVERLAP * n)));
  const total = population[0] + population[1];
  const ids = new Set<string>();
  while (ids.size < total) ids.add(`C${String(1 + Math.floor(rng() * 999_999)).padStart(6, '0')}`);
  const idList = [...ids];

  const customers: Customer[] = idList.map((id) => {
    const region = pick(REGION_SHARE);
    const plan = pick(PLAN_SHARE);
    const minutes = rng() < 0.03 ? 0 : Math.round(clamp(Math.exp(Math.log(350) + 0.8 * normal()), 0, 3000));
    const dataGb = round(clamp(Math.exp(Math.log(4) + 1.4 * normal()), 0.01, 100), 2);
    return {
      id,
      region,
      plan,
      subscribed: false,
      bank: [
        Math.round(clamp(44 + 14 * normal(), 18, 90)),
        Math.round(clamp(Math.exp(Math.log(42_000) + 0.55 * normal()), 10_000, 300_000)),
        round(clamp(Math.exp(Math.log(6000) + normal()) - 5000, -5000, 100_000), 2),
        round(clamp(Math.exp(Math.log(0.2) + 0.9 * normal()), 0.01, 1), 3),
        Math.round(clamp(2.2 + 1.1 * normal(), 1, 6)),
      ],
      telecom: [
        minutes,
        dataGb,
        Math.round(clamp(Math.exp(Math.log(30) + 0.9 * normal()), 1, 240)),
        poisson(2 + minutes / 500),
        round(Math.max(5, PLAN_FEE[plan] + 0.01 * minutes + 0.8 * dataGb + 3 * normal()), 2),
      ],
    };
  });
  const standardise = (get: (c: Customer) => number[], columns: Column[]) =>
    columns.map((_, j) => {
      let mean = 0;
      for (const c of customers) mean += get(c)[j];
      mean /= customers.length;
      let v = 0;
      for (const c of customers) v += (get(c)[j] - mean) ** 2;
      return { mean, sd: Math.sqrt(v / customers.length) };
    });
  const bankStats = standardise((c) => c.bank, BANK_COLUMNS);
  const telecomStats = standardise((c) => c.telecom, TELECOM_COLUMNS);
  for (const c of customers) {
    let logit = INTERCEPT + REGION_EFFECT[c.region] + PLAN_EFFECT[c.plan];
    BANK_COLUMNS.forEach((col, j) => (logit += (col.weight * (c.bank[j] - bankStats[j].mean)) / bankStats[j].sd));
    TELECOM_COLUMNS.forEach((col, j) => (logit += (col.weight * (c.telecom[j] - telecomStats[j].mean)) / telecomStats[j].sd));
    c.subscribed = rng() < 1 / (1 + Math.exp(-logit));
  }

  const shuffled = <T>(xs: T[]): T[] => {
    const a = xs.slice();
    for (let i = a.length - 1; i > 0; i--) {
      const k = Math.floor(rng() * (i + 1));
      [a[i], a[k]] = [a[k], a[i]];
    }
    return a;
  };
  /** The file's numeric cells as text, with exactly the missing share of them blanked in the columns with gaps. */
  const cells = (group: Customer[], get: (c: Customer) => number[], columns: Column[]): string[][] => {
    const text = group.map((c) => get(c).map((v, j) => v.toFixed(columns[j].decimals)));
    const holes = columns.flatMap((col, j) => (col.gaps ? group.map((_, i) => [i, j] as const) : []));
    const count = Math.round(BANK_TELECOM_MISSING * group.length * columns.length);
    for (const [i, j] of shuffled(holes).slice(0, count)) text[i][j] = BANK_TELECOM_MISSING_MARKERS[Math.floor(rng() * BANK_TELECOM_MISSING_MARKERS.length)];
    return text;
  };
  const csv = (header: string[], lines: string[][]) => [header, ...lines].map((l) => l.join(',')).join('\n') + '\n';

  const files = (k: 0 | 1, withTarget: boolean) => {
    const n = sizes[k];
    const offset = k === 0 ? 0 : population[0];
    const all = customers.slice(offset, offset + population[k]);
    const only = all.length - n;
    const bank = shuffled(all.slice(0, n));
    const telecom = shuffled(all.slice(only));
    const b = cells(bank, (c) => c.bank, BANK_COLUMNS);
    const t = cells(telecom, (c) => c.telecom, TELECOM_COLUMNS);
    const bankHeader = ['customer_id', ...BANK_COLUMNS.map((c) => c.name), 'region', ...(withTarget ? ['subscribed'] : [])];
    const telecomHeader = ['customer_id', ...TELECOM_COLUMNS.map((c) => c.name), 'plan'];
    return {
      bank: csv(bankHeader, bank.map((c, i) => [c.id, ...b[i], BANK_REGIONS[c.region], ...(withTarget ? [c.subscribed ? 'yes' : 'no'] : [])])),
      telecom: csv(telecomHeader, telecom.map((c, i) => [c.id, ...t[i], TELECOM_PLANS[c.plan]])),
      outcomes: csv(['customer_id', 'subscribed'], bank.map((c) => [c.id, c.subscribed ? 'yes' : 'no'])),
    };
  };
  const train = files(0, true);
  const fresh = files(1, false);
  return {
    'bank.csv': train.bank,
    'telecom.csv': train.telecom,
    'new-bank.csv': fresh.bank,
    'new-telecom.csv': fresh.telecom,
    'new-subscribed.csv': fresh.outcomes,
  };
}
