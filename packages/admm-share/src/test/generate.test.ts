// `admm-share generate --dataset bank-telecom` as a user runs it: the files are the generator's
// for the seed and rows given, and with no seed or rows the set the repository ships.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { BANK_TELECOM_FILES, bankTelecomDataset } from '@admm-share/core';
import { SHARED } from '@admm-share/core/test-support';
import { BIN, run, tempDir } from './procs.js';

test('admm-share generate --dataset bank-telecom: the generator\'s files for --seed and --rows, the shipped set by default, --test-rows refused', async (t) => {
  const dir = tempDir(t);
  const small = join(dir, 'small');
  const r = run(BIN.share, ['generate', '--dataset', 'bank-telecom', '--out', small, '--seed', 'other', '--rows', '50']);
  assert.equal((await r.exit).code, 0, r.stderr());
  assert.deepEqual(Object.keys(JSON.parse(r.stdout())).sort(), [...BANK_TELECOM_FILES].sort());
  const expected = bankTelecomDataset({ seed: 'other', rows: 50 });
  assert.deepEqual(readdirSync(small).sort(), [...BANK_TELECOM_FILES].sort());
  for (const name of BANK_TELECOM_FILES) assert.equal(readFileSync(join(small, name), 'utf8'), expected[name], name);
  assert.equal(readFileSync(join(small, 'bank.csv'), 'utf8').trim().split('\n').length, 51);

  const shipped = join(dir, 'default');
  const d = run(BIN.share, ['generate', '--dataset', 'bank-telecom', '--out', shipped]);
  assert.equal((await d.exit).code, 0, d.stderr());
  for (const name of BANK_TELECOM_FILES) assert.ok(readFileSync(join(shipped, name), 'utf8') === readFileSync(join(SHARED.bankTelecom, name), 'utf8'), `${name} is data/bank-telecom's`);

  const bad = run(BIN.share, ['generate', '--dataset', 'bank-telecom', '--out', join(dir, 'bad'), '--test-rows', '5']);
  assert.equal((await bad.exit).code, 64);
  assert.match(bad.stderr(), /--test-rows applies to --dataset synthetic/);
});
