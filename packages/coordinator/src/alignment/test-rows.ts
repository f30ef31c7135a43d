/**
 * Test rows the label holder chooses among the aligned training ids (--holdout, --test-ids):
 * parties give one file each, the coordinator trains on the other aligned rows and tells each
 * party which of its training rows are test rows (setup.testFrom 'train'). The choice depends
 * on the aligned ids only, never on a label or a feature, so telling a party its test rows
 * says nothing it did not know (it learns its aligned rows from setup anyway).
 */
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { type TextEncoding, ConfigError, DataError, READ_CHUNK_BYTES, readChunks, readIdFile, refuseDuplicates } from '@admm-share/core';
import type { AlignedSet } from './alignment.js';

/** --holdout-seed when none is given (docs/commands.md). */
export const DEFAULT_HOLDOUT_SEED = '1';

/** How the coordinator chooses its test rows among the aligned ids. */
export type TestSelection = { method: 'holdout'; fraction: number; seed: string } | { method: 'test-ids'; file: string };

/** The flags that choose test rows, checked; undefined when none is given (the --test-labels flow, or no evaluation). */
export function testSelectionOf(flags: { holdout?: number; holdoutSeed?: string; testIds?: string; testLabels?: string }): TestSelection | undefined {
  const { holdout, holdoutSeed, testIds, testLabels } = flags;
  if (holdout !== undefined && testIds !== undefined) throw new ConfigError('--holdout and --test-ids both choose the test rows: give one of them');
  const chosen = holdout !== undefined ? '--holdout' : testIds !== undefined ? '--test-ids' : undefined;
  if (chosen && testLabels !== undefined)
    throw new ConfigError(`${chosen} and --test-labels both give the test rows: ${chosen} holds them out of --labels (parties give one file), --test-labels takes them from a second file (parties give --test): give one of them`);
  if (holdoutSeed !== undefined && holdout === undefined) throw new ConfigError('--holdout-seed needs --holdout');
  if (testIds !== undefined) return { method: 'test-ids', file: testIds };
  if (holdout === undefined) return undefined;
  if (!(Number.isFinite(holdout) && holdout > 0 && holdout < 1))
    throw new ConfigError(`--holdout must be a fraction strictly between 0 and 1 (the share of the aligned ids held out as test rows, e.g. 0.2), got ${holdout}`);
  return { method: 'holdout', fraction: holdout, seed: holdoutSeed ?? DEFAULT_HOLDOUT_SEED };
}

/**
 * The key that orders ids for a holdout: SHA-256 of the seed, a zero byte and the id. The
 * test rows are the round(fraction x n) aligned ids of smallest key, so the choice depends on
 * the seed and the set of aligned ids only, not on the order of any file, and can be
 * recomputed by anyone who has both.
 */
export function holdoutKey(seed: string, id: string): string {
  return createHash('sha256').update(seed).update('\0').update(id).digest('hex');
}

/** Test rows held out of at least one and at most n - 1 aligned ids (training needs one row, evaluation one). */
export function holdoutCount(fraction: number, n: number): number {
  return Math.min(n - 1, Math.max(1, Math.round(fraction * n)));
}

/** What the selection did, for the log and summary.json. */
export type SelectionReport =
  | { method: 'holdout'; fraction: number; seed: string; aligned: number; test: number; train: number }
  | { method: 'test-ids'; file: string; listed: number; notAligned: number; aligned: number; test: number; train: number };

/**
 * Which of the aligned ids (label ids of the aligned rows, in their order) are test rows: a
 * mask over them, and the report. `listed`: the ids of the --test-ids file (readTestIds). A selection that leaves no test row or no training row is a
 * ConfigError naming the flag.
 */
export function chooseTestRows(selection: TestSelection, alignedIds: readonly string[], listed: readonly string[] = []): { test: Uint8Array; report: SelectionReport } {
  const n = alignedIds.length;
  const test = new Uint8Array(n);
  if (selection.method === 'holdout') {
    if (n < 2) throw new ConfigError(`--holdout: ${n} aligned id${n === 1 ? '' : 's'}, too few to hold any out and still train`);
    const k = holdoutCount(selection.fraction, n);
    const keys = alignedIds.map((id) => holdoutKey(selection.seed, id));
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0));
    for (let j = 0; j < k; j++) test[order[j]] = 1;
    return { test, report: { method: 'holdout', fraction: selection.fraction, seed: selection.seed, aligned: n, test: k, train: n - k } };
  }
  const at = new Map<string, number>();
  alignedIds.forEach((id, i) => at.set(id, i));
  let k = 0;
  for (const id of listed) {
    const i = at.get(id);
    if (i === undefined) continue;
    test[i] = 1;
    k++;
  }
  if (k === 0)
    throw new ConfigError(`--test-ids ${selection.file}: none of its ${listed.length} ids is among the ${n} aligned ids (the ids of --labels that every party holds): check that it lists ids as the label file writes them`);
  if (k === n) throw new ConfigError(`--test-ids ${selection.file}: it lists every one of the ${n} aligned ids, which leaves no row to train on`);
  return { test, report: { method: 'test-ids', file: selection.file, listed: listed.length, notAligned: listed.length - k, aligned: n, test: k, train: n - k } };
}

/**
 * The ids of a --test-ids file: a CSV file with a header naming the id column (--id-column),
 * or one id per line. A first line that holds a comma or is the id column's name is a CSV
 * header. A repeated id is an error (DataError, naming both lines), as in any file of ids, and
 * so is a byte that is not UTF-8 unless the file is read as Latin-1 (--id-encoding).
 */
export function readTestIds(file: string, idColumn: string, encoding: TextEncoding = 'utf8'): string[] {
  try {
    statSync(file);
  } catch (err) {
    throw new ConfigError(`--test-ids ${file}: ${(err as Error).message}`);
  }
  const chunks: Buffer[] = [];
  readChunks(file, READ_CHUNK_BYTES, (c) => chunks.push(c), encoding);
  const lines = Buffer.concat(chunks).toString('utf8').split(/\r?\n/);
  const first = lines.find((l) => l.trim() !== '')?.trim() ?? '';
  if (first.includes(',') || first === idColumn) return readIdFile(file, { format: 'csv', idColumn, encoding }).ids;
  const ids: string[] = [];
  const at: number[] = [];
  lines.forEach((l, i) => {
    const id = l.trim();
    if (id === '') return;
    ids.push(id);
    at.push(i + 1);
  });
  refuseDuplicates(file, ids, at);
  if (ids.length === 0) throw new DataError(file, undefined, 'no ids (one id per line, or a CSV file with an id column)');
  return ids;
}

/** An aligned set split by a mask over its rows: the rows marked (test) and the others (train), each in the set's order. */
export function splitAligned(set: AlignedSet, test: Uint8Array): { train: AlignedSet; test: AlignedSet } {
  const pick = (v: Uint32Array, want: number) => v.filter((_, i) => test[i] === want);
  const part = (want: number): AlignedSet => ({ labelRows: pick(set.labelRows, want), partyRows: set.partyRows.map((r) => pick(r, want)), dropped: 0 });
  return { train: { ...part(0), dropped: set.dropped }, test: part(1) };
}

/** The log's line for a selection. */
export function selectionLine(r: SelectionReport): string {
  const how = r.method === 'holdout' ? `--holdout ${r.fraction}, seed ${r.seed}` : `--test-ids ${r.file}: ${r.listed} listed, ${r.notAligned} not among the aligned ids`;
  return `test rows: ${r.test} of the ${r.aligned} aligned ids held out of training (${how}); training on the other ${r.train}`;
}
