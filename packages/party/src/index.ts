export * from './xupdate/xupdate.js';
export * from './party.js';
export * from './privacy/privacy.js';
export * from './xupdate/sgd.js';
export { PartyPsi } from './intersection/psi.js';
