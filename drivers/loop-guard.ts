/**
 * The loop guard of the spec, section 10.2: an engine that prints the same line over and over is stuck.
 * Fed the output stream chunk by chunk; `push` returns true once one non-empty line has repeated
 * more than `maxRepeats` times in a row.
 */
export class LoopGuard {
  private partial = '';
  private last: string | undefined;
  private repeats = 0;
  private readonly maxRepeats: number;

  constructor(opts: { maxRepeats?: number } = {}) { this.maxRepeats = opts.maxRepeats ?? 5; }

  push(chunk: string): boolean {
    // No line ends in this chunk: nothing to compare yet (most short answers are one such chunk).
    if (chunk.indexOf('\n') < 0) {
      this.partial += chunk;
      if (this.partial.length > 64 * 1024) this.partial = this.partial.slice(-64 * 1024);
      return false;
    }
    const lines = (this.partial + chunk).split('\n');
    this.partial = lines.pop() ?? '';
    // A runaway line with no newline at all is not a repeated line; keep the buffer bounded.
    if (this.partial.length > 64 * 1024) this.partial = this.partial.slice(-64 * 1024);
    for (const raw of lines) {
      const line = raw.trim();
      if (!line) continue;
      if (line === this.last) this.repeats++;
      else { this.last = line; this.repeats = 1; }
      if (this.repeats > this.maxRepeats) return true;
    }
    return false;
  }
}
