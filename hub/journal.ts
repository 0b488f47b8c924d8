import fs from 'node:fs';
import type { Receipt, ErrorCode } from '../protocol/index.js';
import { SwarmError } from '../protocol/index.js';
import type { TaskSpec } from './task.js';

/** One line of `journal.ndjson`. */
export type JournalRecord =
  | { t: 'task'; spec: TaskSpec & { id: string }; at: number }
  | { t: 'result'; id: string; text: string; worker: string; attempt: number; receipt?: Receipt; at: number }
  | { t: 'fail'; id: string; error: { code: ErrorCode; msg: string }; attempts: number; at: number }
  | { t: 'meta'; kind: string; data: unknown; at: number };

export interface JournalOptions {
  /** fsync at most this often (0 = after every group commit). A process crash loses nothing either way. */
  fsyncMs: number;
}

/**
 * Append-only NDJSON journal with group commit: appends made in the same tick go out in one write(),
 * and each append's promise resolves once its bytes are in the file (the OS page cache). fsync runs on
 * a timer, not per message, so a power loss can lose up to `fsyncMs` of acknowledged work; a killed
 * process loses none.
 */
export class Journal {
  private pending: string[] = [];
  private waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  private flushing: Promise<void> | undefined;
  private scheduled = false;
  private dirty = false;
  private closed = false;
  private readonly syncTimer?: NodeJS.Timeout;

  private constructor(private readonly fd: number, private readonly opts: JournalOptions) {
    if (opts.fsyncMs > 0) {
      this.syncTimer = setInterval(() => { if (this.dirty) { this.dirty = false; fs.fsync(this.fd, () => {}); } }, opts.fsyncMs);
      this.syncTimer.unref();
    }
  }

  /** Open (or create) a journal and read back what it holds. A torn last line is cut off. */
  static open(file: string, opts: JournalOptions): { journal: Journal; records: JournalRecord[]; corrupt: number } {
    const records: JournalRecord[] = [];
    let corrupt = 0;
    let text = '';
    try { text = fs.readFileSync(file, 'utf8'); } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new SwarmError('SWARM_ERR_JOURNAL', `cannot read ${file}: ${(e as Error).message}`);
    }
    const end = text.lastIndexOf('\n') + 1;
    if (end < text.length) {
      // A crash mid-write left half a line: drop it so the next append starts on a clean line.
      fs.truncateSync(file, Buffer.byteLength(text.slice(0, end)));
      corrupt++;
    }
    for (const line of text.slice(0, end).split('\n')) {
      if (!line) continue;
      try {
        const r = JSON.parse(line) as JournalRecord;
        if (r && typeof r === 'object' && typeof r.t === 'string') records.push(r); else corrupt++;
      } catch { corrupt++; }
    }
    let fd: number;
    try { fd = fs.openSync(file, 'a', 0o600); } catch (e) {
      throw new SwarmError('SWARM_ERR_JOURNAL', `cannot open ${file}: ${(e as Error).message}`);
    }
    return { journal: new Journal(fd, opts), records, corrupt };
  }

  /** Append records; resolves once they are written. */
  append(...recs: JournalRecord[]): Promise<void> {
    if (this.closed) return Promise.reject(new SwarmError('SWARM_ERR_JOURNAL', 'journal is closed'));
    for (const r of recs) this.pending.push(JSON.stringify(r) + '\n');
    return new Promise((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => { this.scheduled = false; void this.flush(); });
  }

  private async flush(): Promise<void> {
    if (this.flushing) { await this.flushing; if (this.pending.length) this.schedule(); return; }
    if (!this.pending.length) return;
    const lines = this.pending;
    const waiters = this.waiters;
    this.pending = [];
    this.waiters = [];
    this.flushing = (async () => {
      try {
        await writeAll(this.fd, Buffer.from(lines.join(''), 'utf8'));
        if (this.opts.fsyncMs === 0) await new Promise<void>((r) => fs.fsync(this.fd, () => r()));
        else this.dirty = true;
        for (const w of waiters) w.resolve();
      } catch (e) {
        const err = new SwarmError('SWARM_ERR_JOURNAL', `journal write failed: ${(e as Error).message}`, { cause: e });
        for (const w of waiters) w.reject(err);
      }
    })();
    await this.flushing;
    this.flushing = undefined;
    if (this.pending.length) this.schedule();
  }

  /** Write what is pending, fsync, close. */
  async close(): Promise<void> {
    if (this.closed) return;
    while (this.pending.length || this.flushing) { await this.flushing; await this.flush(); }
    this.closed = true;
    if (this.syncTimer) clearInterval(this.syncTimer);
    try { fs.fsyncSync(this.fd); } catch { /* best effort */ }
    fs.closeSync(this.fd);
  }
}

function writeAll(fd: number, buf: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (off: number): void => {
      fs.write(fd, buf, off, buf.length - off, null, (err, n) => {
        if (err) return reject(err);
        if (off + n < buf.length) step(off + n); else resolve();
      });
    };
    step(0);
  });
}
