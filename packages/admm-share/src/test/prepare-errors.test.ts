// A party's data that its preparation cannot take stops the process before it connects: exit 65
// and one line naming the file, the line, the column and what fixes it (a flag, or the spec).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

test('admm-party: bad data for the preparation is one line naming file, line, column and the fix (exit 65)', async (t) => {
  const dir = tempDir(t, 'admm-prepare-errors-');
  const data = join(dir, 'bank.csv');
  writeFileSync(data, 'id,age,income,region\nA1,30,50000,north\nA2,70,,east\nA3,40,60000,south\n');
  const spec = (name: string, columns: object) => {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify({ columns }));
    return path;
  };
  const ranges = spec('ranges.json', { age: { range: [18, 60] } });
  const categories = spec('categories.json', { region: { categories: ['north', 'south'] } });
  const absent = spec('absent.json', { tenure: { range: [0, 10] } });
  const cases: [string[], RegExp][] = [
    [['--categorical', 'region'], /bank\.csv:3: column 'income': a missing value; .*--missing mean\|median\|zero\|drop/],
    [['--missing', 'mean'], /bank\.csv:2: column 'region': 'north' is not a decimal number; .*--categorical/],
    [['--categorical', 'region', '--missing', 'mean', '--prepare-spec', ranges], /bank\.csv:3: column 'age': 70 is outside the range \[18, 60\] declared in .*ranges\.json: widen the range/],
    [['--categorical', 'region', '--missing', 'mean', '--prepare-spec', categories], /bank\.csv:3: column 'region': category 'east' is not among the categories declared in .*categories\.json/],
    [['--categorical', 'region', '--missing', 'mean', '--prepare-spec', absent], /bank\.csv:1: column 'tenure' is declared in .*absent\.json but it is not in the header/],
  ];
  for (const [flags, message] of cases) {
    // Nothing listens on port 1: the data is read, and refused, before the party connects.
    const p = run(BIN.party, ['--coordinator', 'ws://127.0.0.1:1', '--id', 'bank', '--role', 'active', '--data', data, ...flags, '--model', join(dir, 'model.json')]);
    const { code } = await p.exit;
    assert.equal(code, 65, `${flags.join(' ')}: ${p.stderr()}`);
    const lines = p.stderr().trim().split('\n');
    assert.equal(lines.length, 1, p.stderr());
    assert.match(lines[0], /^admm-party: error: /);
    assert.match(lines[0], message);
  }
});
