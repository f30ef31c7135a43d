import seedrandom from 'seedrandom';
import { type Csr, CsrBuilder } from '../linalg/csr.js';

export interface LabelledSet {
  ids: string[];
  X: Csr;
  /** Labels in {-1, +1}. */
  y: Float64Array;
}

export interface SyntheticData {
  train: LabelledSet;
  test: LabelledSet;
  /** Feature block sizes, one per party. */
  blocks: number[];
}

export interface SyntheticOptions {
  seed?: string;
  trainRows?: number;
  testRows?: number;
  blocks?: number[];
}

/**
 * A seeded logistic-regression data set: in every block, half the features are dense
 * Gaussian and half sparse 0/1 (20 % ones, so sparse storage matters); labels are drawn
 * from a logistic model with a non-zero intercept whose weights are spread over all
 * blocks, so every party contributes.
 */
export function syntheticDataset(opts: SyntheticOptions = {}): SyntheticData {
  const rng = seedrandom(opts.seed ?? 'admm-share');
  const blocks = opts.blocks ?? [10, 8, 6];
  const d = blocks.reduce((a, b) => a + b, 0);
  const normal = () => {
    const u = 1 - rng();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
  };
  const dense: boolean[] = [];
  for (const b of blocks) for (let j = 0; j < b; j++) dense.push(j % 2 === 0);
  const w = Array.from({ length: d }, (_, j) => normal() * (dense[j] ? 0.5 : 1.0));
  const bias = -0.5;
  const make = (rows: number, prefix: string, startId: number): LabelledSet => {
    const b = new CsrBuilder(d);
    const ids: string[] = [];
    const y = new Float64Array(rows);
    for (let i = 0; i < rows; i++) {
      let score = bias;
      for (let j = 0; j < d; j++) {
        const v = dense[j] ? Math.round(normal() * 1000) / 1000 : rng() < 0.2 ? 1 : 0;
        b.push(j, v);
        score += w[j] * v;
      }
      b.endRow();
      y[i] = rng() < 1 / (1 + Math.exp(-score)) ? 1 : -1;
      ids.push(`${prefix}${startId + i}`);
    }
    return { ids, X: b.build(d), y };
  };
  const train = make(opts.trainRows ?? 2000, 's', 1);
  const test = make(opts.testRows ?? 1000, 't', 1);
  return { train, test, blocks };
}

/**
 * A seeded synthetic data set of gisette's shape (the paper's second data set, which could
 * not be obtained): 6000 training and 1000 test rows, 5000 dense features in [-1, 1] (three
 * decimals, like gisette_scale), split 2000 | 2000 | 1000. Features are tanh of a random
 * projection of a 20-dimensional latent factor plus noise, so they are correlated as image
 * features are; labels come from a logistic model on 60 of the features spread over the
 * three blocks, with 5 % of labels flipped.
 */
export function gisetteLikeDataset(opts: { seed?: string; trainRows?: number; testRows?: number } = {}): SyntheticData {
  const rng = seedrandom(opts.seed ?? 'gisette');
  const normal = () => {
    const u = 1 - rng();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
  };
  const d = 5000;
  const k = 20;
  const blocks = [2000, 2000, 1000];
  const W = Float64Array.from({ length: d * k }, () => normal() / Math.sqrt(k));
  const informative = new Map<number, number>();
  while (informative.size < 60) informative.set(Math.floor(rng() * d), normal() * 1.5);
  const make = (rows: number, prefix: string): LabelledSet => {
    const b = new CsrBuilder(d);
    const y = new Float64Array(rows);
    const z = new Float64Array(k);
    const ids: string[] = [];
    for (let i = 0; i < rows; i++) {
      for (let l = 0; l < k; l++) z[l] = normal();
      let score = 0;
      for (let j = 0; j < d; j++) {
        let v = 0;
        for (let l = 0; l < k; l++) v += W[j * k + l] * z[l];
        const x = Math.round(Math.tanh(v + 0.5 * normal()) * 1000) / 1000;
        b.push(j, x);
        const w = informative.get(j);
        if (w !== undefined) score += w * x;
      }
      b.endRow();
      const label = rng() < 1 / (1 + Math.exp(-score)) ? 1 : -1;
      y[i] = rng() < 0.05 ? -label : label;
      ids.push(`${prefix}${i + 1}`);
    }
    return { ids, X: b.build(d), y };
  };
  return { train: make(opts.trainRows ?? 6000, 'g'), test: make(opts.testRows ?? 1000, 'gt'), blocks };
}
