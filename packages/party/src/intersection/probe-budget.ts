/**
 * How many candidate ids a coordinator may test against this party's ids (docs/privacy.md,
 * "Membership probing"). Every label id a party blinds again in a `psi`, and every id of a
 * `lookup`, tells the coordinator whether the party holds it; a coordinator that reconnects
 * with a fresh set each time would otherwise test as many as it likes. So a party keeps, in a
 * file beside its privacy ledger (model-p1.probe-budget.json), per coordinator URL and UTC day
 * the ids it has answered in training and in scoring, and per job the digests of the label
 * sets it answered: a rejoin that sends a set again is answered without a charge (even after the
 * party was restarted; a coordinator restarted with its --out sends the same set too), a
 * different set for the same job only with the first set's number of ids and no more than
 * --max-label-sets-per-job of them (default 1: none).
 *
 * The coordinator is known by the URL this party's operator gave (--coordinator), not by
 * anything the coordinator presents, so a hostile coordinator cannot make itself a new one.
 * The file is read again before each charge, so that a party restarted the same day (or
 * `predict` after training with the same model) goes on from what was spent.
 */
import { existsSync } from 'node:fs';
import { expectedValue, readJsonFile, writeFileAtomic, z } from '@admm-share/core';
import { DIGEST_RE, NAME_RE, SAMPLE_SETS, type SampleSet } from '@admm-share/protocol';

export const PROBE_BUDGET_FORMAT = 'admm-share-probe-budget/1';

/** Jobs whose label sets are remembered (the oldest are let go). */
const MAX_JOBS = 64;

/** Which day budget a process charges: training's label sets, or scoring's (a batch psi and every lookup). */
export type ProbeKind = 'training' | 'scoring';

const count = z.int({ error: expectedValue('an integer >= 0') }).min(0, { error: expectedValue('an integer >= 0') });

const probeFile = z.strictObject({
  format: z.literal(PROBE_BUDGET_FORMAT, { error: expectedValue(`'${PROBE_BUDGET_FORMAT}'`) }),
  /** The UTC day the counts are of (YYYY-MM-DD); on another day they start again from 0. */
  day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, { error: expectedValue('a day YYYY-MM-DD') }),
  /** Ids answered on `day`, per coordinator URL. */
  coordinators: z.record(z.string().min(1), z.strictObject({ training: count, scoring: count })),
  /** The label sets answered per job and set: their digests, and the ids of the first. */
  jobs: z
    .array(
      z.strictObject({
        coordinator: z.string().min(1),
        jobId: z.string().regex(NAME_RE, { error: expectedValue('a job id') }),
        set: z.enum(SAMPLE_SETS),
        labelIds: count,
        digests: z.array(z.string().regex(DIGEST_RE, { error: expectedValue('64 hex characters') })).min(1),
      }),
    )
    .max(MAX_JOBS),
});

type ProbeFile = z.output<typeof probeFile>;

/** model-p1.ledger.json -> model-p1.probe-budget.json, beside the privacy ledger. */
export function probeBudgetPath(ledger: string): string {
  return ledger.replace(/(\.ledger)?\.json$/, '') + '.probe-budget.json';
}

export interface ProbeLimits {
  /** Candidate ids per coordinator and UTC day, of this process's kind (--max-probe-ids-per-day). */
  idsPerDay: number;
  /** Different label sets answered per job and set (--max-label-sets-per-job). */
  labelSetsPerJob: number;
  /** Ids looked up per connection (--max-lookup-ids-per-connection; scoring only). */
  lookupIdsPerConnection: number;
}

/**
 * A request refused: `message` says why and which flag raises the cap (it goes to the
 * coordinator, so it names no local file); `fields` are for the party's own log.
 */
export class ProbeRefused extends Error {
  constructor(
    message: string,
    readonly fields: Record<string, number | string>,
  ) {
    super(message);
  }
}

export class ProbeBudget {
  private connection = -1;
  private connectionIds = 0;

  constructor(
    readonly path: string,
    /** The coordinator's URL, as given to this party. */
    readonly coordinator: string,
    readonly kind: ProbeKind,
    readonly limits: ProbeLimits,
    private readonly today: () => string = () => new Date().toISOString().slice(0, 10),
  ) {
    // A malformed file stops the party at start (exit 65), not at the first request.
    this.load();
  }

