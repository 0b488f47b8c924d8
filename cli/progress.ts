/** One updating progress line on stderr (a TTY redraws it; otherwise a line per change). */
export class Progress {
  private last = '';
  private readonly tty = process.stderr.isTTY === true;
  constructor(private readonly quiet = false) {}

  update(text: string): void {
    if (this.quiet || text === this.last) return;
    this.last = text;
    if (this.tty) process.stderr.write(`\r\x1b[2K${text}`);
    else process.stderr.write(`${text}\n`);
  }

  done(): void {
    if (this.tty && !this.quiet && this.last) process.stderr.write('\n');
    this.last = '';
  }
}
