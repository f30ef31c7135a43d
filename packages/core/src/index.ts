// @admm-share/core: numeric and data code below every other package (no logger, no flags, no
// process exit). One folder a role; each folder's imports are checked by the layering test.
export * from './errors.js';
export * from './hash.js';
// linalg/: matrices (CSR, dense, packed triangles) and their products and factorisations.
export * from './linalg/csr.js';
export * from './linalg/range-finder.js';
export * from './linalg/dense.js';
export * from './linalg/packed.js';
export * from './linalg/block.js';
export * from './linalg/eigen.js';
// kernels/: the same products in WebAssembly.
export * from './kernels/wasm-kernels.js';
// threads/: a team of threads on shared memory (thread-team.ts) and the dense block's team.
export * from './threads/thread-team.js';
export * from './threads/dense-team.js';
// io/: reading data files (LIBSVM, CSV, ids, labels), writing files whole, JSON files we wrote.
export * from './io/index.js';
// model/: losses, metrics, the centralised reference fit, synthetic data sets, the denoising of a one-shot release.
export * from './model/losses.js';
export * from './model/metrics.js';
export * from './model/report-metrics.js';
export * from './model/central.js';
export * from './model/synthetic.js';
export * from './model/bank-telecom.js';
export * from './model/release.js';
// privacy/: the accountant, the noise, label flips.
export * from './privacy/accounting.js';
export * from './privacy/noise.js';
export * from './privacy/label-flip.js';
// prepare/: a party's raw table made ready for a model (columns, missing values, one-hot,
// standardisation), fit on the training rows, exactly or privately, and applied again at scoring.
export * from './prepare/index.js';
// psi/: private set intersection (the curve operations, and the team that spreads them over threads).
export * from './psi/psi.js';
export * from './psi/psi-team.js';
// The PSI cache (--psi-cache): per partner, a kept key and the points already blinded, on typed-array tables.
export * from './psi/byte-table.js';
export * from './psi/point-cache.js';
export * from './psi/psi-cache.js';
export * from './psi/cached-points.js';
