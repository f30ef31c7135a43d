// The scoring ledger (model-p1.scoring-ledger.json): every noised scoring request of every
// prediction job, one entry per request, append-only and chained with the party's key like
// the training ledger (chain.ts). Its count cannot be edited back to get more noised releases
// than the budget pays for: an edited entry fails its MAC, a job whose count goes down fails
// the schema.
import { existsSync } from 'node:fs';
import { accountEpsilon, parseWith, readJsonFile, writeFileAtomic, z } from '@admm-share/core';
import { NAME_RE } from '@admm-share/protocol';
import { BUDGET_RTOL, reportedSpent } from './budget.js';
import { Chain, chainFields, ledgerKey, refuseUnsignedOverSigned, verifyChain } from './chain.js';

export const SCORING_LEDGER_FORMAT = 'admm-share-scoring-ledger/2';
/** The format before the chain: one entry per job, by job id; converted on first read. */
const OLD_SCORING_LEDGER_FORMAT = 'admm-share-scoring-ledger/1';
const WHAT = 'scoring ledger';

const positive = z.number().positive();

/** One prediction job's calibration and what it has spent (a party must not guess that). */
const jobFields = {
  epsilon: positive,
  delta: positive,
  sigma: positive,
  sensitivity: positive,
  requests: z.int().min(1),
  releases: z.int().min(0),
  epsilonSpent: z.number().min(0),
};
type JobFields = z.output<z.ZodObject<typeof jobFields>>;

/** The entry's epsilonSpent is what its releases spend, and within the budget. */
function checkSpend(e: JobFields, ctx: z.RefinementCtx, path: (string | number)[]): void {
  const spent = reportedSpent(accountEpsilon({ sigma: e.sigma, delta: e.delta, rounds: e.releases, sensitivity: e.sensitivity, method: 'exact' }), e.epsilon);
  if (Math.abs(e.epsilonSpent - spent) > BUDGET_RTOL * Math.max(spent, e.epsilon))
    ctx.addIssue({ code: 'custom', path: [...path, 'epsilonSpent'], message: `${e.epsilonSpent} does not match the ${e.releases} releases recorded (they spend ${spent})` });
  else if (e.epsilonSpent > e.epsilon * (1 + BUDGET_RTOL)) ctx.addIssue({ code: 'custom', path: [...path, 'epsilonSpent'], message: 'expected a number within the budget' });
}

const entry = z.strictObject({ ...chainFields, jobId: z.string().regex(NAME_RE, { error: 'not a job id' }), ...jobFields });
export type ScoringEntry = z.output<typeof entry>;
/** A job's state, as its latest entry records it. */
export type ScoringJob = Omit<ScoringEntry, 'seq' | 'prev' | 'mac'>;

const scoringLedgerFile = z
  .strictObject({ format: z.literal(SCORING_LEDGER_FORMAT, { error: `expected '${SCORING_LEDGER_FORMAT}'` }), entries: z.array(entry) })
  .superRefine((file, ctx) => {
    const last = new Map<string, ScoringEntry>();
    file.entries.forEach((e, i) => {
      checkSpend(e, ctx, ['entries', i]);
      const was = last.get(e.jobId);
      if (was && e.releases < was.releases)
        ctx.addIssue({ code: 'custom', path: ['entries', i, 'releases'], message: `job ${e.jobId} goes backwards: ${e.releases} releases after entries[${was.seq}] recorded ${was.releases}` });
      last.set(e.jobId, e);
    });
  });

/** The unchained format of earlier versions: read once and converted. */
const oldScoringLedgerFile = z.looseObject({
  format: z.literal(OLD_SCORING_LEDGER_FORMAT),
  jobs: z.record(
    z.string().regex(NAME_RE, { error: 'not a job id' }),
    z.looseObject(jobFields).superRefine((e, ctx) => checkSpend(e, ctx, [])),
  ),
});

/** Every prediction job's history of a party's noised scores, read (and checked) before each booking. */
export class ScoringLedger {
  private constructor(
    readonly path: string,
    private readonly chain: Chain<ScoringJob>,
  ) {}

  static open(path: string): ScoringLedger {
    if (!existsSync(path)) return new ScoringLedger(path, new Chain(path, WHAT, undefined));
    const value = readJsonFile(z.unknown(), path, WHAT);
    if (typeof value === 'object' && value !== null && (value as { format?: unknown }).format === OLD_SCORING_LEDGER_FORMAT) {
      refuseUnsignedOverSigned(path, WHAT, OLD_SCORING_LEDGER_FORMAT);
      const { jobs } = parseWith(oldScoringLedgerFile, value, path, WHAT);
      const ledger = new ScoringLedger(path, new Chain(path, WHAT, undefined));
      for (const [jobId, j] of Object.entries(jobs)) {
        const { epsilon, delta, sigma, sensitivity, requests, releases, epsilonSpent } = j;
        ledger.chain.push({ jobId, epsilon, delta, sigma, sensitivity, requests, releases, epsilonSpent });
      }
      ledger.write();
      return ledger;
    }
    const { entries } = parseWith(scoringLedgerFile, value, path, WHAT);
    const key = ledgerKey(path, true, WHAT);
    verifyChain(path, WHAT, key, entries);
    return new ScoringLedger(path, new Chain(path, WHAT, key, entries));
  }

  /** The latest state of job `jobId`, if any. */
  job(jobId: string): ScoringJob | undefined {
    return this.chain.latest(jobId);
  }

  /** Book a request: a new entry at the end of the chain, the file written atomically before the scores are sent. */
  append(state: ScoringJob): void {
    this.chain.push(state);
    this.write();
  }

  private write(): void {
    const file: z.input<typeof scoringLedgerFile> = { format: SCORING_LEDGER_FORMAT, entries: this.chain.entries };
    writeFileAtomic(this.path, JSON.stringify(file) + '\n', 0o600);
  }
}
