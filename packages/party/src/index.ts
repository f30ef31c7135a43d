export * from './xupdate.js';
export * from './party.js';
export * from './privacy.js';
export * from './sgd.js';
export { PartyPsi } from './psi.js';
