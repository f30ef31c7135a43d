/**
 * The bytes pair: bytes received from the parties and sent to them, counted on the parties'
 * port (all of it, one party's connections, or one round). One type wherever the coordinator
 * counts; the output files and the status API spell it their own way (toCoordinator and
 * fromCoordinator, bytesIn and bytesOut) because those names are part of their formats.
 */
export interface Traffic {
  in: number;
  out: number;
}

/** A fresh counter. */
export function noTraffic(): Traffic {
  return { in: 0, out: 0 };
}

/** What moved between `before` and `now`, as the trace and the summary write it. */
export function trafficSince(now: Traffic, before: Traffic = noTraffic()): { toCoordinator: number; fromCoordinator: number } {
  return { toCoordinator: now.in - before.in, fromCoordinator: now.out - before.out };
}
