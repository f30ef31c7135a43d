/**
 * Online scoring (admm-coordinator serve): the parties stay connected with their model files,
 * and each `POST /score` with {"ids": [...]} is answered with the model's scores. Per request
 * and party: the ids, hashed and blinded with the coordinator's key, go out in a `lookup`; the
 * party blinds them again (`found`); the coordinator finds them among the party's own points
 * (sent once per connection, in answer to an empty `psi`), asks the rows it holds to be scored
 * (`score`, `partial`) and combines the parts as training did. A party that is not connected
 * makes a request fail at once (503); one that does not answer in --request-timeout, after it
 * (504). A party that comes back (reconnects, or is restarted) is used again once its ids are
 * intersected. HTTP: a bearer token (--http-token-file), caps on open connections and on
 * requests in flight applied before a body is read (http-limits.ts), a body size limit, a cap
 * on the ids per request and on the ids per token and minute. Every request whose ids went to
 * the parties is logged with their count; those refused before (401, 400, 429, ...) are
 * logged through the warning limiter, the suppressed ones counted with their ids.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { DataError, PeerError, requestIdsProblem } from '@admm-share/core';
import { POINT_BYTES, encode } from '@admm-share/protocol';
import type { PartyIndex } from '../alignment/psi.js';
import { type PartyConnection, LookupRefused } from '../connections/party-connection.js';
import { type ScoringNetConfig, ScoringNet, planRows, probability, spreadParts } from './predict.js';
import { combineScores } from '../output/job-file.js';
import { bearerCheck, closeHttp, httpServer, listenHttp } from '../connections/http.js';
import { HttpError, IdBudget, loggedPath, readBody } from '../connections/http-limits.js';
import { HTTP_REQUEST_TIMEOUT_MS } from '../connections/server.js';
import { WarningLimiter } from '../connections/warnings.js';

export interface ServeConfig extends ScoringNetConfig {
  httpHost: string;
  httpPort: number;
  /** Required `Authorization: Bearer <token>` (from --http-token-file); none: anyone who can reach the port may score. */
  httpToken?: string;
  maxRequestIds: number;
  maxBodyBytes: number;
  /** Requests in flight (from their headers on: a body is read only within this cap); more get 429. */
  maxConcurrent: number;
  /** Open HTTP connections; more get 503 and are closed. */
  maxConnections: number;
  /** Ids sent to the parties per token and minute (a bucket of that size); more get 429. */
  maxIdsPerMinute: number;
}

export interface ServeHandle {
  port: number;
  httpPort: number;
  done: Promise<void>;
  close(): Promise<void>;
}

/** Longest id accepted in a request. */
const MAX_ID_CHARS = 256;

