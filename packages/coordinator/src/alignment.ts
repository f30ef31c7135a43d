/**
 * Sample alignment by keyed id hashes, as pure functions. The job's samples are the label
 * ids that every party holds, in the order of the label file; `rowsFor` maps them onto one
 * party's rows and is the one function used when a party first joins and when it rejoins.
 */
import { hashKeys } from '@admm-share/core';

export class AlignmentError extends Error {
  override readonly name = 'AlignmentError';
  constructor(
    /** The party at fault, or undefined when the sets simply do not meet. */
    readonly party: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** A party's id hashes as hex keys, indexed by key; duplicates are an error. */
export function indexIds(party: string, set: string, hashes: Uint8Array): Map<string, number> {
  const index = new Map<string, number>();
  hashKeys(hashes).forEach((k, i) => {
    if (index.has(k)) throw new AlignmentError(party, `the ${set} ids contain a duplicate`);
    index.set(k, i);
  });
  return index;
}

/** The rows of one party holding the samples `kept`, in that order. */
export function rowsFor(party: string, set: string, kept: readonly string[], index: ReadonlyMap<string, number>): Uint32Array {
  const rows = new Uint32Array(kept.length);
  for (let r = 0; r < kept.length; r++) {
    const i = index.get(kept[r]);
    if (i === undefined) throw new AlignmentError(party, `party ${party} lacks a ${set} sample of the job`);
    rows[r] = i;
  }
  return rows;
}

export interface AlignedSet {
  /** Rows of the label file kept, in file order. */
  labelRows: Uint32Array;
  /** Their id keys (what a rejoining party is aligned against). */
  keptKeys: string[];
  /** Per party (job order), its rows for the kept samples. */
  partyRows: Uint32Array[];
  /** Ids seen anywhere (labels or a party) that are not in the job. */
  dropped: number;
}

/** The intersection of the label ids with every party's ids. */
export function alignSet(set: string, labelKeys: readonly string[], parties: readonly { id: string; hashes: Uint8Array }[]): AlignedSet {
  const indexes = parties.map((p) => indexIds(p.id, set, p.hashes));
  const union = new Set(labelKeys);
  for (const index of indexes) for (const k of index.keys()) union.add(k);
  const labelRows: number[] = [];
  const keptKeys: string[] = [];
  labelKeys.forEach((k, r) => {
    if (indexes.every((index) => index.has(k))) {
      labelRows.push(r);
      keptKeys.push(k);
    }
  });
  if (keptKeys.length === 0)
    throw new AlignmentError(undefined, `no ${set} sample id is shared by the labels and every party: check that each party reads its ids as they are written (--ids first|qid|row, --id-column)`);
  return {
    labelRows: Uint32Array.from(labelRows),
    keptKeys,
    partyRows: parties.map((p, m) => rowsFor(p.id, set, keptKeys, indexes[m])),
    dropped: union.size - keptKeys.length,
  };
}
