// Names the wire carries (protocol) and names core implements cannot share one table: neither
// package may import the other. Here, where both are visible, they must agree: at compile
// time (the type assertions) and at run time (the tables, in order).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as core from '@admm-share/core';
import * as protocol from '@admm-share/protocol';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const lossesAgree: Same<core.LossName, protocol.LossName> = true;
const accountantsAgree: Same<core.Accountant, protocol.AccountantName> = true;

test('core implements exactly the losses the protocol names', () => {
  assert.ok(lossesAgree);
  assert.deepEqual([...core.LOSS_NAMES], [...protocol.LOSSES]);
  for (const name of protocol.LOSSES) assert.equal(core.lossByName(name).name, name);
});

test('core implements exactly the privacy accountants the protocol names', () => {
  assert.ok(accountantsAgree);
  assert.deepEqual([...core.ACCOUNTANTS], [...protocol.ACCOUNTANT_NAMES]);
});

test('the mechanisms are the noise mechanisms and none', () => {
  assert.deepEqual([...protocol.MECHANISMS], [...protocol.NOISE_MECHANISMS, 'none']);
});
