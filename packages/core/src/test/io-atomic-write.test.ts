// io: writeFileAtomic writes a whole file or none, with its mode, and leaves no temporary file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../index.js';
import { testFiles } from './io-support.js';

const { dir } = testFiles('admm-core-io-atomic-write-');

test('writeFileAtomic: writes, overwrites, and leaves no temporary file', () => {
  const sub = mkdtempSync(join(dir, 'atomic-'));
  const target = join(sub, 'model.json');
  writeFileAtomic(target, 'first version, rather long content\n');
  assert.equal(readFileSync(target, 'utf8'), 'first version, rather long content\n');
  assert.deepEqual(readdirSync(sub), ['model.json']);
  writeFileAtomic(target, 'short');
  assert.equal(readFileSync(target, 'utf8'), 'short');
  writeFileAtomic(target, Uint8Array.of(0xe2, 0x82, 0xac));
  assert.equal(readFileSync(target, 'utf8'), '€');
  assert.deepEqual(readdirSync(sub), ['model.json']);
});

test('writeFileAtomic: a failed write throws and leaves no temporary file', () => {
  const sub = mkdtempSync(join(dir, 'atomic-fail-'));
  // The target is an existing non-empty directory, so the final rename fails.
  const target = join(sub, 'occupied');
  mkdirSync(target);
  writeFileSync(join(target, 'x'), 'keep');
  assert.throws(() => writeFileAtomic(target, 'data'));
  assert.deepEqual(readdirSync(sub), ['occupied']);
  assert.equal(readFileSync(join(target, 'x'), 'utf8'), 'keep');
});

test('writeFileAtomic: the mode applies even over a temporary file left behind by a crash', () => {
  const sub = mkdtempSync(join(dir, 'atomic-mode-'));
  const target = join(sub, 'secret.token');
  const stale = join(sub, `.secret.token.${process.pid}.tmp`);
  writeFileSync(stale, 'old', { mode: 0o644 });
  writeFileAtomic(target, 'new\n', 0o600);
  assert.equal(statSync(target).mode & 0o777, 0o600);
  assert.equal(readFileSync(target, 'utf8'), 'new\n');
  assert.deepEqual(readdirSync(sub), ['secret.token']);
});
