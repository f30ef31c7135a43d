// The upper half of each pass of Anderson acceleration on a large state (anderson-halves.ts).
import { workerData } from 'node:worker_threads';
import { serveHalf } from './anderson-halves.js';

serveHalf(workerData);
