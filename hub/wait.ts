import type http from 'node:http';
import { SwarmError } from '../protocol/index.js';
import type { TaskStore } from './store.js';
import { isFinal, type TaskRecord } from './task.js';
import { unreadableArchived } from './archive.js';

export interface WaitOptions {
  /** Most /wait requests held at once; past it SWARM_ERR_TOO_MANY_WAITS. */
  maxWaits: number;
  /** Longest wait a client may ask for. */
  maxWaitMs: number;
  /** Answer bytes buffered per connection before waiting for the client to read. */
  chunkBytes: number;
  /** A client that reads nothing of its answer for this long is cut off. */
  stallMs: number;
}

export const WAIT_DEFAULTS: WaitOptions = { maxWaits: 1024, maxWaitMs: 10 * 60_000, chunkBytes: 64 * 1024, stallMs: 60_000 };

/** One task as /wait and GET /tasks/:id show it. */
export function taskView(r: TaskRecord): { id: string; state: string; text?: string; error?: unknown; receipt?: unknown; worker?: string; attempts: number } {
  return { id: r.id, state: r.state, text: r.result?.text, error: r.error, receipt: r.result?.receipt, worker: r.result?.worker ?? r.worker, attempts: r.attempts };
}

/**
 * POST /wait: long-poll until every named task is final or the timeout passes, then stream the
 * answer `{"complete":…,"tasks":[…]}` a chunk at a time, waiting for the client to read each (a
 * client that never reads holds one chunk, not the whole answer). Every wait unsubscribes when it
 * ends, however it ends.
 */
export class Waits {
  private active = 0;
  constructor(private readonly store: () => TaskStore, private readonly opts: WaitOptions = WAIT_DEFAULTS) {}

  /** Waits being held now. */
  get count(): number { return this.active; }

  /**
   * A waited-for task: hot, or already archived (a task final before its waiter read it may pass the
   * horizon meanwhile: the bytes bound evicts a few large results within seconds), read back from
   * the archive while the duplicate window remembers where it is.
   */
  private task(id: string): TaskRecord | undefined { return this.store().lookup(id); }

  /** Final: hot and final, or evicted (only final tasks leave the hot state); no archive read. */
  private final(id: string): boolean {
    const rec = this.store().queue.get(id);
    return rec ? isFinal(rec) : this.store().knows(id);
  }

  async handle(body: { ids?: unknown; timeout_ms?: unknown; stream?: unknown }, res: http.ServerResponse): Promise<void> {
    if (!Array.isArray(body.ids) || !body.ids.every((x) => typeof x === 'string')) throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', 'ids must be a list of task ids');
    const ids = body.ids as string[];
    for (const id of ids) if (!this.store().knows(id)) throw new SwarmError('SWARM_ERR_UNKNOWN_TASK', `unknown task ${id}`);
    const held = this.hold(body);
    try {
      if (body.stream === true) { await held.live(ids, res); return; }
      const pending = new Set(ids.filter((id) => !this.final(id)));
      if (pending.size > 0) await this.until(pending, held.timeout, res);
      if (res.destroyed) return;
      await this.stream(ids, res);
    } finally { held.release(); }
  }

  /**
   * Take one of the `maxWaits` places (SWARM_ERR_TOO_MANY_WAITS when none is left) for a wait of
   * `timeout_ms` (bounded by `maxWaitMs`); `release` gives it back. POST /tasks with `wait` takes
   * its place before it journals anything.
   */
  hold(o: { timeout_ms?: unknown }): { timeout: number; live(ids: string[], res: http.ServerResponse, head?: string): Promise<void>; release(): void } {
    if (this.active >= this.opts.maxWaits) throw new SwarmError('SWARM_ERR_TOO_MANY_WAITS', `${this.active} waits are held already (at most ${this.opts.maxWaits})`);
    const timeout = Math.max(0, Math.min(this.opts.maxWaitMs, typeof o.timeout_ms === 'number' ? o.timeout_ms : this.opts.maxWaitMs));
    this.active++;
    let held = true;
    return {
      timeout,
      live: (ids, res, head) => this.live(ids, timeout, res, head),
      release: () => { if (held) { held = false; this.active--; } },
    };
  }

