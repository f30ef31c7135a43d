/**
 * The network edge: the http(s) server, the WebSocketServer on it (always with an explicit
 * maxPayload), listening, and shutting both down. Plain HTTP requests get a short 426 answer;
 * a client that is slow to send its request or its TLS handshake is cut off after a few
 * seconds. What a WebSocket connection may do is decided elsewhere (admission.ts); this file
 * only hands every new socket over.
 */
import { type Server as HttpServer, type ServerOptions as HttpServerOptions, createServer as createHttpServer } from 'node:http';
import { type Server as HttpsServer, createServer as createHttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { ConfigError } from '@admm-share/core';
import type { WarningLimiter } from './warnings.js';

/**
 * Ms a client has to send its request headers. A WebSocket upgrade is one short request sent
 * at once; Node's default (60 s) lets a slow client hold a socket and its half-read headers
 * for a minute.
 */
export const HTTP_HEADERS_TIMEOUT_MS = 5_000;
/**
 * Ms for a whole HTTP request (Node's default: 300 s). An upgraded connection is no longer an
 * HTTP request and is not affected.
 */
export const HTTP_REQUEST_TIMEOUT_MS = 10_000;
/** How often Node checks the two timeouts above; its default (30 s) would stretch them by that much. */
export const HTTP_TIMEOUT_CHECK_MS = 1_000;
/** Ms for a TLS handshake (Node's default: 120 s). */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
/** Node's HTTP timeouts as this project sets them on every server it runs (the parties' port, the job's HTTP port, scoring). */
export function httpTimeouts(requestTimeoutMs = HTTP_REQUEST_TIMEOUT_MS): HttpServerOptions {
  return { headersTimeout: HTTP_HEADERS_TIMEOUT_MS, requestTimeout: requestTimeoutMs, connectionsCheckingInterval: HTTP_TIMEOUT_CHECK_MS };
}

/** The answer to a request that is not a WebSocket upgrade. */
const NOT_A_WEBSOCKET = 'admm-share coordinator: parties connect over WebSocket (admm-party --coordinator ws://...)\n';

/** Serve wss:// (https://) with this certificate and key (PEM); with clientCa, require client certificates from that CA. */
export interface ServerTls {
  cert: string;
  key: string;
  clientCa?: string;
}

export interface ServerOptions {
  host: string;
  port: number;
  tls?: ServerTls;
  /** The largest frame any peer may send. Never the ws default of 100 MiB. */
  maxPayload: number;
  log: Logger;
  warnings: WarningLimiter;
  /** A new WebSocket, with the raw socket under it (admission counts the bytes on it). */
  onConnection(ws: WebSocket, socket: Duplex, remote: string): void;
  /** A server error after listening (before, listen() rejects). */
  onError(err: Error): void;
}

export interface Server {
  port: number;
  close(): Promise<void>;
}

export function listen(opts: ServerOptions): Promise<Server> {
  const { tls, log, warnings } = opts;
  const http = httpTimeouts();
  const server: HttpServer | HttpsServer = tls
    ? createHttpsServer({
        ...http,
        handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
        cert: tls.cert,
        key: tls.key,
        // Mutual TLS: only clients with a certificate from this CA get through the handshake.
        ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
      })
    : createHttpServer(http);
  // ws only listens for upgrades: without this a plain request would hang until it timed out.
  server.on('request', (_req, res) => {
    res.writeHead(426, { 'Content-Type': 'text/plain; charset=utf-8', Upgrade: 'websocket', Connection: 'close' });
    res.end(NOT_A_WEBSOCKET);
  });
  const wss = new WebSocketServer({ server, maxPayload: opts.maxPayload, perMessageDeflate: false });
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= new Promise((resolve) => {
      for (const ws of wss.clients) ws.terminate();
      warnings.flush();
      wss.close(() => server.close(() => resolve()));
    }));
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => {
      const hint = (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? '; choose another --port (--port 0 picks a free one)' : '';
      if (!server.listening) reject(new ConfigError(`cannot listen on ${opts.host}:${opts.port}: ${err.message}${hint}`));
      else opts.onError(err);
    };
    server.on('error', onError);
    wss.on('error', onError);
    server.on('tlsClientError', (err: Error) => warnings.warn('TLS handshake failed', log, { err: err.message }, 'TLS handshake failed'));
    wss.on('connection', (ws, req) => opts.onConnection(ws, req.socket, req.socket.remoteAddress ?? '?'));
    server.on('listening', () => {
      const addr = server.address();
      resolve({ port: typeof addr === 'object' && addr ? addr.port : opts.port, close });
    });
    server.listen(opts.port, opts.host);
  });
}
