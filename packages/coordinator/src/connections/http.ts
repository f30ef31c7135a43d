/**
 * What the coordinator's two HTTP endpoints share (online scoring, serve.ts, and the job's
 * status port, status-server.ts): the bearer token check, the timeouts of a plain HTTP server,
 * and listening with an error that names the flag. The parties' WebSocket port is separate
 * (server.ts): nothing on it answers HTTP.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { type IncomingMessage, type RequestListener, type Server, createServer } from 'node:http';
import { httpTimeouts } from './server.js';
import { ConfigError } from '@admm-share/core';

/**
 * Shortest secret accepted in --credentials and --http-token-file: 16 characters, 64 bits even
 * as hex, beyond an online guess within --hello-timeout per connection and
 * MAX_PENDING_CONNECTIONS at once (and far beyond what an HTTP client can try).
 */
export const MIN_SECRET_CHARS = 16;

/**
 * A check of a given token against `token` (none: everything passes). Both sides are hashed
 * first, so timingSafeEqual compares equal lengths and the time taken says nothing about the
 * token, not even its length.
 */
export function tokenCheck(token: string | undefined): (given: string | undefined) => boolean {
  if (token === undefined) return () => true;
  const expected = createHash('sha256').update(token).digest();
  return (given) => given !== undefined && timingSafeEqual(createHash('sha256').update(given).digest(), expected);
}

/** A check of `Authorization: Bearer TOKEN` against `token` (none: every request passes). */
export function bearerCheck(token: string | undefined): (req: IncomingMessage) => boolean {
  const check = tokenCheck(token);
  return (req) => check(/^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]);
}

/** An HTTP server that cuts off a client slow to send its request (Node's defaults allow 60 s for the headers, 300 s for the request; server.ts names ours). */
export function httpServer(opts: { requestTimeoutMs: number }, listener: RequestListener): Server {
  return createServer(httpTimeouts(opts.requestTimeoutMs), listener);
}

/** Listen on host:port (0: a free one) and return the port; failing to is a ConfigError naming `flag`. */
export function listenHttp(server: Server, host: string, port: number, flag: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => reject(new ConfigError(`${flag} ${port}: cannot listen on ${host} (${err.code ?? err.message})`));
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as { port: number }).port);
    });
  });
}

/** Close a server now: open connections (keep-alive, event streams) are cut, not waited for. */
export function closeHttp(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
