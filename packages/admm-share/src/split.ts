import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  ConfigError,
  type LabelledSet,
  formatLabelsCsv,
  formatLibsvmViews,
  writeFileAtomic,
} from '@admm-share/core';

/**
 * Block sizes from `--split 66,57`: one party per entry; the last block takes whatever
 * columns the others leave, so `66,57` and `66,0` both split 123 features as 66 | 57.
 */
export function parseSplit(spec: string, features: number): number[] {
  const parts = spec.split(',').map((s) => s.trim());
  const sizes = parts.map((s) => Number(s));
  if (parts.length < 2 || sizes.some((v, i) => !Number.isSafeInteger(v) || v < 0 || (v === 0 && i < sizes.length - 1)))
    throw new ConfigError(`--split '${spec}' must list at least two block sizes, positive integers (e.g. 66,57)`);
  const head = sizes.slice(0, -1).reduce((a, b) => a + b, 0);
  const last = features - head;
  if (last < 1) throw new ConfigError(`--split '${spec}': the first blocks use ${head} of ${features} features, none left for the last party`);
  return [...sizes.slice(0, -1), last];
}

export interface PartyFiles {
  id: string;
  train: string;
  test?: string;
  features: number;
  /** 1-based range of the original columns this party holds. */
  columns: [number, number];
}

export interface SplitFiles {
  dir: string;
  parties: PartyFiles[];
  labels: string;
  testLabels?: string;
}

export function partyIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `party-${i + 1}`);
}

/**
 * Write what each organisation would hold: party m gets its feature columns (LIBSVM,
 * sample id first, local indices from 1) for train and test; the coordinator gets the
 * labels (CSV id,label). Every file is written atomically.
 */
export function writeVerticalSplit(dir: string, blocks: number[], train: LabelledSet, test?: LabelledSet): SplitFiles {
  mkdirSync(dir, { recursive: true });
  const ids = partyIds(blocks.length);
  const testFile = (id: string) => join(dir, `${id}.test.libsvm`);
  let start = 0;
  const parties = blocks.map((size, m): PartyFiles => {
    const end = start + size;
    const f: PartyFiles = { id: ids[m], train: join(dir, `${ids[m]}.train.libsvm`), features: size, columns: [start + 1, end] };
    if (test) f.test = testFile(ids[m]);
    start = end;
    return f;
  });
  const views = parties.map((f) => ({ columns: [f.columns[0] - 1, f.columns[1]] as const }));
  formatLibsvmViews(train.ids, train.X, views, (chunks, m) => writeFileAtomic(parties[m].train, chunks));
  if (test) formatLibsvmViews(test.ids, test.X, views, (chunks, m) => writeFileAtomic(testFile(ids[m]), chunks));
  const labels = join(dir, 'labels.train.csv');
  writeFileAtomic(labels, formatLabelsCsv(train.ids, train.y));
  let testLabels: string | undefined;
  if (test) {
    testLabels = join(dir, 'labels.test.csv');
    writeFileAtomic(testLabels, formatLabelsCsv(test.ids, test.y));
  }
  return { dir, parties, labels, testLabels };
}
