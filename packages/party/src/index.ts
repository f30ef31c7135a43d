export * from './xupdate.js';
export * from './party.js';
export * from './privacy.js';
export * from './sgd.js';
