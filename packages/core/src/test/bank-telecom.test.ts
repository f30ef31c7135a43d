// The shipped bank-telecom data set: regenerated from its seed byte for byte, its stated
// properties counted from the files' text, and what it is for measured without any of the
// project's preparation: a model on both organisations' columns (standardised and
// mean-imputed by hand here) beats the bank's own columns on held-out customers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BANK_TELECOM_FILES, bankTelecomDataset, csrFromDense, fitCentral, logistic, rocAuc } from '../index.js';
import { SHARED, seeded } from './support.js';

interface Table {
  header: string[];
  rows: string[][];
}

function parse(text: string): Table {
  const lines = text.split('\n');
  assert.equal(lines.pop(), '', 'the file ends with a newline');
  const [header, ...rows] = lines.map((l) => l.split(','));
  for (const r of rows) assert.equal(r.length, header.length);
  return { header, rows };
}

const read = (name: string) => parse(readFileSync(join(SHARED.bankTelecom, name), 'utf8'));
const GAPS = new Set(['', 'NA', '?']);
const NON_NUMERIC = new Set(['customer_id', 'region', 'plan', 'subscribed']);

test('data/bank-telecom is what the generator writes with its default seed and rows, byte for byte', () => {
  const files = bankTelecomDataset();
  for (const name of BANK_TELECOM_FILES) assert.ok(files[name] === readFileSync(join(SHARED.bankTelecom, name), 'utf8'), `${name} differs: regenerate it with admm-share generate --dataset bank-telecom --out data/bank-telecom`);
  const other = bankTelecomDataset({ seed: 'another' });
  assert.notEqual(other['bank.csv'], files['bank.csv'], 'the seed matters');
});

