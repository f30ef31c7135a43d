/**
 * Timings both sides must agree on: the defaults of the flags that set them and the bounds
 * they are checked against. Each side's flag can change its own value; these keep the
 * defaults consistent with each other (PROTOCOL.md, "Rejoining" and heartbeats).
 */

/** Default ms between the coordinator's WebSocket pings to each party (--heartbeat). */
export const HEARTBEAT_MS = 10_000;
/**
 * Default ms of silence after which a party treats its connection as dead
 * (--heartbeat-timeout): three of the coordinator's heartbeat intervals, so one late or lost
 * ping does not drop a live connection.
 */
export const HEARTBEAT_TIMEOUT_MS = 3 * HEARTBEAT_MS;
/**
 * Smallest heartbeat interval or timeout either side accepts, and the party's shortest
 * watchdog tick: below it, timers on a busy event loop would drop live connections.
 */
export const MIN_HEARTBEAT_MS = 100;
/**
 * Default ms the coordinator holds the job for a party that lost its connection
 * (--rejoin-timeout), and a party keeps trying to rejoin (--reconnect-timeout): 75 s, so that
 * any network outage of up to a minute is survived although the first attempt after it may
 * come 12.5 s late (docs/operations.md, "Reconnecting and outages").
 */
export const REJOIN_TIMEOUT_MS = 75_000;
/**
 * Ms a party waits for the close handshake after `done` before it drops the socket; the
 * coordinator waits twice as long (CLOSE_GRACE_MS) for every party to close first.
 */
export const CLOSE_HANDSHAKE_MS = 5_000;
/** Ms the coordinator waits after `done` for the parties to close (they write their models first). */
export const CLOSE_GRACE_MS = 2 * CLOSE_HANDSHAKE_MS;
