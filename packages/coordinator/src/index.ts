export * from './job/coordinator.js';
export * from './numerics/admm-step.js';
export { Anderson, DEFAULT_ANDERSON, MAX_ANDERSON, requireAnderson } from './numerics/anderson.js';
export * from './job/labels.js';
export * from './output/checkpoint.js';
export { parseSummary, readSummary } from './output/summary.js';
export { readTrace, traceLineSchema } from './output/trace.js';
export { readLocalBaseline } from './output/local-baseline.js';
// The limits on what an unauthenticated peer can make the coordinator do (docs/operations.md).
export { HELLO_MAX_BYTES, MAX_PENDING_CONNECTIONS, PRE_HELLO_MAX_BYTES, UNAUTHENTICATED_MAX_BYTES } from './connections/admission.js';
export { CLOSE_FLUSH_MS } from './connections/drop.js';
export { HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, HTTP_TIMEOUT_CHECK_MS, TLS_HANDSHAKE_TIMEOUT_MS } from './connections/server.js';
export { WARNINGS_PER_SECOND } from './connections/warnings.js';
// The job's HTTP port: the dashboard's event stream and the rounds it keeps (docs/operations.md).
export { EVENT_INTERVAL_MS, MAX_EVENT_CLIENTS } from './monitoring/status-server.js';
export { MAX_HISTORY_POINTS, PARTY_STATES, type JobStatus, type PartyState, type RoundPoint } from './monitoring/monitor.js';
export { baseRateMetrics, comparisonWarnings } from './training/one-shot-loop.js';
export { LabelPsi } from './alignment/psi.js';
export { FLIPS_FILE, type LabelFlips, type LabelPrivacyConfig, type LabelPrivacyReport, readLabelFlips } from './job/label-flips.js';
export { labelPrivacyLine } from './output/summary.js';
export { JOB_FILE, type JobDescription, readJobFile } from './output/job-file.js';
export { MISSING_POLICIES, type MissingPolicy, type PredictSummary, predictLine, readPredictSummary } from './prediction/predict.js';
export { type Credentials, credentialsSchema, readCredentials } from './connections/credentials-file.js';
export {
  CONTRIBUTION_THRESHOLD,
  type ModelReport,
  REPORT_FILE,
  REPORT_FORMAT,
  REPORT_PAGE,
  TEST_SCORES_FILE,
  type TestScores,
  WEIGHT_THRESHOLD,
  buildModelReport,
  formatModelReport,
  readModelReport,
  readTestScores,
} from './output/model-report.js';
export { modelReportPage, writeModelReportPage } from './output/report-page.js';
