export * from './simulate.js';
export * from './split.js';
export * from './credentials.js';
export * from './processes.js';
export { spamDataset } from './spam.js';
