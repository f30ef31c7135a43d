// The worker thread of the coordinator's step (split-worker.ts): its chunks of each pass, the step's and Anderson's.
import { type TeamWorkerData, serveTeam } from '@admm-share/core';
import { type SplitInit, andersonCalls } from './anderson-split.js';
import { type StepInit, stepCalls } from './step-split.js';

serveTeam<(SplitInit | StepInit) & TeamWorkerData>((init) => (init.kind === 'anderson' ? andersonCalls(init) : stepCalls(init)));