export async function serve(cfg: ServeConfig, log: Logger): Promise<ServeHandle> {
  /** Each party's ids (H(id)^(ab) -> position) on its current connection. */
  const indexes = new Map<string, { generation: number; index: PartyIndex }>();
  let resolveDone!: () => void;
  const done = new Promise<void>((res) => (resolveDone = res));
  const net = new ScoringNet(cfg, log, [], {
    onIndex: (p, index) => {
      indexes.set(p.id, { generation: p.generation, index });
      log.info({ party: p.id, rows: index.size }, 'party ready to score');
    },
    // A party at fault is closed (and may come back); the service goes on.
    onFailure: (err) => log.warn({ err: err.message }, 'party failure'),
  });
  const d = net.description;
  const names = net.parties.list.map((p) => p.id);
  /** Requests to one party run one after the other (a connection has one request outstanding). */
  const queues = new Map<string, Promise<unknown>>();
  const queued = <T>(p: PartyConnection, work: () => Promise<T>): Promise<T> => {
    const next = (queues.get(p.id) ?? Promise.resolve()).then(work, work);
    queues.set(p.id, next.catch(() => undefined));
    return next;
  };
  const ready = (p: PartyConnection) => p.connected && indexes.get(p.id)?.generation === p.generation;
  const indexOf = (p: PartyConnection) => {
    const entry = indexes.get(p.id);
    if (!p.connected || entry?.generation !== p.generation) throw new HttpError(503, `party ${p.id} is not connected (a party reconnects by itself; retry later)`);
    return entry.index;
  };

  /** One party's part of a request: its positions of the ids (-1: not held) and its scores of the rows it holds. */
  const partOf = (p: PartyConnection, lookup: ReturnType<typeof net.psi.lookups>) =>
    queued(p, async () => {
      const index = indexOf(p);
      const jobId = cfg.jobId;
      try {
        // Ids whose points the PSI cache holds are not asked for again.
        const ask = async (points: Uint8Array) => (await p.request(encode({ type: 'lookup', jobId, points }), ['found'], { jobId, lookupIds: points.length / POINT_BYTES })).points;
        const positions = await lookup(p.id, index, ask);
        const held = Uint32Array.from(positions.filter((v) => v >= 0));
        return { positions, ...(await net.score(p, held)) };
      } catch (err) {
        // A party over its caps refuses this request (429: its budget is of ids a day); one that
        // breaks the protocol is closed by its connection, which fails the request.
        if (err instanceof LookupRefused) throw new HttpError(429, err.message);
        if (err instanceof PeerError) throw new HttpError(p.connected ? 504 : 503, err.message);
        throw err;
      }
    });

  /** `charge` takes the ids from the token's budget once every party is there to be asked. */
  const scoreIds = async (ids: string[], charge: () => void) => {
    for (const p of net.parties.list) indexOf(p);
    charge();
    const lookup = net.psi.lookups(ids);
    const parts = await Promise.all(net.parties.list.map((p) => partOf(p, lookup)));
    const positions = parts.map((r) => r.positions);
    let lacking: string[][];
    try {
      lacking = planRows(names, positions, ids, cfg.missing, 'the request').lacking;
    } catch (err) {
      if (err instanceof DataError) throw new HttpError(422, err.message.replace(/^the request: /, ''));
      throw err;
    }
    const scores = combineScores(d, spreadParts(names, positions, parts.map((r) => r.scores)), ids.length);
    return {
      jobId: cfg.jobId,
      modelJob: d.jobId,
      positiveClass: d.labels?.positive ?? null,
      results: ids.map((id, i) => ({ id, score: scores[i], probability: d.labels ? probability(scores[i]) : null, missing: lacking[i] })),
      epsilonSpent: Object.fromEntries(names.map((party, m) => [party, parts[m].epsilonSpent])),
    };
  };

  let inFlight = 0;
  let requests = 0;
  const authorized = bearerCheck(cfg.httpToken);
  const budget = new IdBudget(cfg.maxIdsPerMinute);
  const warnings = new WarningLimiter(log);
  const http = httpServer({
    requestTimeoutMs: Math.max(HTTP_REQUEST_TIMEOUT_MS, 2 * cfg.requestTimeoutMs),
    maxConnections: cfg.maxConnections,
    refusal: `${cfg.maxConnections} connections are open (--max-connections); retry later`,
    onRefused: (remote) => warnings.warn('http connection refused', log, { remote, maxConnections: cfg.maxConnections }, 'HTTP connection over --max-connections refused'),
  }, (req, res) => {
    const id = ++requests;
    const t0 = performance.now();
    /** The ids the request carries (0 until its body is read), and whether they went to the parties. */
    let ids = 0;
    let charged = false;
    const answer = (status: number, body: object, retryAfterSeconds?: number) => {
      const text = JSON.stringify(body);
      const retry = retryAfterSeconds ?? (status === 429 || status === 503 ? 1 : undefined);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...(retry !== undefined ? { 'retry-after': String(retry) } : {}) });
      res.end(text);
      const ms = Math.round((performance.now() - t0) * 10) / 10;
      const fields = { request: id, method: req.method, path: loggedPath(req.url), status, ms, ids };
      if (req.url === '/healthz') log.debug(fields, 'health check');
      else if (status === 200) log.info(fields, 'score request');
      else if (charged) log.warn(fields, 'score request');
      // Refused before any id reached a party: anyone can send these as fast as they like.
      else warnings.warn(`score request ${status}`, log, fields, 'score request', { ids });
    };
    if (req.url === '/healthz' && req.method === 'GET') {
      // Liveness for anyone; the model's job and the parties' ids only with the token.
      if (!authorized(req)) return answer(200, { status: 'ok' });
      return answer(200, { status: 'ok', modelJob: d.jobId, parties: Object.fromEntries(net.parties.list.map((p) => [p.id, ready(p) ? 'ready' : p.connected ? 'joining' : 'away'])) });
    }
    let slot = false;
    handle(req, () => (slot = true), (n) => (ids = n))
      .then(async (given) => answer(200, await scoreIds(given, () => chargeIds(req, given.length, () => (charged = true)))))
      .catch((err: unknown) => {
        if (err instanceof HttpError) answer(err.status, { error: err.message }, err.retryAfterSeconds);
        else {
          log.error({ request: id, err: (err as Error).message }, 'internal error scoring a request');
          answer(500, { error: 'internal error' });
        }
      })
      .finally(() => {
        if (slot) inFlight--;
      });
  });

  /** Take a request's ids from its token's budget, or refuse it (429) saying when to retry. */
  function chargeIds(req: IncomingMessage, n: number, charged: () => void): void {
    const taken = budget.take(cfg.httpToken === undefined ? '' : (req.headers.authorization ?? ''), n);
    if (!taken.ok) throw new HttpError(429, `more than --max-ids-per-minute ${cfg.maxIdsPerMinute} ids; retry in ${taken.retryAfterSeconds} s`, taken.retryAfterSeconds);
    charged();
  }

  /**
   * Method, path, token, a slot among the requests in flight (before the body is read), size
   * and shape of a request: its ids, or a HttpError. `counted` hears how many ids it holds.
   */
  async function handle(req: IncomingMessage, slotTaken: () => void, counted: (n: number) => void): Promise<string[]> {
    if (req.url !== '/score') throw new HttpError(404, 'not found: POST /score with {"ids": [...]}');
    if (req.method !== 'POST') throw new HttpError(405, 'use POST /score');
    if (!authorized(req)) throw new HttpError(401, 'missing or wrong bearer token');
    if (inFlight >= cfg.maxConcurrent) throw new HttpError(429, `${cfg.maxConcurrent} requests are in flight (--max-concurrent); retry later`);
    inFlight++;
    slotTaken();
    const raw = await readBody(req, cfg.maxBodyBytes, '--max-body-bytes');
    // Not decoded with U+FFFD for a bad byte: "a\xff" would then be scored as the id "a\uFFFD".
    if (!isUtf8(raw)) throw new HttpError(400, 'the body is not UTF-8');
    const body = raw.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new HttpError(400, 'the body is not JSON');
    }
    const ids = (parsed as { ids?: unknown })?.ids;
    if (Array.isArray(ids)) counted(ids.length);
    if (!Array.isArray(ids) || ids.length === 0) throw new HttpError(400, 'expected {"ids": ["id", ...]} with at least one id');
    const most = Math.min(cfg.maxRequestIds, cfg.maxIdsPerMinute);
    if (ids.length > most) throw new HttpError(413, `${ids.length} ids, more than ${most === cfg.maxRequestIds ? '--max-request-ids' : '--max-ids-per-minute'} ${most}`);
    if (ids.some((v) => typeof v !== 'string' || v.length === 0 || v.length > MAX_ID_CHARS)) throw new HttpError(400, `every id must be a non-empty string of at most ${MAX_ID_CHARS} characters`);
    const bad = requestIdsProblem(ids as string[]);
    if (bad !== undefined) throw new HttpError(400, bad);
    return ids as string[];
  }

  const port = await net.listen(0);
  const httpPort = await listenHttp(http, cfg.httpHost, cfg.httpPort, '--http-port');
  if (cfg.httpToken === undefined) log.warn('no --http-token-file: anyone who can reach the HTTP port can score');
  log.info({ httpHost: cfg.httpHost, httpPort, modelJob: d.jobId }, 'serving POST /score');
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await closeHttp(http);
    warnings.flush();
    await net.close('the coordinator stopped serving');
    resolveDone();
  };
  return { port, httpPort, done, close };
}
