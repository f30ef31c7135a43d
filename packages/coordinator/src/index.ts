export * from './coordinator.js';
export * from './admm.js';
export * from './labels.js';
export * from './checkpoint.js';
export * from './report-read.js';
