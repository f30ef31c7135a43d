// The page shell every report uses: escaping, number cells, and a page with no script and no
// remote resource.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { escapeHtml, formatNumber, htmlPage, htmlTable, renderSvg } from '../index.js';

test('escapeHtml: the five characters that matter in content and quoted attributes', () => {
  assert.equal(escapeHtml(`<img src=x onerror="a('b')">&`), '&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;');
  assert.equal(escapeHtml('plain name_1'), 'plain name_1');
});

test('formatNumber: fixed in the usual range, exponent outside it, a dash for NaN and null', () => {
  assert.equal(formatNumber(0.5), '0.5000');
  assert.equal(formatNumber(0), '0.0000');
  assert.equal(formatNumber(-2.6e-6), '-2.600e-6');
  assert.equal(formatNumber(1.5e7), '1.500e+7');
  assert.equal(formatNumber(NaN), '-');
  assert.equal(formatNumber(null), '-');
  assert.equal(formatNumber(Infinity), 'inf');
});

test('htmlPage and htmlTable: the title escaped, a CSP without scripts, an SVG inline', async () => {
  const svg = await renderSvg({ data: { values: [{ x: 0, y: 1 }, { x: 1, y: 0 }] }, mark: 'line', encoding: { x: { field: 'x', type: 'quantitative' }, y: { field: 'y', type: 'quantitative' } } });
  assert.match(svg, /^<svg/);
  const page = htmlPage('<job>', htmlTable(['a'], [['1']]) + svg);
  assert.match(page, /<title>&lt;job&gt;<\/title>/);
  assert.match(page, /Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"/);
  assert.match(page, /<table><thead><tr><th>a<\/th><\/tr><\/thead><tbody><tr><td>1<\/td><\/tr><\/tbody><\/table>/);
  assert.doesNotMatch(page, /<script|https?:\/\/(?!www\.w3\.org)/i);
});