test('bank-telecom files: columns, ids, 80 % overlap in different orders, 5 % gaps, categories, raw-unit ranges, base rate', () => {
  const bank = read('bank.csv');
  const telecom = read('telecom.csv');
  assert.deepEqual(bank.header, ['customer_id', 'age', 'income', 'balance', 'credit_utilisation', 'products', 'region', 'subscribed']);
  assert.deepEqual(telecom.header, ['customer_id', 'monthly_minutes', 'data_gb', 'tenure_months', 'dropped_calls', 'monthly_bill', 'plan']);
  assert.equal(bank.rows.length, 10_000);
  assert.equal(telecom.rows.length, 10_000);

  const bankIds = bank.rows.map((r) => r[0]);
  const telecomIds = telecom.rows.map((r) => r[0]);
  for (const id of [...bankIds, ...telecomIds]) assert.match(id, /^C\d{6}$/);
  assert.equal(new Set(bankIds).size, bankIds.length, 'bank ids unique');
  assert.equal(new Set(telecomIds).size, telecomIds.length, 'telecom ids unique');
  const inTelecom = new Set(telecomIds);
  const shared = bankIds.filter((id) => inTelecom.has(id));
  assert.ok(Math.abs(shared.length / bankIds.length - 0.8) <= 0.01, `bank overlap ${shared.length / bankIds.length}`);
  assert.ok(Math.abs(shared.length / telecomIds.length - 0.8) <= 0.01, `telecom overlap ${shared.length / telecomIds.length}`);
  const inBank = new Set(bankIds);
  const sharedInTelecomOrder = telecomIds.filter((id) => inBank.has(id));
  let samePlace = 0;
  shared.forEach((id, i) => (samePlace += sharedInTelecomOrder[i] === id ? 1 : 0));
  assert.ok(samePlace < 50, `the shared customers come in different orders (${samePlace} in the same place)`);

  const markers = new Set<string>();
  for (const t of [bank, telecom]) {
    let cells = 0;
    let gaps = 0;
    t.header.forEach((name, j) => {
      if (NON_NUMERIC.has(name)) return;
      for (const r of t.rows) {
        cells++;
        if (GAPS.has(r[j])) {
          gaps++;
          markers.add(r[j]);
        } else assert.match(r[j], /^-?\d+(\.\d+)?$/, `${name}: '${r[j]}'`);
      }
    });
    assert.ok(Math.abs(gaps / cells - 0.05) <= 0.005, `missing share ${gaps / cells}`);
    for (const name of ['region', 'plan', 'subscribed']) {
      const j = t.header.indexOf(name);
      if (j >= 0) for (const r of t.rows) assert.ok(!GAPS.has(r[j]), `${name} has no gaps`);
    }
  }
  assert.deepEqual([...markers].sort(), ['', '?', 'NA'], 'gaps written all three ways');

  const values = (t: Table, name: string) => {
    const j = t.header.indexOf(name);
    return t.rows.map((r) => r[j]).filter((v) => !GAPS.has(v)).map(Number);
  };
  const range = (t: Table, name: string) => {
    const v = values(t, name);
    return [Math.min(...v), Math.max(...v)];
  };
  const within = (t: Table, name: string, lo: number, hi: number, spanLo: number, spanHi: number) => {
    const [min, max] = range(t, name);
    assert.ok(min >= lo && max <= hi, `${name} in [${lo}, ${hi}]: [${min}, ${max}]`);
    assert.ok(min <= spanLo && max >= spanHi, `${name} reaches ${spanLo} and ${spanHi}: [${min}, ${max}]`);
  };
  within(bank, 'age', 18, 90, 20, 85);
  within(bank, 'income', 1e4, 3e5, 1.2e4, 2e5);
  within(bank, 'balance', -5e3, 1e5, -3e3, 5e4);
  within(bank, 'credit_utilisation', 0.01, 1, 0.01, 1);
  within(bank, 'products', 1, 6, 1, 6);
  within(telecom, 'monthly_minutes', 0, 3000, 0, 2000);
  within(telecom, 'data_gb', 0.01, 100, 0.02, 50);
  within(telecom, 'tenure_months', 1, 240, 2, 200);
  within(telecom, 'dropped_calls', 0, 100, 0, 8);
  within(telecom, 'monthly_bill', 5, 1000, 10, 100);
  for (const name of ['age', 'income', 'products', 'monthly_minutes', 'tenure_months', 'dropped_calls']) assert.ok(values(name in { age: 1, income: 1, products: 1 } ? bank : telecom, name).every(Number.isInteger), `${name} whole`);

  const counts = (t: Table, name: string) => {
    const j = t.header.indexOf(name);
    const m = new Map<string, number>();
    for (const r of t.rows) m.set(r[j], (m.get(r[j]) ?? 0) + 1);
    return m;
  };
  const regions = counts(bank, 'region');
  assert.deepEqual([...regions.keys()].sort(), ['central', 'east', 'north', 'south', 'west']);
  for (const n of regions.values()) assert.ok(n >= 500, 'every region common');
  const plans = counts(telecom, 'plan');
  assert.deepEqual([...plans.keys()].sort(), ['basic', 'plus', 'premium', 'prepaid']);
  for (const n of plans.values()) assert.ok(n >= 500, 'every plan common');
  const target = counts(bank, 'subscribed');
  assert.deepEqual([...target.keys()].sort(), ['no', 'yes']);
  const rate = target.get('yes')! / bank.rows.length;
  assert.ok(rate >= 0.15 && rate <= 0.3, `base rate ${rate}`);
});

test('bank-telecom new customers: new ids, no target, partly shared between the two files; their outcomes in new-subscribed.csv', () => {
  const known = new Set([...read('bank.csv').rows, ...read('telecom.csv').rows].map((r) => r[0]));
  const bank = read('new-bank.csv');
  const telecom = read('new-telecom.csv');
  const outcomes = read('new-subscribed.csv');
  assert.deepEqual(bank.header, ['customer_id', 'age', 'income', 'balance', 'credit_utilisation', 'products', 'region']);
  assert.deepEqual(telecom.header, read('telecom.csv').header);
  assert.deepEqual(outcomes.header, ['customer_id', 'subscribed']);
  assert.equal(bank.rows.length, 1000);
  const ids = bank.rows.map((r) => r[0]);
  for (const id of [...ids, ...telecom.rows.map((r) => r[0])]) assert.ok(!known.has(id), `${id} is new`);
  const inTelecom = new Set(telecom.rows.map((r) => r[0]));
  const shared = ids.filter((id) => inTelecom.has(id)).length;
  assert.ok(shared > 0.7 * ids.length && shared < ids.length, `new customers shared: ${shared}`);
  assert.deepEqual(outcomes.rows.map((r) => r[0]), ids);
});

