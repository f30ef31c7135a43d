// A relay that puts faults at a known point of a job instead of at a moment in time. It sits
// between one or more parties and the coordinator, passes the parties' bytes through, and
// reads the WebSocket frames the coordinator sends (server frames are unmasked, and neither
// side negotiates compression, so each frame is a whole MessagePack document). Before the
// bytes that complete a matching message are forwarded it runs a hook synchronously: a party
// killed or frozen there has certainly not answered that message, and a coordinator killed
// there has certainly not finished the job, however loaded the machine is.
// The frames are split by ws-frames.ts, which restart-race.test.ts's relay also uses (it
// decodes the parties' frames too).
import { type Server, type Socket, createConnection, createServer } from 'node:net';
import { FrameStream, seenMessage } from './ws-frames.js';

/** What the relay saw of one message from the coordinator. */
export interface Down {
  /** Connection number, from 1 (a party that reconnects gets a new one). */
  conn: number;
  type: string;
  round?: number;
}

/** What a hook asks for: `'drop'` leaves the message out of the stream (frames are independent). */
export type HookResult = 'drop' | void;

export interface Gate {
  /** The port parties connect to. */
  port: number;
  /** The coordinator's port (may be changed, e.g. for a coordinator started again elsewhere). */
  target: number;
  /** Run `fn` once, synchronously, before the first message from the coordinator that matches `pred` is forwarded. */
  before(pred: (m: Down) => boolean, fn: (m: Down) => HookResult): void;
  /** Destroy connection `conn` on both sides (the party sees a dropped connection). */
  cut(conn: number): void;
  /** From now on, drop what the party sends on connection `conn` (its answers never reach the coordinator). */
  mute(conn: number): void;
  close(): Promise<void>;
}

export async function gate(target: number): Promise<Gate> {
  const hooks: { pred: (m: Down) => boolean; fn: (m: Down) => HookResult }[] = [];
  const conns = new Map<number, Socket[]>();
  const sockets = new Set<Socket>();
  const muted = new Set<number>();
  let count = 0;
  const server: Server = createServer((client) => {
    const conn = ++count;
    const upstream = createConnection({ port: g.target, host: '127.0.0.1' });
    conns.set(conn, [client, upstream]);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    const down = new FrameStream(
      (bytes) => client.write(bytes),
      (payload) => {
        const message = seenMessage(payload);
        if (!message) return true;
        const seen: Down = { conn, ...message };
        const hook = hooks.find((h) => h.pred(seen));
        if (!hook) return true;
        hooks.splice(hooks.indexOf(hook), 1);
        return hook.fn(seen) !== 'drop';
      },
    );
    client.on('data', (d: Buffer) => muted.has(conn) || upstream.write(d));
    upstream.on('data', (d: Buffer) => down.push(d));
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const g: Gate = {
    port: (server.address() as { port: number }).port,
    target,
    before: (pred, fn) => void hooks.push({ pred, fn }),
    cut: (conn) => conns.get(conn)?.forEach((s) => s.destroy()),
    mute: (conn) => void muted.add(conn),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  return g;
}

/** The predicate for "the coordinator asks for round k". */
export const roundMessage = (k: number) => (m: Down) => m.type === 'round' && m.round === k;
