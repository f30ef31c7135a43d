/**
 * Limits of the coordinator's HTTP endpoints that hold before a request's body is read, so
 * that what a client sends costs memory only once it has a slot (the cap on open connections
 * is http.ts's, before the HTTP parser): bodies read
 * only within a request slot (at most slots x body limit buffered at once, whatever the
 * number of connections), a body over its limit answered with 413 while the rest is
 * discarded (a reset would lose the answer), a budget of ids per token and minute, and
 * request paths shortened for the log.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** A refused request: its HTTP status, what went wrong in words, and when to retry (seconds). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/**
 * The body, at most `limit` bytes, else an HttpError 413. Past the limit nothing more is
 * kept and the rest is read and discarded (until it ends or the request times out), so the
 * client can read its 413: destroying the socket with unread data would reset the
 * connection and lose the answer.
 */
export function readBody(req: IncomingMessage, limit: number, flag: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (declared > limit) {
      req.resume();
      return reject(new HttpError(413, `the body is ${declared} bytes, more than ${flag} ${limit}`));
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size <= limit) return void chunks.push(c);
      req.off('data', onData);
      chunks.length = 0;
      req.resume();
      reject(new HttpError(413, `the body is more than ${flag} ${limit} bytes`));
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    // A client gone before its body ended: the request must still end (and free its slot).
    req.on('close', () => reject(new HttpError(400, 'the client closed the connection before the body ended')));
  });
}

/**
 * Ids each token may send to the parties per minute: a bucket per token that holds a
 * minute's ids and refills evenly, so a burst of up to that many is allowed and the long-run
 * rate is bounded. Keys are digests of the token (one per token the endpoint accepts).
 */
export class IdBudget {
  private readonly buckets = new Map<string, { level: number; at: number }>();

  constructor(readonly perMinute: number) {}

  /** Take `n` ids from `token`'s bucket, or say in how many seconds there will be enough. */
  take(token: string, n: number, now = performance.now()): { ok: true } | { ok: false; retryAfterSeconds: number } {
    const key = createHash('sha256').update(token).digest('hex');
    const perMs = this.perMinute / 60_000;
    const b = this.buckets.get(key) ?? { level: this.perMinute, at: now };
    b.level = Math.min(this.perMinute, b.level + (now - b.at) * perMs);
    b.at = now;
    this.buckets.set(key, b);
    if (n <= b.level) {
      b.level -= n;
      return { ok: true };
    }
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((n - b.level) / perMs / 1000)) };
  }
}

/** Characters of a request path kept in a log line. */
export const LOGGED_PATH_CHARS = 100;

/** A request's path for the log: its start, and how long it was when cut. */
export function loggedPath(url: string | undefined): string {
  const path = url ?? '';
  return path.length <= LOGGED_PATH_CHARS ? path : `${path.slice(0, LOGGED_PATH_CHARS)}... (${path.length} characters)`;
}

/**
 * Spreads requests evenly at `perSecond`: a request arriving while others are due waits its
 * turn (so a client fetching in a loop is slowed to the rate, not answered faster with
 * refusals), up to `maxWaitMs`; beyond that it is refused. What the requests compute then
 * costs the process at most `perSecond` times its price, however many clients ask.
 */
export class Pacer {
  private next = 0;

  constructor(
    private readonly perSecond: number,
    private readonly maxWaitMs: number,
  ) {}

  /** Resolves when it is this request's turn; rejects with a 429 HttpError when the queue is longer than maxWaitMs. */
  turn(now = performance.now()): Promise<void> {
    const at = Math.max(now, this.next);
    if (at - now > this.maxWaitMs) return Promise.reject(new HttpError(429, `more than ${this.perSecond} requests a second; retry later`, Math.ceil((at - now) / 1000)));
    this.next = at + 1000 / this.perSecond;
    return at <= now ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, at - now).unref());
  }
}