  /**
   * A `psi`'s label set, before any blinding: a set this party answered for the job already
   * is free; a new one is charged, or refused (ProbeRefused) if it is a different set beyond
   * --max-label-sets-per-job, not of the first set's size, or beyond the day's budget.
   * `ownNewKey`: the set comes under a new PSI cache this party had to start because it could
   * not use its own (psi-caches.ts): one set more than the limit, of any size, is allowed, since
   * only the party can cause it (the day's budget still applies).
   */
  labelSet(jobId: string, set: SampleSet, digest: string, ids: number, ownNewKey = false): { charged: boolean; sets: number; today: number; cap: number } {
    const f = this.load();
    const spent = this.spent(f);
    const cap = this.limits.idsPerDay;
    const job = f.jobs.find((j) => j.coordinator === this.coordinator && j.jobId === jobId && j.set === set);
    if (job?.digests.includes(digest)) return { charged: false, sets: job.digests.length, today: spent[this.kind], cap };
    const fields = { jobId, set, labelIds: ids, setsAnswered: job?.digests.length ?? 0, answeredToday: spent[this.kind], cap };
    if (job && !(ownNewKey && job.digests.length <= this.limits.labelSetsPerJob)) {
      const after = `job ${jobId}: a different ${set} label set of ${ids} ids after ${job.digests.length} of ${job.labelIds} ids`;
      if (ids !== job.labelIds) throw new ProbeRefused(`${after}; a rejoin resends the same set, and a restarted coordinator the same ids`, fields);
      if (job.digests.length >= this.limits.labelSetsPerJob)
        throw new ProbeRefused(`${after} (--max-label-sets-per-job ${this.limits.labelSetsPerJob}); a rejoin, or a coordinator restarted with its --out folder, resends the same set`, fields);
    }
    this.refuseOverDay(spent[this.kind], ids, `job ${jobId}: ${ids} ${set} label ids refused`, fields);
    spent[this.kind] += ids;
    if (job) job.digests.push(digest);
    else {
      f.jobs.push({ coordinator: this.coordinator, jobId, set, labelIds: ids, digests: [digest] });
      f.jobs.splice(0, Math.max(0, f.jobs.length - MAX_JOBS));
    }
    this.save(f);
    return { charged: true, sets: job?.digests.length ?? 1, today: spent[this.kind], cap };
  }

  /** A `lookup` of `ids` ids on connection `connection`: charged, or refused (ProbeRefused) over either cap. */
  lookup(ids: number, connection: number): { connectionIds: number; today: number; cap: number } {
    if (connection !== this.connection) {
      this.connection = connection;
      this.connectionIds = 0;
    }
    const f = this.load();
    const spent = this.spent(f);
    const cap = this.limits.idsPerDay;
    const fields = { ids, connectionIds: this.connectionIds, connectionCap: this.limits.lookupIdsPerConnection, answeredToday: spent[this.kind], cap };
    if (this.connectionIds + ids > this.limits.lookupIdsPerConnection)
      throw new ProbeRefused(
        `a lookup of ${ids} ids refused: ${this.connectionIds} ids were looked up on this connection already, at most ${this.limits.lookupIdsPerConnection} (--max-lookup-ids-per-connection)`,
        fields,
      );
    this.refuseOverDay(spent[this.kind], ids, `a lookup of ${ids} ids refused`, fields);
    spent[this.kind] += ids;
    this.connectionIds += ids;
    this.save(f);
    return { connectionIds: this.connectionIds, today: spent[this.kind], cap };
  }

  private refuseOverDay(spent: number, ids: number, what: string, fields: Record<string, number | string>): void {
    const cap = this.limits.idsPerDay;
    if (spent + ids > cap)
      throw new ProbeRefused(
        `${what}: ${spent} candidate ids were answered today (UTC) for ${this.coordinator} in ${this.kind}, at most ${cap} a day (--max-probe-ids-per-day)`,
        { ...fields, file: this.path },
      );
  }

  private spent(f: ProbeFile): { training: number; scoring: number } {
    return (f.coordinators[this.coordinator] ??= { training: 0, scoring: 0 });
  }

  private load(): ProbeFile {
    const day = this.today();
    if (!existsSync(this.path)) return { format: PROBE_BUDGET_FORMAT, day, coordinators: {}, jobs: [] };
    const f = readJsonFile(probeFile, this.path, 'probe budget');
    // A new day: the counts start again, the label sets of each job are kept.
    return f.day === day ? f : { ...f, day, coordinators: {} };
  }

  private save(f: ProbeFile): void {
    writeFileAtomic(this.path, JSON.stringify(f) + '\n', 0o600);
  }
}
