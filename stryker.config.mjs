// Mutation testing of the code where a wrong line is a privacy or correctness failure
// (`npm run mutation`; not part of `npm test` or CI). docs/mutation.md has the why, the
// commands and the last scores.
//
// How a run goes: Stryker copies the repository (less the ignorePatterns) into
// .stryker-tmp/sandbox-*, writes every mutant of the `mutate` files into their TypeScript at
// once behind a switch, and runs scripts/mutation-build.mjs there: it links the sandbox's own
// workspace packages into its node_modules and compiles with `tsc -b` once. Then the tap
// runner runs each compiled unit-test file (`node --test-reporter=tap <file>`) with the active
// mutant in the environment. Coverage is per test file: a mutant only runs the files whose
// dry run reached it, and a mutant no unit test reaches is reported as NoCoverage.
//
// Only the fast unit tests of core, party and coordinator are run. The end-to-end tests in
// packages/admm-share start real coordinator and party processes, take minutes each and would
// not report coverage; they are left out.
//
// Scope a run with --mutate, e.g.
//   npm run mutation -- --mutate packages/party/src/privacy/budget.ts
// Keep --concurrency at 1 or 2: the machines have 2 cores.

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  testRunner: 'tap',
  plugins: ['@stryker-mutator/tap-runner'],
  mutate: [
    'packages/party/src/privacy/{mechanism,budget,ledger,privacy}.ts',
    'packages/core/src/privacy/accounting.ts',
    'packages/core/src/privacy/noise.ts',
    'packages/core/src/model/losses.ts',
    'packages/coordinator/src/numerics/admm-step.ts',
    'packages/party/src/xupdate/{block-operator,gram,eigen,cholesky,conjugate-gradients,privacy-ball,ridge-xupdate}.ts',
  ],
  tap: {
    testFiles: [
      'packages/core/dist/test/*.test.js',
      'packages/party/dist/test/*.test.js',
      'packages/coordinator/dist/test/*.test.js',
    ],
    nodeArgs: ['--test-reporter=tap', '-r', '{{hookFile}}', '{{testFile}}'],
    forceBail: true,
  },
  buildCommand: 'node scripts/mutation-build.mjs',
  // mutation-build.mjs makes the sandbox's node_modules (only @admm-share links); the rest
  // resolves from the repository's node_modules above the sandbox.
  symlinkNodeModules: false,
  // Not copied into the sandbox: stale builds (rebuilt there), run outputs, docs, and the
  // end-to-end package none of the mutated code or unit tests needs.
  ignorePatterns: ['dist', 'runs', 'docs', 'reports', 'packages/admm-share', '*.partial'],
  coverageAnalysis: 'perTest',
  concurrency: 2,
  timeoutMS: 10000,
  timeoutFactor: 2,
  reporters: ['clear-text', 'progress-append-only', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  clearTextReporter: { allowColor: false, logTests: false, maxTestsToLog: 0 },
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
};
