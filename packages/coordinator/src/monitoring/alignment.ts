/**
 * The alignment's progress for the status API, the dashboard and the metrics. At a million
 * rows the private set intersection is most of a job's time (minutes, against seconds of
 * training), so the port shows each of its steps as it goes: the coordinator hashing and
 * blinding its label ids per set, and each party's intersection per set, with the ids done of
 * the total, the seconds so far and an estimate of the time left. It is fed by the same
 * callbacks as the terminal's bars (connections/party-port.ts), a field update per chunk of
 * a few thousand ids; only counts and times are kept, never an id or a point.
 */
import type { SampleSet } from '@admm-share/protocol';
import type { PsiStep } from '../connections/party-port.js';

export interface AlignmentStep {
  /** What is being done: the coordinator's own `hashing label ids`, `blinding label ids`, or a party's `intersecting ids`. */
  step: string;
  /** The party whose ids these are; null: the coordinator's label ids. */
  party: string | null;
  set: SampleSet;
  done: number;
  /** Null until the first report (a step still waiting for the threads, or a small one done at once). */
  total: number | null;
  /** Since the step was asked for (its time waiting for the threads included); fixed once it is done. */
  seconds: number;
  /** Seconds left at the step's rate since its work began; 0 once done, null before its first report. */
  etaSeconds: number | null;
}

/**
 * `aligning`: the intersection runs (the job waits for its parties' ids); `done`: every party
 * is aligned and the job has gone on to its set-up; `failed`: the job ended before; `resumed`:
 * a job resumed from its checkpoint, which has no alignment before training (a rejoining
 * party's intersection is still a step).
 */
export type AlignmentPhase = 'aligning' | 'done' | 'failed' | 'resumed';

export interface AlignmentStatus {
  phase: AlignmentPhase;
  /**
   * While aligning, the parties whose ids have not come yet: not joined, or joined and hashing
   * and blinding their own ids, which the coordinator cannot follow (most of the alignment's
   * time at a party).
   */
  waitingFor: { party: string; joined: boolean }[];
  /** The alignment's seconds: so far while aligning, its total once done (the summary's alignment.seconds); null for a resumed job. */
  seconds: number | null;
  steps: AlignmentStep[];
}

interface Tracked {
  step: PsiStep;
  createdAt: number;
  done: number;
  total: number | null;
  /**
   * When its work began, as known at its first report: the steps share the coordinator's one
   * team of threads and run one after the other, so a step asked for while another ran began
   * when that one ended. Its rate is measured from there (time queued is not work).
   */
  workFrom?: number;
  lastAt: number;
  endedAt?: number;
}

/** A step's key: one per party, set and step (a party that rejoins starts its steps again). */
const keyOf = (s: PsiStep) => `${s.party ?? ''}\0${s.set}\0${s.what}`;

export class AlignmentProgress {
  private readonly steps = new Map<string, Tracked>();
  private startedAt: number | undefined;
  private seconds: number | undefined;
  /** When a job that failed before its alignment ended stopped. */
  private stoppedAt: number | undefined;

  constructor(
    /** A job resumed from its checkpoint (--resume). */
    private readonly resumed: boolean,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A step begins: the callback its chunks report to (done of total). */
  step(step: PsiStep): (done: number, total: number) => void {
    const createdAt = this.now();
    this.startedAt ??= createdAt;
    const t: Tracked = { step, createdAt, done: 0, total: null, lastAt: createdAt };
    const key = keyOf(step);
    this.steps.delete(key);
    this.steps.set(key, t);
    return (done, total) => {
      const at = this.now();
      t.workFrom ??= Math.max(createdAt, ...[...this.steps.values()].map((o) => (o !== t && o.endedAt !== undefined && o.endedAt <= at ? o.endedAt : -Infinity)));
      t.done = done;
      t.total = total;
      t.lastAt = at;
      if (done >= total) t.endedAt ??= at;
    };
  }

  /** Every party is aligned: the alignment took `seconds` (as the summary records it). */
  aligned(seconds: number): void {
    this.seconds ??= seconds;
  }

  /** The job failed: if it was still aligning, the clocks stop there. */
  failed(): void {
    if (this.seconds === undefined && !this.resumed) this.stoppedAt ??= this.now();
  }

  /** `parties`: the job's parties, and whether each has joined. */
  status(parties: readonly { id: string; joined: boolean }[]): AlignmentStatus {
    const now = this.now();
    const phase: AlignmentPhase = this.resumed ? 'resumed' : this.seconds !== undefined ? 'done' : this.stoppedAt !== undefined ? 'failed' : 'aligning';
    const sofar = this.startedAt === undefined ? 0 : ((this.stoppedAt ?? now) - this.startedAt) / 1000;
    return {
      phase,
      seconds: this.seconds ?? (phase === 'resumed' ? null : sofar),
      waitingFor: phase === 'aligning' ? parties.filter((p) => ![...this.steps.values()].some((t) => t.step.party === p.id)).map((p) => ({ party: p.id, joined: p.joined })) : [],
      steps: [...this.steps.values()].map((t) => ({
        step: t.step.what,
        party: t.step.party,
        set: t.step.set,
        done: t.done,
        total: t.total,
        seconds: ((t.endedAt ?? this.stoppedAt ?? now) - t.createdAt) / 1000,
        etaSeconds: eta(t),
      })),
    };
  }
}

/** Seconds left at the step's rate since its work began. */
function eta(t: Tracked): number | null {
  if (t.total === null || t.done <= 0) return null;
  if (t.done >= t.total) return 0;
  return (((t.lastAt - (t.workFrom ?? t.createdAt)) / 1000) * (t.total - t.done)) / t.done;
}
