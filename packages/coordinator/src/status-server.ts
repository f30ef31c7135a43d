/**
 * The job's HTTP port for people and monitoring (--http-port), separate from the parties'
 * WebSocket port:
 *   GET /healthz   200 "ok" while the process is up (liveness)
 *   GET /readyz    200 once the parties' port listens and while the job has not failed, else 503;
 *                  the body names the phase
 * Both answer without the bearer token: they say no more than whether the process is up and
 * which phase the job is in, and probes (docker compose, Kubernetes) rarely carry a secret.
 * Every other path needs the token when --http-token-file is given. It binds to 127.0.0.1
 * unless --http-host says otherwise.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { HttpConfig, Phase } from './config.js';
import { bearerCheck, closeHttp, httpServer, listenHttp } from './http.js';

/** What the status port reads of the job, when asked. */
export interface StatusSource {
  phase(): Phase;
}

export interface StatusServer {
  port: number;
  close(): Promise<void>;
}

/** Ms for a whole request: every request here is a GET answered from memory. */
const REQUEST_TIMEOUT_MS = 10_000;

/** Phases in which /readyz says ready: the parties' port listens and the job has not failed. */
const READY: ReadonlySet<Phase> = new Set(['waiting', 'setup', 'training', 'finishing', 'done']);

export async function startStatusServer(cfg: HttpConfig, source: StatusSource, log: Logger): Promise<StatusServer> {
  const authorized = bearerCheck(cfg.token);
  const server = httpServer({ requestTimeoutMs: REQUEST_TIMEOUT_MS }, (req, res) => {
    try {
      route(req, res);
    } catch (err) {
      log.error({ path: req.url, err: (err as Error).message }, 'internal error answering an HTTP request');
      if (!res.headersSent) text(res, 500, 'internal error\n');
      else res.destroy();
    }
  });
  server.on('clientError', (_err, socket) => socket.destroy());

  function route(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (req.method !== 'GET' && req.method !== 'HEAD') return text(res, 405, 'only GET\n', { allow: 'GET, HEAD' });
    if (path === '/healthz') return text(res, 200, 'ok');
    if (path === '/readyz') {
      const phase = source.phase();
      return READY.has(phase) ? text(res, 200, `ready: ${phase}\n`) : text(res, 503, `not ready: ${phase}\n`);
    }
    if (!authorized(req)) return text(res, 401, 'missing or wrong bearer token (Authorization: Bearer TOKEN, the token of --http-token-file)\n', { 'www-authenticate': 'Bearer' });
    return text(res, 404, 'not found: GET /healthz, /readyz\n');
  }

  const port = await listenHttp(server, cfg.host, cfg.port, '--http-port');
  if (cfg.token === undefined && !isLoopback(cfg.host)) log.warn({ httpHost: cfg.host }, 'no --http-token-file: anyone who can reach the HTTP port can watch the job');
  log.info({ httpHost: cfg.host, httpPort: port, token: cfg.token !== undefined }, 'http listening');
  return { port, close: () => closeHttp(server) };
}

function text(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}
