/**
 * The job's HTTP port for people and monitoring (--http-port), separate from the parties'
 * WebSocket port:
 *   GET /              the dashboard (dashboard/index.html; its scripts, styles and uPlot are
 *                      served from the package: no CDN, works offline)
 *   GET /api/status    the job's status as JSON (monitor.ts, JobStatus) with a page of the
 *                      rounds kept for the charts: at most STATUS_PAGE_ROUNDS after `?since=R`
 *                      (`&limit=N` fewer); `more` says whether more follow, from `nextSince`
 *   GET /api/events    the same as server-sent events: `snapshot` (status and the curve, at most
 *                      SNAPSHOT_POINTS of it) on connecting, then `rounds` (new rounds) and
 *                      `state` (the status) as the job moves, at most every EVENT_INTERVAL_MS
 *   GET /metrics       Prometheus text format (prom-client, this job's own registry)
 *   GET /healthz       200 "ok" while the process is up (liveness)
 *   GET /readyz        200 once the parties' port listens and while the job has not failed,
 *                      else 503; the body names the phase
 * /healthz and /readyz answer without the bearer token: they say no more than whether the
 * process is up and which phase the job is in, and probes (docker compose, Kubernetes) rarely
 * carry a secret. Every other path needs the token when --http-token-file is given: as
 * `Authorization: Bearer TOKEN` (Prometheus, curl), or, for a browser, once as `/?token=TOKEN`,
 * which sets a cookie derived from the token (HttpOnly, SameSite=Strict) and redirects to `/`.
 * It binds to 127.0.0.1 unless --http-host says otherwise. Nothing here can change the job.
 * What a client can cost the training loop that shares this process is bounded: a status
 * page is a join of rounds serialized once (monitor.ts), an event stream's unsent output is
 * capped (a client that does not read is dropped) and a stream ends after --http-event-seconds
 * (a browser reconnects by itself), and open connections are capped (http.ts).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import type { HttpConfig, Phase } from '../config.js';
import { bearerCheck, closeHttp, httpServer, isLoopback, listenHttp, tokenCheck } from '../connections/http.js';
import { WarningLimiter } from '../connections/warnings.js';
import { HttpError, Pacer, loggedPath } from '../connections/http-limits.js';
import { HTTP_REQUEST_TIMEOUT_MS } from '../connections/server.js';
import type { Monitor } from './monitor.js';

export interface StatusServer {
  port: number;
  /** Send the clients of the event stream the last state, then close. */
  close(): Promise<void>;
}

/** How often the event stream sends what changed: a browser need not redraw at 100 rounds a second. */
export const EVENT_INTERVAL_MS = 250;
/** The event stream sends its state at least this often (the elapsed time moves on). */
const STATE_REFRESH_MS = 1_000;
/** A comment line this often keeps an idle event stream open through proxies. */
const KEEPALIVE_MS = 15_000;
/** Event-stream clients at once; more get 503 (each costs a socket and a JSON per event). */
export const MAX_EVENT_CLIENTS = 32;
/** Rounds in one page of /api/status (about 160 bytes each). */
export const STATUS_PAGE_ROUNDS = 1_000;
/** Points of the curve in an event stream's snapshot: a longer history is sent every k-th round (the charts are a few thousand pixels wide). */
export const SNAPSHOT_POINTS = 2_000;
/** Bytes an event-stream client may leave unsent (beyond what the kernel holds); past it, it is dropped. */
export const EVENT_UNSENT_BYTES = 1 << 20;
/** Ms an event-stream client may leave output unsent before it is dropped: it is not reading. */
export const EVENT_STALL_MS = 30_000;
/**
 * Requests a second for the page, the status API and /metrics, all clients together; more
 * wait their turn (up to PACE_MAX_WAIT_MS, then 429). A dashboard, a Prometheus scrape and a
 * script polling the status need a few; four clients fetching in a loop would otherwise take
 * the event loop from the training (measured: 6 % of its rounds left).
 */
