/**
 * Rate limits for the warnings that anyone who can reach a port can cause (a refused
 * connection, a socket error, a failed TLS handshake, an HTTP request refused before its body):
 * without them a flood of connections is a flood of log lines, and of disk. Per kind, at most WARNINGS_PER_SECOND are logged in a
 * second; the rest are counted and reported in one line when that second ends.
 */
import type { Logger } from 'pino';

/** Warnings of one kind logged per second; enough to see what is happening, few enough to keep a flood out of the log. */
export const WARNINGS_PER_SECOND = 10;
const WINDOW_MS = 1000;

interface Window {
  start: number;
  logged: number;
  suppressed: number;
  /** Sums of the counts (e.g. ids) carried by the suppressed warnings. */
  totals: Record<string, number>;
  timer?: NodeJS.Timeout;
}

export class WarningLimiter {
  /** One entry per kind seen in the last second; kinds come from a fixed set in the code, never from a peer. */
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly log: Logger,
    private readonly perSecond = WARNINGS_PER_SECOND,
  ) {}

  /**
   * `log.warn(fields, msg)`, unless `kind` has had its share of this second. `counts` (e.g.
   * the ids a request carried) are summed over the suppressed ones and reported with them.
   */
  warn(kind: string, log: Logger, fields: object, msg: string, counts: Record<string, number> = {}): void {
    const now = performance.now();
    let w = this.windows.get(kind);
    if (!w || now - w.start >= WINDOW_MS) {
      if (w) this.report(kind, w);
      w = { start: now, logged: 0, suppressed: 0, totals: {} };
      this.windows.set(kind, w);
    }
    if (w.logged < this.perSecond) {
      w.logged++;
      log.warn(fields, msg);
      return;
    }
    for (const [k, v] of Object.entries(counts)) w.totals[k] = (w.totals[k] ?? 0) + v;
    if (w.suppressed++ === 0) {
      const window = w;
      window.timer = setTimeout(() => this.report(kind, window), WINDOW_MS - (now - window.start));
      window.timer.unref();
    }
  }

  /** Report what is still counted (at shutdown). */
  flush(): void {
    for (const [kind, w] of this.windows) this.report(kind, w);
  }

  private report(kind: string, w: Window): void {
    clearTimeout(w.timer);
    if (this.windows.get(kind) === w) this.windows.delete(kind);
    if (w.suppressed === 0) return;
    this.log.warn({ kind, suppressed: w.suppressed, perSecond: this.perSecond, ...w.totals }, 'warnings suppressed');
    w.suppressed = 0;
    w.totals = {};
  }
}
