import fs from 'node:fs';

/** Log bytes held while a write is under way; past it new lines are dropped (and counted). */
const MAX_BUFFER = 4 * 1024 * 1024;

/**
 * A pino destination that can never block or kill the process: lines are buffered and written
 * asynchronously, one write at a time; a write that fails (ENOSPC, EIO, a closed pipe) drops what it
 * carried and counts it, instead of retrying (sonic-boom's exit hook retries with Atomics.wait, which
 * on a full disk hangs the whole process, /healthz included). Logging resumes once writes succeed.
 */
export class DroppingDestination {
  private buf: string[] = [];
  private bytes = 0;
  private writing = false;
  /** Lines dropped because a write failed or the buffer was full. */
  dropped = 0;
  lastError?: string;

  constructor(private readonly fd: number) {}

  write(line: string): boolean {
    if (this.bytes + line.length > MAX_BUFFER) { this.dropped++; return true; }
    this.buf.push(line);
    this.bytes += line.length;
    if (!this.writing) this.kick();
    return true;
  }

  private kick(): void {
    if (!this.buf.length) return;
    const lines = this.buf.length;
    const data = Buffer.from(this.buf.join(''), 'utf8');
    this.buf = [];
    this.bytes = 0;
    this.writing = true;
    const step = (off: number): void => {
      fs.write(this.fd, data, off, data.length - off, null, (err, n) => {
        if (err) {
          this.dropped += lines;
          this.lastError = err.code ?? err.message;
        } else if (off + n < data.length) { step(off + n); return; }
        this.writing = false;
        // Later lines go out on the next turn, so a failing disk costs one syscall per turn, not a spin.
        if (this.buf.length) setImmediate(() => { if (!this.writing) this.kick(); });
      });
    };
    step(0);
  }

  /** Best effort at exit: one synchronous attempt, never a retry. */
  flushSync(): void {
    if (!this.buf.length) return;
    const data = this.buf.join('');
    this.buf = [];
    this.bytes = 0;
    try { fs.writeSync(this.fd, data); } catch { this.dropped++; }
  }

  /** pino calls flush(cb) on logger.flush(). */
  flush(cb?: (err?: Error) => void): void { cb?.(); }
}

/** Every destination made, so an exiting process can flush them once. */
const all = new Set<DroppingDestination>();
let hooked = false;

/** A dropping destination on `fd`; flushed once, synchronously and without retry, at exit. */
export function droppingDestination(fd: number): DroppingDestination {
  const d = new DroppingDestination(fd);
  all.add(d);
  if (!hooked) {
    hooked = true;
    process.once('exit', () => { for (const x of all) x.flushSync(); });
  }
  return d;
}

/** Log lines dropped so far by every destination of this process (for status). */
export function droppedLogLines(): number {
  let n = 0;
  for (const d of all) n += d.dropped;
  return n;
}