export const API_REQUESTS_PER_SECOND = 20;
const PACE_MAX_WAIT_MS = 5_000;
/** Open connections to the port: every event stream and as many again for the page, the API and probes. */
export const MAX_HTTP_CONNECTIONS = 2 * MAX_EVENT_CLIENTS;
/** The browser's cookie: a digest of the token, not the token. */
const SESSION_COOKIE = 'admm_session';

/** Phases in which /readyz says ready: the parties' port listens and the job has not failed. */
const READY: ReadonlySet<Phase> = new Set(['waiting', 'setup', 'training', 'finishing', 'done']);

const require = createRequire(import.meta.url);

/** The page and what it loads, read once: path -> body and type. */
function assets(): Map<string, { body: Buffer; type: string }> {
  const own = (name: string) => new URL(`../../dashboard/${name}`, import.meta.url);
  const files: [string, URL | string, string][] = [
    ['/', own('index.html'), 'text/html; charset=utf-8'],
    ['/dashboard.js', own('dashboard.js'), 'text/javascript; charset=utf-8'],
    ['/dashboard.css', own('dashboard.css'), 'text/css; charset=utf-8'],
    ['/uPlot.min.js', require.resolve('uplot/dist/uPlot.iife.min.js'), 'text/javascript; charset=utf-8'],
    ['/uPlot.min.css', require.resolve('uplot/dist/uPlot.min.css'), 'text/css; charset=utf-8'],
  ];
  return new Map(files.map(([path, file, type]) => [path, { body: readFileSync(file), type }]));
}

/** No script or style from anywhere but this port, no frames, no form posts. */
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

