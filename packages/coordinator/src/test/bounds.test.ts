// The coordinator's own bounds, without processes: its update stays finite for every share
// the protocol accepts and the check before sending catches one that is not; address groups
// for sharing out pending slots; the warning rate limit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Logger } from 'pino';
import { InternalError, logistic, squared } from '@admm-share/core';
import { MAX_PENALTY_SQ, MAX_SHARE_MAGNITUDE } from '@admm-share/protocol';
import { addressGroup } from '../connections/admission.js';
import { CHUNK } from '../numerics/admm-kernels.js';
import { AdmmStep, type Variant } from '../numerics/admm-step.js';
import { assertFinite } from '../training/loop.js';
import { WARNINGS_PER_SECOND, WarningLimiter } from '../connections/warnings.js';

const N = 6;
const M = 3;

function coordinator(variant: Variant, loss: typeof logistic) {
  const y = Float64Array.from({ length: N }, (_, i) => (loss === logistic ? (i % 2 ? 1 : -1) : i * 1e6));
  return new AdmmStep({ variant, loss, y, parties: M, lambda: 1e-4, rho: 0.01 / N, alpha: variant === 'exact' ? 1.6 : 1, tolerance: { abs: 1e-7, rel: 1e-5 } });
}

test('shares at the protocol bound (+-MAX_SHARE_MAGNITUDE) keep c, z, the residuals and the objective finite, round after round', () => {
  for (const variant of ['exact', 'paper'] as const) {
    for (const loss of [logistic, squared]) {
      const admm = coordinator(variant, loss);
      const label = `${variant}/${loss.name}`;
      // Every sign pattern a hostile party could pick, including all parties at the same extreme.
      const patterns = [
        [1, 1, 1],
        [-1, -1, -1],
        [1, -1, 1],
        [-1, 1, 1],
      ];
      for (let round = 1; round <= 8; round++) {
        const signs = patterns[round % patterns.length];
        const shares = signs.map((s, m) => Float64Array.from({ length: N }, (_, i) => ((i + m) % 2 ? s : -s) * MAX_SHARE_MAGNITUDE));
        const stats = admm.step(shares);
        assertFinite(`round ${round}`, 'c', admm.c);
        assertFinite(`round ${round}`, 'z', admm.z);
        for (const [k, v] of Object.entries(stats)) assert.ok(Number.isFinite(v), `${label} round ${round}: ${k} = ${v}`);
        const objective = admm.objective(M * MAX_PENALTY_SQ);
        assert.ok(Number.isFinite(objective), `${label} round ${round}: objective ${objective}`);
      }
    }
  }
});

test('a finite share beyond the bound makes c non-finite, and assertFinite stops it with an InternalError naming the round', () => {
  const admm = coordinator('exact', logistic);
  assert.equal(admm.sentFinite(), true, 'before any step: c = 0');
  admm.step(Array.from({ length: M }, () => new Float64Array(N).fill(1.7e308)));
  assert.ok(!Array.from(admm.c).every(Number.isFinite), 'the hazard the bound prevents');
  assert.equal(admm.sentFinite(), false, 'the check the loop makes before searching');
  assert.throws(
    () => assertFinite('round 12', 'c', admm.c),
    (err: unknown) => err instanceof InternalError && /in round 12: the coordinator's update produced c\[0\] = (NaN|-?Infinity); nothing was sent/.test(err.message),
  );
});

