export * from './cli-support.js';
export * from './progress.js';
