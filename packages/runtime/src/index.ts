export * from './cli-support.js';
export * from './progress.js';
export * from './report-page.js';
export * from './secrets.js';
export * from './psi-cache-flags.js';
