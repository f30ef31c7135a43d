/**
 * The coordinator's configuration (built by cli.ts from the flags, or by tests). Types only.
 */
import type { ClassWeightSpec } from '@admm-share/core';
import type { AlgorithmName, LossName } from '@admm-share/protocol';
import type { Variant } from './numerics/admm-step.js';
import type { CheckpointPolicy } from './output/checkpoint.js';
import type { LabelPrivacyConfig } from './job/label-flips.js';
import type { LabelOptions } from './job/labels.js';
import type { TestSelection } from './alignment/test-rows.js';
import type { ServerTls } from './connections/server.js';
import type { LocalBaseline } from './output/local-baseline.js';
import type { PsiCacheFlags } from '@admm-share/runtime';

export type { LocalBaseline } from './output/local-baseline.js';
export type { ServerTls } from './connections/server.js';

/** Where a job is (coordinator.ts): before `waiting` the parties' port is not listening yet. */
export type Phase = 'starting' | 'waiting' | 'setup' | 'training' | 'finishing' | 'done' | 'failed';

/** The job's HTTP port for people and monitoring (status-server.ts). */
export interface HttpConfig {
  host: string;
  /** 0 picks a free port; the `http listening` log line reports it. */
  port: number;
  /** Required `Authorization: Bearer <token>` on everything but /healthz and /readyz; none: anyone who can reach the port may look. */
  token?: string;
  /** Keep the HTTP port open this long after the job ends (done or failed), to look at the end state. */
  lingerMs: number;
  /** An event stream (/api/events) ends after this long; the browser reconnects by itself (--http-event-seconds). */
  eventStreamMs: number;
  /**
   * The local-only model to show beside the job's at its end (--local-baseline): the label
   * holder's own model on its own features, fitted outside the job (simulate fits it). A
   * one-shot job's active party fits its own, which takes precedence.
   */
  localBaseline?: LocalBaseline;
}

export interface SgdConfig {
  batchSize: number;
  /** Learning rate of epoch e: lr / (1 + lrDecay (e - 1)). */
  lr: number;
  lrDecay: number;
}

export interface CoordinatorConfig {
  /** auto: one-shot when any party adds noise (its hello says so), admm otherwise. */
  algorithm: AlgorithmName | 'auto';
  /** The party of the coordinator's own organisation (it must agree with --role active); none: every party is passive. */
  activeParty?: string;
  sgd: SgdConfig;
  host: string;
  /** 0 picks a free port; the `listening` log line reports it. */
  port: number;
  labels: string;
  testLabels?: string;
  /**
   * Test rows chosen among the aligned ids of `labels` (--holdout, --test-ids) and held out of
   * training; parties then give one file. Not with `testLabels`.
   */
  testSelection?: TestSelection;
  labelOptions: LabelOptions;
  /** Party ids allowed to join; the job starts when all of them have. */
  parties: string[];
  jobId: string;
  loss: LossName;
  lambda: number;
  variant: Variant;
  /** undefined: the data-scaled default (see defaultRho). */
  rho?: number;
  alpha: number;
  /** Anderson acceleration's memory for the exact form without noise (0: off; docs/rho.md). */
  anderson: number;
  maxRounds: number;
  tolerance: { abs: number; rel: number };
  /** Evaluate on the test set every k rounds (0: only at the end). */
  evalEvery: number;
  /** Directory for trace.jsonl and summary.json. */
  out: string;
  /** An unauthenticated connection must say hello within this time. */
  helloTimeoutMs: number;
  /** A party that loses its connection during ADMM training may rejoin within this time (0: never). */
  rejoinTimeoutMs: number;
  /** A party must answer each request (share, scores, ready) within this time. */
  roundTimeoutMs: number;
  /** Ping every connected party this often; one missed pong drops the connection. */
  heartbeatMs: number;
  /** Largest number of rows a party may declare, relative to the label file (bounds memory and frame size). */
  maxRowsFactor: number;
  /** Each party's secret; when given, a hello must carry a valid proof (see helloProof). */
  credentials?: Record<string, string>;
  /** When to write a checkpoint (checkpoint.ts). */
  checkpoint: CheckpointPolicy;
  /** Continue the job checkpointed in `out` instead of starting one. */
  resume: boolean;
  /** Whether --job was given (a resume then checks it against the checkpoint). */
  jobIdGiven?: boolean;
  /**
   * Label differential privacy: randomized response on the training labels with this epsilon,
   * once per job (kept in `out`, see label-flips.ts), and the loss corrected for the flips.
   * Logistic loss only.
   */
  labelPrivacy?: LabelPrivacyConfig;
  /**
   * Class weights of the logistic loss (--class-weight): balanced (N / (2 N_c) on the aligned
   * training rows) or by raw label value; none: unweighted.
   */
  classWeight?: ClassWeightSpec;
  /** Serve wss:// with this certificate and key (PEM); with clientCa, require client certificates from that CA. */
  tls?: ServerTls;
  /** The job's HTTP port (dashboard, metrics, health); none: no HTTP server. */
  http?: HttpConfig;
  /** --psi-cache: keep the intersection's keys and points per party between jobs (alignment/psi-caches.ts). */
  psiCache?: PsiCacheFlags;
}