/**
 * Held-out AUC of a central logistic model on the bank's columns alone and on both
 * organisations', on the customers both hold: 80 % train, 20 % test (seeded). Gaps get the
 * training mean, numeric columns the training mean and deviation, categories one indicator each.
 */
function heldOutAuc(): { bank: number; joint: number; rows: number; test: number } {
  const bank = read('bank.csv');
  const telecom = read('telecom.csv');
  const telecomById = new Map(telecom.rows.map((r) => [r[0], r]));
  const joined = bank.rows.filter((r) => telecomById.has(r[0])).map((r) => ({ bank: r, telecom: telecomById.get(r[0])! }));
  const rand = seeded('bank-telecom holdout');
  const isTest = joined.map(() => rand() < 0.2);
  const y = Float64Array.from(joined, (j) => (j.bank[bank.header.indexOf('subscribed')] === 'yes' ? 1 : -1));

  /** The prepared columns of one organisation's table, fitted on the training rows. */
  const prepare = (t: Table, rowsOf: string[][]): number[][] => {
    const out: number[][] = rowsOf.map(() => []);
    t.header.forEach((name, j) => {
      if (name === 'customer_id' || name === 'subscribed') return;
      if (name === 'region' || name === 'plan') {
        const levels = [...new Set(rowsOf.filter((_, i) => !isTest[i]).map((r) => r[j]))].sort();
        rowsOf.forEach((r, i) => levels.forEach((l) => out[i].push(r[j] === l ? 1 : 0)));
        return;
      }
      const train = rowsOf.filter((r, i) => !isTest[i] && !GAPS.has(r[j])).map((r) => Number(r[j]));
      const mean = train.reduce((a, b) => a + b, 0) / train.length;
      const sd = Math.sqrt(train.reduce((a, b) => a + (b - mean) ** 2, 0) / train.length);
      rowsOf.forEach((r, i) => out[i].push(GAPS.has(r[j]) ? 0 : (Number(r[j]) - mean) / sd));
    });
    return out;
  };
  const bankCols = prepare(bank, joined.map((j) => j.bank));
  const telecomCols = prepare(telecom, joined.map((j) => j.telecom));
  const auc = (features: number[][]) => {
    const trainRows = features.filter((_, i) => !isTest[i]);
    const trainY = Float64Array.from(y.filter((_, i) => !isTest[i]));
    const fit = fitCentral(csrFromDense(trainRows), trainY, logistic, 1e-4, { intercept: true });
    const testRows = features.filter((_, i) => isTest[i]);
    const scores = Float64Array.from(testRows, (r) => r.reduce((s, v, k) => s + v * fit.x[k], fit.intercept));
    return rocAuc(scores, Float64Array.from(y.filter((_, i) => isTest[i])));
  };
  return {
    bank: auc(bankCols),
    joint: auc(bankCols.map((r, i) => [...r, ...telecomCols[i]])),
    rows: joined.length,
    test: isTest.filter(Boolean).length,
  };
}

test("bank-telecom: with preparation by hand, a central model on both organisations' columns clearly beats the bank's alone on held-out customers", (t) => {
  const r = heldOutAuc();
  t.diagnostic(`held-out AUC on ${r.test} of ${r.rows} shared customers: bank alone ${r.bank.toFixed(3)}, bank + telecom ${r.joint.toFixed(3)}`);
  assert.ok(r.bank > 0.6 && r.bank < 0.74, `bank alone ${r.bank}`);
  assert.ok(r.joint > 0.76, `joint ${r.joint}`);
  assert.ok(r.joint - r.bank > 0.08, `joint ${r.joint} against bank ${r.bank}`);
});
