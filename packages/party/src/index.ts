export * from './xupdate.js';
export * from './party.js';
