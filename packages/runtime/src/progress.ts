/** A one-line progress bar on an interactive terminal; silent otherwise. */
export class Progress {
  private readonly tty: boolean;
  private drawn = false;
  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.tty = Boolean(stream.isTTY) && !process.env.CI;
  }

  update(round: number, total: number, objective: number): void {
    if (!this.tty) return;
    const width = 30;
    const filled = Math.round((width * Math.min(round, total)) / total);
    const bar = '#'.repeat(filled) + '.'.repeat(width - filled);
    this.stream.write(`\r[${bar}] round ${round}/${total}  objective ${objective.toFixed(8)}`);
    this.drawn = true;
  }

  /** `label`: a bar of done out of total, with the rate since `since` (a performance.now()). */
  fraction(label: string, done: number, total: number, since: number): void {
    if (!this.tty) return;
    const width = 30;
    const filled = Math.round((width * Math.min(done, total)) / Math.max(total, 1));
    const rate = done / Math.max((performance.now() - since) / 1000, 1e-3);
    this.stream.write(`\r\x1b[K[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${label} ${done}/${total} (${Math.round(rate)}/s)`);
    this.drawn = true;
  }

  /** A callback that draws `label`'s bar as work reports done of total, and clears it when all is done. */
  counter(label: string): (done: number, total: number) => void {
    const since = performance.now();
    return (done, total) => (done < total ? this.fraction(label, done, total, since) : this.done());
  }

  message(text: string): void {
    if (!this.tty) return;
    this.stream.write(`\r\x1b[K${text}`);
    this.drawn = true;
  }

  done(): void {
    if (this.drawn) this.stream.write('\r\x1b[K');
    this.drawn = false;
  }
}
