export * from './cli-support.js';
