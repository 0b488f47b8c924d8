/** How often a progress line is written where it cannot be redrawn (a log file, a pipe, CI). */
export const PLAIN_EVERY_MS = 5000;

interface ProgressIo { tty: boolean; write(s: string): void; now(): number }

const stderrIo = (): ProgressIo => ({ tty: process.stderr.isTTY === true, write: (s) => void process.stderr.write(s), now: () => Date.now() });

/**
 * One updating progress line on stderr. A terminal redraws it in place; anything else gets a line
 * at most every PLAIN_EVERY_MS, and the last state when done, so a log holds a few lines, not one
 * per redraw.
 */
export class Progress {
  private last = '';
  private pending = '';
  private writtenAt = -Infinity;
  private readonly io: ProgressIo;

  constructor(private readonly quiet = false, io?: ProgressIo) { this.io = io ?? stderrIo(); }

  update(text: string): void {
    if (this.quiet || text === this.last) return;
    this.last = text;
    if (this.io.tty) { this.io.write(`\r\x1b[2K${text}`); return; }
    const now = this.io.now();
    if (now - this.writtenAt < PLAIN_EVERY_MS) { this.pending = text; return; }
    this.writtenAt = now;
    this.pending = '';
    this.io.write(`${text}\n`);
  }

  done(): void {
    if (!this.quiet && this.io.tty && this.last) this.io.write('\n');
    if (!this.quiet && !this.io.tty && this.pending) this.io.write(`${this.pending}\n`);
    this.last = '';
    this.pending = '';
  }
}
