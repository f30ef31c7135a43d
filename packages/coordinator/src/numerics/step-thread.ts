// The worker thread of the coordinator's step (chunks.ts): its chunks of each pass, the step's and Anderson's.
import { type TeamThreadData, serveTeam } from '@admm-share/core/team';
import { type AndersonTeamInit, andersonCalls } from './anderson-team.js';
import { type StepInit, stepCalls } from './step-team.js';

serveTeam<(AndersonTeamInit | StepInit) & TeamThreadData>((init) => (init.kind === 'anderson' ? andersonCalls(init) : stepCalls(init)));
