// The error `simulate` raises itself: a flag combination it cannot run, or a child process
// that failed. Not a ConfigError on purpose: the CLI's yargs handler prints usage help for
// those, and these messages stand alone. The exit code passes on the child's 64 / 65.
import { AdmmError } from '@admm-share/core';

export class SimulationError extends AdmmError {
  override readonly name = 'SimulationError';
  constructor(
    message: string,
    override readonly exitCode: number,
  ) {
    super('ERR_SIMULATION', message);
  }
}