test("sentFinite is the step's own check of every vector it sends: with acceleration each party's (made as the step unpacks them), without it c; true while they are finite, false once one value is not", () => {
  // Several chunks (CHUNK samples each), in a team and not: a value in the last chunk (three
  // samples, which unpackRange takes one at a time) or the second sample (in its groups of four).
  const n = 2 * CHUNK + 3;
  const y = Float64Array.from({ length: n }, (_, i) => (i % 3 ? 1 : -1));
  const cases = [0, 3].flatMap((anderson) => [false, true].flatMap((team) => [n - 1, 5].map((at) => ({ anderson, team, at }))));
  for (const { anderson, team, at } of cases) {
    const what = `anderson ${anderson}, team ${team}, sample ${at}`;
    const admm = new AdmmStep({ variant: 'exact', loss: logistic, y, parties: M, lambda: 1e-4, rho: 0.01 / n, alpha: 1.6, tolerance: { abs: 1e-7, rel: 1e-5 }, anderson, team });
    try {
      const shares = Array.from({ length: M }, (_, m) => Float64Array.from({ length: n }, (_, i) => Math.sin(i + m)));
      admm.step(shares.map((s) => new Float64Array(s.length)), true);
      for (let r = 1; r <= 3; r++) {
        admm.step(shares);
        const finite = Array.from({ length: M }, (_, m) => admm.cFor(m)).every((v) => v.every(Number.isFinite));
        assert.equal(finite, true, `${what}, round ${r}: the vectors`);
        assert.equal(admm.sentFinite(), true, `${what}, round ${r}`);
      }
      shares[M - 1][at] = 1.7e308;
      shares[M - 2][at] = 1.7e308;
      // As a first step: an extrapolated step whose residual is not finite is rejected for the
      // last point kept (anderson.ts), a first one is taken as it is.
      admm.step(shares, true);
      const bad = Array.from({ length: M }, (_, m) => admm.cFor(m)).filter((v) => !v.every(Number.isFinite)).length;
      assert.ok(bad > 0, `${what}: a vector is not finite`);
      assert.equal(admm.sentFinite(), false, what);
    } finally {
      admm.close();
    }
  }
});

test('address groups: IPv4 addresses as they are (also IPv4-mapped), IPv6 by /64', () => {
  assert.equal(addressGroup('127.0.0.1'), '127.0.0.1');
  assert.equal(addressGroup('::ffff:10.1.2.3'), '10.1.2.3');
  assert.equal(addressGroup('::1'), '0:0:0:0::/64');
  assert.equal(addressGroup('2001:db8:1:2:aaaa:bbbb:cccc:dddd'), '2001:db8:1:2::/64');
  assert.equal(addressGroup('2001:db8:1:2::1'), '2001:db8:1:2::/64');
  assert.equal(addressGroup('2001:db8:1:2:ffff::9'), '2001:db8:1:2::/64');
  assert.equal(addressGroup('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(addressGroup('fe80::1%eth0'), 'fe80:0:0:0::/64');
  assert.equal(addressGroup('?'), '?');
});

test(`the warning limiter logs ${WARNINGS_PER_SECOND} warnings of a kind per second, then one line with the count it suppressed`, async () => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  let summarised: () => void = () => undefined;
  const summary = new Promise<void>((resolve) => (summarised = resolve));
  const log = {
    warn(fields: Record<string, unknown>, msg: string) {
      lines.push({ fields, msg });
      if (msg === 'warnings suppressed') summarised();
    },
  } as unknown as Logger;
  const limiter = new WarningLimiter(log);
  for (let i = 0; i < 1000; i++) limiter.warn('closing connection 4003', log, { i }, 'closing connection');
  for (let i = 0; i < 3; i++) limiter.warn('socket error', log, { i }, 'socket error');
  assert.equal(lines.filter((l) => l.msg === 'closing connection').length, WARNINGS_PER_SECOND);
  assert.equal(lines.filter((l) => l.msg === 'socket error').length, 3, 'each kind has its own allowance');
  // The limiter's timer does not hold the process open (unref); this test waits for it.
  const keepAlive = setInterval(() => undefined, 100);
  await summary;
  clearInterval(keepAlive);
  const s = lines.filter((l) => l.msg === 'warnings suppressed');
  assert.equal(s.length, 1);
  assert.deepEqual(s[0].fields, { kind: 'closing connection 4003', suppressed: 1000 - WARNINGS_PER_SECOND, perSecond: WARNINGS_PER_SECOND });
  // A new second starts afresh.
  limiter.warn('closing connection 4003', log, {}, 'closing connection');
  assert.equal(lines.at(-1)!.msg, 'closing connection');
  limiter.flush();
});
