export { type XUpdateForm, RidgeXUpdate } from './xupdate/ridge-xupdate.js';
export { MAX_AUTO_THREADS, THREADS_MIN_ENTRIES, threadsFor } from './xupdate/block-operator.js';
export { CHOLESKY_LIMIT, factorPieces } from './xupdate/cholesky.js';
export { DEFLATION_RANK } from './xupdate/conjugate-gradients.js';
export { EIGEN_LIMIT } from './xupdate/eigen.js';
export * from './party.js';
export * from './privacy/privacy.js';
export * from './xupdate/sgd.js';
export { PartyPsi } from './intersection/psi.js';
