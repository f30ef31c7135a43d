// The worker thread of the coordinator's step (split-worker.ts): the upper part of each pass.
import { type TeamWorkerData, serveTeam } from '@admm-share/core';
import { type HalvesInit, halfCalls } from './anderson-halves.js';
import { type StepInit, stepCalls } from './step-split.js';

serveTeam<(HalvesInit | StepInit) & TeamWorkerData>((init) => (init.kind === 'anderson' ? halfCalls(init) : stepCalls(init)));
