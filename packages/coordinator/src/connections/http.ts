/**
 * What the coordinator's two HTTP endpoints share (online scoring, serve.ts, and the job's
 * status port, status-server.ts): the bearer token (required off loopback; read by runtime's
 * readTokenFile) and its check, the timeouts of a plain HTTP server and the cap on its
 * open connections, and listening with an error that names the flag. The parties' WebSocket
 * port is separate (server.ts): nothing on it answers HTTP.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { type IncomingMessage, type RequestListener, type Server, createServer } from 'node:http';
import { type Server as NetServer, type Socket, createServer as createNetServer } from 'node:net';
import { httpTimeouts } from './server.js';
import { ConfigError } from '@admm-share/core';

/** Whether `host` is a loopback address (only this machine can connect). */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^(::ffff:)?127\./.test(host);
}

/**
 * An HTTP port off loopback needs a token: without one, anyone on the network could use it
 * (on serve: test which ids the parties hold). `--insecure-no-token` accepts that.
 */
export function requireTokenOffLoopback(host: string, token: string | undefined, insecure: boolean): void {
  if (token === undefined && !insecure && !isLoopback(host))
    throw new ConfigError(`--http-host ${host} without --http-token-file: anyone who can reach ${host} could use the HTTP port; give --http-token-file FILE (or --insecure-no-token to accept this)`);
}

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

/**
 * Ms an over-cap connection is kept after its 503 before it is closed: long enough for the
 * answer to reach the client before a close that could reset it, short enough that a flood
 * of connections holds few sockets.
 */
export const OVER_CAP_LINGER_MS = 1_000;

export interface HttpServerOptions {
  requestTimeoutMs: number;
  /** Open connections; more are answered 503 (with `refusal`) and closed, nothing read from them. */
  maxConnections: number;
  refusal: string;
  /** An over-cap connection was refused. */
  onRefused(remote: string): void;
}

/**
 * The listening socket in front of each HTTP server: it counts connections and hands the HTTP
 * parser only those under the cap, so that an over-cap connection costs a socket for
 * OVER_CAP_LINGER_MS and not a byte of what it sends.
 */
const fronts = new WeakMap<Server, { net: NetServer; refused: Set<Socket> }>();

/**
 * An HTTP server that cuts off a client slow to send its request (Node's defaults allow 60 s
 * for the headers, 300 s for the request; server.ts names ours) and caps its open connections.
 */
export function httpServer(opts: HttpServerOptions, listener: RequestListener): Server {
  const server = createServer(httpTimeouts(opts.requestTimeoutMs), listener);
  const refused = new Set<Socket>();
  const body = `${opts.refusal}\n`;
  const answer = `HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n${body}`;
  let open = 0;
  const net = createNetServer({ pauseOnConnect: true }, (socket) => {
    socket.on('error', () => {});
    if (open >= opts.maxConnections) {
      // Answered and never read: what the client sends stays in the kernel until the close.
      refused.add(socket);
      socket.end(answer);
      const timer = setTimeout(() => socket.destroy(), OVER_CAP_LINGER_MS);
      timer.unref();
      socket.once('close', () => (clearTimeout(timer), refused.delete(socket)));
      opts.onRefused(socket.remoteAddress ?? '?');
      return;
    }
    open++;
    socket.once('close', () => open--);
    server.emit('connection', socket);
    socket.resume();
  });
  // The HTTP server tracks its connections' timeouts from its 'listening' on.
  net.on('listening', () => server.emit('listening'));
  fronts.set(server, { net, refused });
  return server;
}

function frontOf(server: Server) {
  const front = fronts.get(server);
  if (!front) throw new Error('not a server of httpServer()');
  return front;
}

/** Listen on host:port (0: a free one) and return the port; failing to is a ConfigError naming `flag`. */
export function listenHttp(server: Server, host: string, port: number, flag: string): Promise<number> {
  const { net } = frontOf(server);
  return new Promise<number>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => reject(new ConfigError(`${flag} ${port}: cannot listen on ${host} (${err.code ?? err.message})`));
    net.once('error', onError);
    net.listen(port, host, () => {
      net.off('error', onError);
      resolve((net.address() as { port: number }).port);
    });
  });
}

/** Close a server now: open connections (keep-alive, event streams) are cut, not waited for. */
export function closeHttp(server: Server): Promise<void> {
  const { net, refused } = frontOf(server);
  return new Promise((resolve) => {
    if (!net.listening) return resolve();
    net.close(() => resolve());
    server.close();
    server.closeAllConnections();
    for (const socket of refused) socket.destroy();
  });
}
