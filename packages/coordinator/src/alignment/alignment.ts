/**
 * Sample alignment from the private set intersection, as pure functions. PSI (psi.ts) gives,
 * per party and set, the position in the party's list of each label row's id (or -1). The
 * job's samples are the label rows that every party holds, in the order of the label file;
 * `rowsFor` maps them onto one party's positions and is the one function used when a party
 * first joins and when it rejoins.
 */

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

/** The positions in one party's list of the samples `kept` (label rows), in that order. */
export function rowsFor(party: string, set: string, kept: Uint32Array, positions: Int32Array): Uint32Array {
  const rows = new Uint32Array(kept.length);
  for (let r = 0; r < kept.length; r++) {
    const i = positions[kept[r]];
    if (i === undefined || i < 0) throw new AlignmentError(party, `party ${party} lacks a ${set} sample of the job`);
    rows[r] = i;
  }
  return rows;
}

export interface AlignedSet {
  /** Rows of the label file kept, in file order. */
  labelRows: Uint32Array;
  /** Per party (job order), its positions for the kept samples. */
  partyRows: Uint32Array[];
  /** Label rows that some party does not hold (not in the job). */
  dropped: number;
}

/** The label rows that every party holds. */
export function alignSet(set: string, labels: number, parties: readonly { id: string; positions: Int32Array }[]): AlignedSet {
  const kept: number[] = [];
  for (let r = 0; r < labels; r++) if (parties.every((p) => p.positions[r] >= 0)) kept.push(r);
  if (kept.length === 0)
    throw new AlignmentError(undefined, `no ${set} sample id is shared by the labels and every party: check that each party reads its ids as they are written (--ids first|qid|row, --id-column)`);
  const labelRows = Uint32Array.from(kept);
  return {
    labelRows,
    partyRows: parties.map((p) => rowsFor(p.id, set, labelRows, p.positions)),
    dropped: labels - kept.length,
  };
}
