// io: data files are UTF-8 unless told otherwise (--id-encoding): a byte that is not UTF-8 is a
// DataError naming the file and line, never a U+FFFD that makes two ids one; and ids are
// compared as the UTF-8 bytes they are sent as (a lone surrogate is refused).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readFeatureBlock, readFeatureFile, readIdFile, readLabelFile, refuseDuplicates, requestIdsProblem } from '../index.js';
import { throwsData } from './io-support.js';
import { tempDir } from './support.js';

const dir = tempDir({ after }, 'admm-core-io-utf8-');
let counter = 0;
/** A file of exactly these bytes (strings as UTF-8, numbers as single bytes). */
function bytesFile(ext: string, ...parts: (string | number[])[]): string {
  const p = join(dir, `f${counter++}${ext}`);
  writeFileSync(p, Buffer.concat(parts.map((x) => (typeof x === 'string' ? Buffer.from(x, 'utf8') : Buffer.from(x)))));
  return p;
}

// 'Müller' in Latin-1: ü is the single byte 0xFC, not UTF-8.
const MUELLER_LATIN1 = ['M'.charCodeAt(0), 0xfc, ...Buffer.from('ller')];

test('a LIBSVM file with a Latin-1 byte in an id: a DataError naming its line, for every chunk size', () => {
  for (const chunkBytes of [1, 2, 3, 5, 64, undefined]) {
    const p = bytesFile('.txt', 'a 1:1\nb 1:2\n', MUELLER_LATIN1, ' 1:3\nc 1:4\n');
    throwsData(() => readFeatureFile(p, { ids: 'first', chunkBytes }), p, 3, /not valid UTF-8.*--id-encoding latin1/);
    throwsData(() => readFeatureBlock(p, { ids: 'first', chunkBytes }), p, 3, /not valid UTF-8/);
  }
});

test('--id-encoding latin1: the same file reads, its ids as Unicode text', () => {
  const p = bytesFile('.txt', 'a 1:1\n', MUELLER_LATIN1, ' 1:3\n');
  assert.deepEqual(readFeatureFile(p, { ids: 'first', encoding: 'latin1', chunkBytes: 2 }).ids, ['a', 'Müller']);
  const block = readFeatureBlock(p, { ids: 'first', encoding: 'latin1' });
  assert.deepEqual(Buffer.from(block.ids.bytes).toString('utf8'), 'aMüller');
});

test('two Latin-1 spellings that both used to read as M\\uFFFDller are refused, not one id', () => {
  // 0xFC (ü) and 0xFD (ý): before, both became U+FFFD and the file had one id twice.
  const p = bytesFile('.csv', 'id,label\n', MUELLER_LATIN1, ',1\n', ['M'.charCodeAt(0), 0xfd, ...Buffer.from('ller')], ',0\n');
  throwsData(() => readLabelFile(p), p, 2, /not valid UTF-8/);
  assert.deepEqual(readLabelFile(p, { encoding: 'latin1' }).ids, ['Müller', 'Mýller']);
});

test('CSV files: the line of the bad byte, also inside a quoted field spanning lines', () => {
  for (const chunkBytes of [1, 4, undefined]) {
    const p = bytesFile('.csv', 'id,label\nx,1\n"y\nz",0\nw', [0xe9], ',1\n');
    throwsData(() => readIdFile(p, { chunkBytes }), p, 5, /not valid UTF-8/);
    throwsData(() => readLabelFile(p, { chunkBytes }), p, 5, /not valid UTF-8/);
  }
});

test('valid UTF-8 of 2, 3 and 4 bytes, split across chunks anywhere, reads as before', () => {
  const ids = ['é', 'ü1', '日本', 'a😀b', '€x'];
  const p = bytesFile('.txt', ids.map((id) => `${id} 1:1\n`).join(''));
  for (let chunkBytes = 1; chunkBytes <= 9; chunkBytes++) assert.deepEqual(readFeatureFile(p, { ids: 'first', chunkBytes }).ids, ids);
  const withBom = bytesFile('.csv', [0xef, 0xbb, 0xbf], 'id,label\n日本,1\n😀,0\n');
  for (const chunkBytes of [1, 2, 3, 4, undefined]) assert.deepEqual(readLabelFile(withBom, { chunkBytes }).ids, ['日本', '😀']);
});

test('malformed sequences: overlong, surrogate code points, stray continuation bytes, cut short at the end', () => {
  const cases: [number[], number][] = [
    [[0xc0, 0xaf], 2], // overlong '/'
    [[0xed, 0xa0, 0x80], 2], // U+D800 encoded (CESU), not UTF-8
    [[0x80], 2],
    [[0xf4, 0x90, 0x80, 0x80], 2], // above U+10FFFF
    [[0xe6, 0x97], 3], // the file ends inside a character
  ];
  for (const [bad, line] of cases)
    for (const chunkBytes of [1, 2, 3, undefined]) {
      const p = line === 3 ? bytesFile('.txt', 'a 1:1\nb 1:1\nc', bad) : bytesFile('.txt', 'a 1:1\nb', bad, ' 1:1\n');
      throwsData(() => readFeatureFile(p, { ids: 'first', chunkBytes }), p, line, /not valid UTF-8/);
    }
});

test('refuseDuplicates: a lone surrogate is refused (as UTF-8 it would be the bytes of U+FFFD)', () => {
  throwsData(() => refuseDuplicates('ids.txt', ['x', 'a\uD800', 'a\uFFFD'], [1, 2, 3]), 'ids.txt', 2, /lone UTF-16 surrogate \(\\uD800 at character 2\)/);
  throwsData(() => refuseDuplicates('ids.txt', ['\uDC00b'], [7]), 'ids.txt', 7, /\\uDC00/);
  // A surrogate pair is one character (U+1F600), and the ids stay distinct.
  refuseDuplicates('ids.txt', ['a\uD83D\uDE00', 'a\uFFFD', 'a'], [1, 2, 3]);
});

test('requestIdsProblem: a lone surrogate by its position, a repeat by both positions', () => {
  assert.match(requestIdsProblem(['ok', 'a\uD800', 'a\uFFFD']) ?? '', /^ids\[1\]: has a lone UTF-16 surrogate/);
  assert.equal(requestIdsProblem(['x', 'y', 'x']), 'ids[2] repeats ids[0]: each id once');
  assert.equal(requestIdsProblem(['a\uD83D\uDE00', 'a\uFFFD', 'é', 'e\u0301']), undefined);
});