export async function startStatusServer(cfg: HttpConfig, monitor: Monitor, log: Logger): Promise<StatusServer> {
  const files = assets();
  const bearer = bearerCheck(cfg.token);
  const tokenOk = tokenCheck(cfg.token);
  const session = cfg.token === undefined ? undefined : sessionValue(cfg.token);
  const sessionOk = tokenCheck(session);
  const warnings = new WarningLimiter(log);
  const pacer = new Pacer(API_REQUESTS_PER_SECOND, PACE_MAX_WAIT_MS);
  const authorized = (req: IncomingMessage) => bearer(req) || sessionOk(cookieValue(req.headers.cookie, SESSION_COOKIE));
  const events = new EventStream(monitor, cfg.eventStreamMs, (fields, msg) => warnings.warn('event stream dropped', log, fields, msg));

  // Every request here is a GET answered from memory: the parties' port's request timeout fits.
  const server = httpServer({
    requestTimeoutMs: HTTP_REQUEST_TIMEOUT_MS,
    maxConnections: MAX_HTTP_CONNECTIONS,
    refusal: `${MAX_HTTP_CONNECTIONS} connections are open; retry later`,
    onRefused: (remote) => warnings.warn('http connection refused', log, { remote, maxConnections: MAX_HTTP_CONNECTIONS }, 'HTTP connection over the cap refused'),
  }, (req, res) => {
    route(req, res).catch((err: unknown) => {
      // The path as logged everywhere: cut short, without its query (a ?token= is a secret).
      log.error({ path: loggedPath((req.url ?? '').split('?')[0]), err: (err as Error).message }, 'internal error answering an HTTP request');
      if (!res.headersSent) text(res, 500, 'internal error\n');
      else res.destroy();
    });
  });
  server.on('clientError', (_err, socket) => socket.destroy());

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A request target that is not a path (an absolute URL that does not parse) is the client's
    // error, answered 400 without a log line of its own: anyone can send these.
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://x');
    } catch {
      warnings.warn('bad request target', log, { path: loggedPath((req.url ?? '').split('?')[0]) }, 'HTTP request target that is not a URL');
      return text(res, 400, 'bad request target\n');
    }
    const path = url.pathname;
    if (req.method !== 'GET' && req.method !== 'HEAD') return text(res, 405, 'only GET\n', { allow: 'GET, HEAD' });
    if (path === '/healthz') return text(res, 200, 'ok');
    if (path === '/readyz') {
      const phase = monitor.phase();
      return READY.has(phase) ? text(res, 200, `ready: ${phase}\n`) : text(res, 503, `not ready: ${phase}\n`);
    }
    const given = url.searchParams.get('token');
    if (path === '/' && given !== null && session !== undefined) {
      // A browser cannot send a header with a page load or an EventSource: it gets a cookie instead.
      if (!tokenOk(given)) return text(res, 401, 'wrong token\n');
      res.writeHead(303, { location: '/', 'set-cookie': `${SESSION_COOKIE}=${session}; HttpOnly; SameSite=Strict; Path=/`, 'cache-control': 'no-store', ...PAGE_HEADERS });
      res.end();
      return;
    }
    if (!authorized(req)) return text(res, 401, 'missing or wrong bearer token (Authorization: Bearer TOKEN, the token of --http-token-file; a browser: open /?token=TOKEN once)\n', { 'www-authenticate': 'Bearer' });
    if (path === '/api/events') return events.add(req, res);
    try {
      await pacer.turn();
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      return text(res, err.status, `${err.message}\n`, { 'retry-after': String(err.retryAfterSeconds ?? 1) });
    }
    const asset = files.get(path);
    if (asset) {
      res.writeHead(200, { 'content-type': asset.type, 'content-length': asset.body.length, 'cache-control': 'no-cache', ...PAGE_HEADERS });
      res.end(req.method === 'HEAD' ? undefined : asset.body);
      return;
    }
    if (path === '/api/status') {
      const since = Number(url.searchParams.get('since') ?? 0);
      if (!Number.isInteger(since) || since < 0) return text(res, 400, 'since: a round number (integer >= 0)\n');
      const limit = Number(url.searchParams.get('limit') ?? STATUS_PAGE_ROUNDS);
      if (!Number.isInteger(limit) || limit < 1 || limit > STATUS_PAGE_ROUNDS) return text(res, 400, `limit: rounds in a page, 1 to ${STATUS_PAGE_ROUNDS}\n`);
      const page = monitor.roundsJson(since, limit);
      const status = JSON.stringify({ ...monitor.status(), more: page.more, nextSince: page.more ? page.last : null });
      return text(res, 200, `{"rounds":${page.json},${status.slice(1)}`, { 'content-type': 'application/json' });
    }
    if (path === '/metrics') {
      const body = await monitor.metrics.registry.metrics();
      return text(res, 200, body, { 'content-type': monitor.metrics.registry.contentType });
    }
    return text(res, 404, 'not found: GET /, /api/status, /api/events, /metrics, /healthz, /readyz\n');
  }

  const port = await listenHttp(server, cfg.host, cfg.port, '--http-port');
  if (cfg.token === undefined && !isLoopback(cfg.host)) log.warn({ httpHost: cfg.host }, 'no --http-token-file: anyone who can reach the HTTP port can watch the job');
  log.info({ httpHost: cfg.host, httpPort: port, token: cfg.token !== undefined }, 'http listening');
  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= (async () => {
        events.close();
        await closeHttp(server);
      })()),
  };
}

/** An event-stream client: when it connected and since when its output has waited unsent. */
interface EventClient {
  res: ServerResponse;
  openedAt: number;
  stalledSince?: number;
}

/**
 * The clients of /api/events. One timer for all of them, running only while there are
 * clients: every EVENT_INTERVAL_MS it sends the rounds since the last tick and, when it
 * changed (or every STATE_REFRESH_MS), the status. A client drops the rounds it already has.
 * A client that leaves more than EVENT_UNSENT_BYTES unsent, or any for EVENT_STALL_MS, is
 * dropped; every stream ends after `maxAgeMs` (a never-reading client would otherwise hold its
 * slot while the kernel's buffers absorb what it does not read).
 */
class EventStream {
  private readonly clients = new Set<EventClient>();
  private timer: NodeJS.Timeout | undefined;
  private sentRound = 0;
  private sentState = '';
  private sentAt = 0;
  private pingAt = 0;

  constructor(
    private readonly monitor: Monitor,
    private readonly maxAgeMs: number,
    private readonly dropped: (fields: object, msg: string) => void,
  ) {}