  private until(pending: Set<string>, timeout: number, res: http.ServerResponse): Promise<void> {
    return new Promise<void>((resolve) => {
      const end = (): void => { clearTimeout(timer); off(); res.off('close', end); resolve(); };
      const timer = setTimeout(end, timeout);
      const off = this.store().subscribe((e) => {
        if ((e.type === 'done' || e.type === 'failed') && pending.delete(e.rec.id) && pending.size === 0) end();
      });
      res.once('close', end);
    });
  }

  private async stream(ids: string[], res: http.ServerResponse): Promise<void> {
    const task = (id: string): TaskRecord => this.task(id) ?? unreadableArchived(id);
    const complete = ids.every((id) => this.final(id));
    res.writeHead(200, { 'content-type': 'application/json' });
    const parts = function* (): Generator<string> {
      yield `{"complete":${complete},"tasks":[`;
      for (let i = 0; i < ids.length; i++) yield (i ? ',' : '') + JSON.stringify(taskView(task(ids[i]!)));
      yield ']}';
    };
    if (await this.writeAll(res, parts())) res.end();
  }

  /**
   * `stream: true`: NDJSON, one task per line as it becomes final (those final already first), then
   * at the end (all final, or the timeout) the tasks still open as they stand, and a last line
   * `{"complete":…,"final":n}`. The client reads results while the rest run, and needs no second
   * pass over a whole answer at the end. Lines written in one event-loop turn go out as one chunk;
   * a client that does not read holds the writer (ids wait, the store has the results). `head`, a
   * line, goes first.
   */
  private async live(ids: string[], timeout: number, res: http.ServerResponse, head = ''): Promise<void> {
    const task = (id: string): TaskRecord => this.task(id) ?? unreadableArchived(id);
    const open = new Set<string>();
    const ready: string[] = [];
    for (const id of ids) if (this.final(id)) ready.push(id); else open.add(id);
    let wake: (() => void) | undefined;
    let soon = false;
    const kick = (): void => {
      if (soon) return;
      soon = true;
      setImmediate(() => { soon = false; wake?.(); });
    };
    const off = this.store().subscribe((e) => {
      if ((e.type === 'done' || e.type === 'failed') && open.delete(e.rec.id)) { ready.push(e.rec.id); kick(); }
    });
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const onClose = (): void => wake?.();
    res.once('close', onClose);
    const deadline = Date.now() + timeout;
    try {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      const line = (id: string): string => `${JSON.stringify(taskView(task(id)))}\n`;
      let sent = 0;
      let first = head;
      const fresh = function* (): Generator<string> {
        if (first) { yield first; first = ''; }
        while (sent < ready.length) yield line(ready[sent++]!);
      };
      for (;;) {
        if (!(await this.writeAll(res, fresh())) || res.destroyed) return;
        if (open.size === 0 || timedOut) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(() => { timedOut = true; resolve(); }, Math.max(0, deadline - Date.now()));
        });
        wake = undefined;
        clearTimeout(timer);
      }
      const end = function* (): Generator<string> {
        for (const id of open) yield line(id);
        yield `${JSON.stringify({ complete: open.size === 0, final: ids.length - open.size })}\n`;
      };
      if (await this.writeAll(res, end())) res.end();
    } finally {
      off();
      clearTimeout(timer);
      res.off('close', onClose);
    }
  }

  /** Write `parts` in chunks of about `chunkBytes`, each waiting for the client as `write` does. False: the client is gone. */
  private async writeAll(res: http.ServerResponse, parts: Iterable<string>): Promise<boolean> {
    let chunk = '';
    for (const p of parts) {
      chunk += p;
      if (chunk.length >= this.opts.chunkBytes) { if (!(await this.write(res, chunk))) return false; chunk = ''; }
    }
    return chunk ? this.write(res, chunk) : !res.destroyed;
  }

  /** Write one chunk; if the socket's buffer is full, wait until the client reads. False: the client is gone (or stalled and cut off). */
  private write(res: http.ServerResponse, chunk: string): Promise<boolean> {
    if (res.destroyed) return Promise.resolve(false);
    if (res.write(chunk)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean): void => { clearTimeout(timer); res.off('drain', onDrain); res.off('close', onClose); resolve(ok); };
      const onDrain = (): void => done(true);
      const onClose = (): void => done(false);
      const timer = setTimeout(() => { res.destroy(); done(false); }, this.opts.stallMs);
      res.once('drain', onDrain);
      res.once('close', onClose);
    });
  }
}
