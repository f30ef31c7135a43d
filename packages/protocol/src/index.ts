export * from './names.js';
export * from './messages.js';
export * from './close-codes.js';
export * from './errors.js';
export * from './codec.js';
export * from './validate.js';
export * from './parts.js';
export * from './timing.js';
