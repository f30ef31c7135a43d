import { readLibsvm } from './dist/index.js';
for (let r = 0; r < 2; r++) {
const t = performance.now();
const tab = readLibsvm(process.argv[2], { ids: process.argv[3] ?? 'first', features: Number(process.argv[4] ?? 100) });
console.log('read', ((performance.now() - t) / 1000).toFixed(2), 's', tab.X.rows, tab.X.indices.length, 'rss', (process.memoryUsage().rss / 2 ** 20).toFixed(0));
}
