// The fault tests' relay (faults-*.test.ts). Like gate.ts it sits between the parties and the
// coordinator, passes their bytes, and runs a hook synchronously before a chosen message from
// the coordinator is forwarded, so a fault lands at a known point of the job (the intersection's
// first `psi`, a round). It also stands in for a network that fails, which the kernel here cannot
// (no netem):
//   an outage (100 % packet loss): nothing passes either way and a connection opened meanwhile
//     gets no answer; once it ends, what was sent arrives (TCP retransmits it), and a side that
//     closed meanwhile is seen closed by the other only then (its close frame never arrived:
//     1006 there);
//   a handshake that hangs: the connection is accepted and nothing is ever answered.
import { type Server, type Socket, createConnection, createServer } from 'node:net';
import { decode } from '@admm-share/protocol';
import { FrameStream, seenMessage } from './ws-frames.js';

/** What the relay saw of one message from the coordinator. */
export interface Seen {
  /** Connection number, from 1 (a party that reconnects gets a new one). */
  conn: number;
  /** The party on that connection (from its hello). */
  party: string | undefined;
  type: string;
  round?: number;
}

export interface FaultRelay {
  /** The port parties connect to. */
  port: number;
  /** Run `fn` once, synchronously, before the first message from the coordinator that matches `pred` is forwarded. */
  before(pred: (m: Seen) => boolean, fn: () => void): void;
  /** Nothing passes from now until `restore`. */
  outage(): void;
  restore(): void;
  /** The next `n` connections are accepted and never answered. */
  hang(n: number): void;
  /** Destroy every connection open now (each side sees it dropped). */
  cutAll(): void;
  /** Connections accepted so far, and those of them left hanging. */
  counts(): { accepted: number; hung: number };
  close(): Promise<void>;
}

interface Link {
  conn: number;
  party: string | undefined;
  client: Socket;
  upstream: Socket | undefined;
  /** Bytes held back by an outage, each way. */
  toClient: Buffer[];
  toUpstream: Buffer[];
  clientClosed: boolean;
  upstreamClosed: boolean;
}

export async function faultRelay(target: number): Promise<FaultRelay> {
  const hooks: { pred: (m: Seen) => boolean; fn: () => void }[] = [];
  const links = new Set<Link>();
  const sockets = new Set<Socket>();
  let down = false;
  let hangNext = 0;
  let accepted = 0;
  let hung = 0;
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  };
  const connectUpstream = (link: Link, conn: number) => {
    const upstream = createConnection({ port: target, host: '127.0.0.1' });
    link.upstream = upstream;
    track(upstream);
    const frames = new FrameStream(
      (bytes) => (down ? link.toClient.push(bytes) : link.client.write(bytes)),
      (payload) => {
        const message = seenMessage(payload);
        if (!message) return true;
        const seen: Seen = { conn, party: link.party, ...message };
        const hook = hooks.find((h) => h.pred(seen));
        if (hook) {
          hooks.splice(hooks.indexOf(hook), 1);
          hook.fn();
        }
        return true;
      },
    );
    upstream.on('data', (d: Buffer) => frames.push(d));
    upstream.on('close', () => {
      link.upstreamClosed = true;
      if (!down) link.client.destroy();
    });
    for (const b of link.toUpstream.splice(0)) upstream.write(b);
  };
  const server: Server = createServer((client) => {
    accepted++;
    track(client);
    if (hangNext > 0) {
      hangNext--;
      hung++;
      client.on('data', () => undefined);
      return;
    }
    const link: Link = { conn: accepted, party: undefined, client, upstream: undefined, toClient: [], toUpstream: [], clientClosed: false, upstreamClosed: false };
    links.add(link);
    // The party's frames are read up to its hello, for its id.
    const up = new FrameStream(
      (bytes) => (down || !link.upstream ? link.toUpstream.push(bytes) : link.upstream.write(bytes)),
      (payload) => {
        if (link.party !== undefined) return true;
        try {
          const m = decode(payload) as { type?: unknown; partyId?: unknown };
          if (m.type === 'hello' && typeof m.partyId === 'string') link.party = m.partyId;
        } catch {
          // not a message: passed on as it is
        }
        return true;
      },
    );
    client.on('data', (d: Buffer) => up.push(d));
    client.on('close', () => {
      link.clientClosed = true;
      if (!down) {
        link.upstream?.destroy();
        links.delete(link);
      }
    });
    if (!down) connectUpstream(link, link.conn);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    before: (pred, fn) => void hooks.push({ pred, fn }),
    outage: () => void (down = true),
    restore: () => {
      down = false;
      for (const link of links) {
        if (link.clientClosed) {
          link.upstream?.destroy();
          links.delete(link);
        } else if (!link.upstream) connectUpstream(link, link.conn);
        else {
          for (const b of link.toUpstream.splice(0)) link.upstream.write(b);
          for (const b of link.toClient.splice(0)) link.client.write(b);
          if (link.upstreamClosed) link.client.destroy();
        }
      }
    },
    hang: (n) => void (hangNext += n),
    cutAll: () => {
      for (const link of links) {
        link.client.destroy();
        link.upstream?.destroy();
      }
    },
    counts: () => ({ accepted, hung }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A predicate true for the coordinator's first `psi` to the `n`-th party to get one: with n parties, every one is in the intersection. */
export function psiReaching(n: number): (m: Seen) => boolean {
  const parties = new Set<string | undefined>();
  return (m) => {
    if (m.type !== 'psi') return false;
    parties.add(m.party);
    return parties.size >= n;
  };
}
