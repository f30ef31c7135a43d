export * from './coordinator.js';
export * from './admm.js';
export { Anderson, DEFAULT_ANDERSON, MAX_ANDERSON, requireAnderson } from './anderson.js';
export * from './labels.js';
export * from './checkpoint.js';
export * from './report-read.js';
// The limits on what an unauthenticated peer can make the coordinator do (docs/operations.md).
export { HELLO_MAX_BYTES, MAX_PENDING_CONNECTIONS, PRE_HELLO_MAX_BYTES, UNAUTHENTICATED_MAX_BYTES } from './admission.js';
export { CLOSE_FLUSH_MS } from './drop.js';
export { HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, HTTP_TIMEOUT_CHECK_MS, TLS_HANDSHAKE_TIMEOUT_MS } from './server.js';
export { WARNINGS_PER_SECOND } from './warnings.js';
// The job's HTTP port: the dashboard's event stream and the rounds it keeps (docs/operations.md).
export { EVENT_INTERVAL_MS, MAX_EVENT_CLIENTS } from './status-server.js';
export { MAX_HISTORY_POINTS, PARTY_STATES, type JobStatus, type PartyState, type RoundPoint } from './monitor.js';
export { baseRateMetrics, comparisonWarnings } from './oneshot-loop.js';
export { LabelPsi } from './psi.js';
export { FLIPS_FILE, type LabelFlips, type LabelPrivacyConfig, type LabelPrivacyReport, readLabelFlips } from './label-flips.js';
export { labelPrivacyLine } from './report.js';
export { JOB_FILE, type JobDescription, readJobFile } from './job-file.js';
export { MISSING_POLICIES, type MissingPolicy, type PredictSummary, predictLine } from './predict.js';