  add(req: IncomingMessage, res: ServerResponse): void {
    if (this.clients.size >= MAX_EVENT_CLIENTS) return text(res, 503, `${MAX_EVENT_CLIENTS} event streams are open; close one\n`, { 'retry-after': '5' });
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no', 'x-content-type-options': 'nosniff' });
    if (req.method === 'HEAD') return void res.end();
    res.socket?.setTimeout(0);
    res.socket?.setNoDelay(true);
    const every = Math.max(1, Math.ceil(this.monitor.roundsAfter(0) / SNAPSHOT_POINTS));
    const curve = this.monitor.roundsJson(0, SNAPSHOT_POINTS, every);
    res.write(`retry: 2000\n\n${rawEvent('snapshot', `{"rounds":${curve.json},${JSON.stringify(this.monitor.status()).slice(1)}`)}`);
    const client: EventClient = { res, openedAt: performance.now() };
    this.clients.add(client);
    res.on('close', () => {
      this.clients.delete(client);
      if (this.clients.size === 0) this.stop();
    });
    if (!this.timer) {
      this.sentRound = this.monitor.lastRound;
      this.timer = setInterval(() => this.tick(false), EVENT_INTERVAL_MS);
      this.timer.unref();
    }
  }

  private tick(last: boolean): void {
    if (this.clients.size === 0) return;
    let out = '';
    const rounds = this.monitor.roundsJson(this.sentRound, Number.MAX_SAFE_INTEGER);
    if (rounds.count > 0) {
      out += rawEvent('rounds', rounds.json);
      this.sentRound = rounds.last;
    }
    const status = this.monitor.status();
    // The clocks alone (the job's, the alignment's) are not a change: they are sent every STATE_REFRESH_MS.
    const a = status.alignment;
    const state = JSON.stringify({ ...status, elapsedSeconds: 0, alignment: { ...a, seconds: 0, steps: a.steps.map((x) => ({ ...x, seconds: 0, etaSeconds: null })) } });
    const now = performance.now();
    if (last || state !== this.sentState || now - this.sentAt >= STATE_REFRESH_MS) {
      out += event('state', status);
      this.sentState = state;
      this.sentAt = now;
    }
    if (!out && now - this.pingAt >= KEEPALIVE_MS) out = ': keep-alive\n\n';
    if (out) this.pingAt = now;
    for (const c of this.clients) {
      if (out) c.res.write(out);
      if (!last) this.check(c, now);
    }
  }

  /** Drop a client that does not read; end a stream that has lasted its time. */
  private check(c: EventClient, now: number): void {
    const unsent = c.res.writableLength;
    c.stalledSince = unsent > 0 ? (c.stalledSince ?? now) : undefined;
    const stalled = c.stalledSince !== undefined && now - c.stalledSince >= EVENT_STALL_MS;
    if (unsent > EVENT_UNSENT_BYTES || stalled) {
      this.dropped({ unsent, stalledMs: c.stalledSince === undefined ? 0 : Math.round(now - c.stalledSince) }, 'event-stream client not reading; dropped');
      c.res.destroy();
    } else if (now - c.openedAt >= this.maxAgeMs) {
      // Ended with output still unsent, a stream would hold its slot until that is read: cut it.
      if (unsent > 0) c.res.destroy();
      else c.res.end();
    }
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.sentState = '';
  }

  /** The last state to every client, then the streams end. */
  close(): void {
    this.tick(true);
    for (const c of this.clients) c.res.end();
    this.clients.clear();
    this.stop();
  }
}

/** An event whose data is JSON already. */
function rawEvent(name: string, json: string): string {
  return `event: ${name}\ndata: ${json}\n\n`;
}

function event(name: string, data: unknown): string {
  return rawEvent(name, JSON.stringify(data));
}

function text(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/** The cookie's value: a digest of the token under a fixed label, so the cookie never holds the token itself. */
function sessionValue(token: string): string {
  return createHash('sha256').update(`admm-share dashboard session\0${token}`).digest('hex');
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
