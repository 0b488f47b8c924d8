import type http from 'node:http';
import type { Logger } from 'pino';
import type { Answer } from '../answer.js';
import { isFinal } from '../task.js';
import type { Collector, Section } from './state.js';
import { SseClient, frame, type SseLimits } from './sse.js';
import type { Sample } from './types.js';

export interface FeedOptions extends SseLimits {
  /** How often changes go out (they are batched: one message per tick, only the sections that changed). */
  tickMs: number;
  /**
   * Task events mark sections changed as they happen; everything is also read this often, for what
   * the store does not see (heartbeats, roles, the hub's mode; joins and leaves come as events).
   */
  refreshMs: number;
  /** How often the queue chart gets a sample. */
  sampleMs: number;
  /** A message at least this often, so a page can tell the hub is alive. */
  pingMs: number;
  maxClients: number;
  /** Open node views (each streams one task's output). */
  maxTaskStreams: number;
  /** Output bytes one node view gets at most. */
  maxTaskBytes: number;
}

export const FEED_DEFAULTS: FeedOptions = {
  tickMs: 250, refreshMs: 1000, sampleMs: 1000, pingMs: 5000, maxBufferedBytes: 256 * 1024, stallMs: 15_000,
  maxClients: 64, maxTaskStreams: 64, maxTaskBytes: 256 * 1024,
};

const SECTIONS: readonly Section[] = ['hub', 'workers', 'queue', 'runs'];
const MAX_PROMPT = 64 * 1024;

interface TaskStream { client: SseClient; id: string; answer?: Answer; next: number; bytes: number }

/**
 * Fans the hub's state out to dashboards, driven by the store's event stream: a task event marks the
 * sections it touched, and each tick reads only those (all of them once per `refreshMs`), serialises
 * each once, and sends the same `patch` text (the sections whose text changed) to every client, so
 * a burst of events costs one message per tick. Nothing runs while no dashboard is open except the
 * once-a-second chart sample.
 */
export class Feed {
  private readonly clients = new Set<SseClient>();
  private readonly tasks = new Set<TaskStream>();
  private readonly last = new Map<string, string>();
  private samples: Sample[] = [];
  private seq = 0;
  private lastSentAt = 0;
  private lastFullAt = 0;
  private readonly dirty = new Set<Section>();
  private tickTimer?: NodeJS.Timeout;
  private readonly sampleTimer: NodeJS.Timeout;
  /** Section reads count the state actually read (a tick with nothing marked reads none). */
  readonly stats = { connected: 0, dropped: 0, skipped: 0, messages: 0, bytes: 0, reads: 0, maxMessage: 0 };

  constructor(private readonly c: Collector, private readonly o: FeedOptions, private readonly log: Logger) {
    this.c.sample();
    this.c.changed = (sections) => { if (this.tickTimer) for (const k of sections) this.dirty.add(k); };
    // The collector keeps the chart (bounded) for snapshots; samples wait for a tick only while one runs.
    this.sampleTimer = setInterval(() => { const x = this.c.sample(); if (this.tickTimer) this.samples.push(x); }, o.sampleMs);
    this.sampleTimer.unref();
  }

  get clientCount(): number { return this.clients.size; }
  /** Bytes waiting in the hub for each client (tests check the bound). */
  buffered(): number[] { return [...this.clients].map((c) => c.buffered); }

  /** A dashboard's event stream: a snapshot now, then patches. */
  addClient(res: http.ServerResponse): void {
    if (this.clients.size >= this.o.maxClients) { res.writeHead(503, { 'retry-after': '5' }).end(); return; }
    this.tick(true);
    const client = new SseClient(res, this.o, () => this.snapshot(), (c, why) => {
      if (this.clients.delete(c)) this.c.watch(-1);
      this.stats.skipped += c.skipped;
      if (why === 'stalled') { this.stats.dropped++; this.log.info({ skipped: c.skipped }, 'dashboard client dropped: not reading'); }
      this.idle();
    });
    this.clients.add(client);
    this.c.watch(1);
    this.stats.connected++;
    client.offer(this.snapshot());
    this.arm();
  }

  /** A node view: the task's prompt, then its output as it streams, then its result. */
  addTask(res: http.ServerResponse, id: string): boolean {
    const rec = this.c.task(id);
    if (!rec) return false;
    if (this.tasks.size >= this.o.maxTaskStreams) { res.writeHead(503, { 'retry-after': '5' }).end(); return true; }
    const ts: TaskStream = { id, next: 0, bytes: 0, client: undefined! };
    ts.client = new SseClient(res, this.o, () => frame('reset', {}), () => { if (this.tasks.delete(ts)) this.c.watch(-1); this.idle(); });
    const s = rec.spec;
    ts.client.offer(frame('task', {
      id, state: rec.state, attempts: rec.attempts, worker: rec.result?.worker ?? rec.worker, meta: s.meta ?? {}, role: s.role,
      prompt: s.prompt.length > MAX_PROMPT ? `${s.prompt.slice(0, MAX_PROMPT)}\n… (${s.prompt.length - MAX_PROMPT} more characters)` : s.prompt,
    }));
    this.tasks.add(ts);
    this.c.watch(1);
    this.pumpTask(ts);
    this.arm();
    return true;
  }

  close(): void {
    clearInterval(this.sampleTimer);
    if (this.tickTimer) clearInterval(this.tickTimer);
    for (const c of this.clients) c.close('hub closing', true);
    for (const t of this.tasks) t.client.close('hub closing', true);
  }

  private arm(): void {
    this.tickTimer ??= setInterval(() => this.tick(), this.o.tickMs);
  }

  private idle(): void {
    if (this.clients.size || this.tasks.size || !this.tickTimer) return;
    clearInterval(this.tickTimer);
    this.tickTimer = undefined;
  }

  private snapshot(): string {
    const parts = SECTIONS.map((k) => `"${k}":${this.last.get(k) ?? 'null'}`);
    return `event: snapshot\nid: ${this.seq}\ndata: {${parts.join(',')},"history":${JSON.stringify(this.c.history())}}\n\n`;
  }

  /** Read the sections marked changed (all of them when `full` or due); send what changed to everyone. */
  tick(full = false): void {
    const now = Date.now();
    if (full || now - this.lastFullAt >= this.o.refreshMs) { this.lastFullAt = now; for (const k of SECTIONS) this.dirty.add(k); }
    // A new chart sample carries the queue's tokens/s and latency.
    if (this.samples.length) this.dirty.add('queue');
    const changed: string[] = [];
    for (const k of SECTIONS) {
      if (!this.dirty.has(k)) continue;
      this.stats.reads++;
      const json = JSON.stringify(this.read(k));
      if (this.last.get(k) !== json) { this.last.set(k, json); changed.push(`"${k}":${json}`); }
    }
    this.dirty.clear();
    if (this.samples.length) { changed.push(`"samples":${JSON.stringify(this.samples)}`); this.samples = []; }
    let msg: string | undefined;
    if (changed.length) msg = `event: patch\nid: ${++this.seq}\ndata: {${changed.join(',')}}\n\n`;
    else if (now - this.lastSentAt >= this.o.pingMs) msg = frame('ping', { t: now });
    if (msg) {
      this.lastSentAt = now;
      if (msg.length > this.stats.maxMessage) this.stats.maxMessage = msg.length;
      for (const c of this.clients) {
        if (c.offer(msg) === 'sent') { this.stats.messages++; this.stats.bytes += msg.length; }
      }
    }
    for (const t of this.tasks) this.pumpTask(t);
  }

  private read(k: Section): unknown {
    switch (k) {
      case 'hub': return this.c.hubView();
      case 'workers': return this.c.workers();
      case 'queue': return this.c.queue();
      case 'runs': return this.c.runs();
    }
  }

  private pumpTask(t: TaskStream): void {
    const rec = this.c.task(t.id);
    if (!rec) { t.client.close('task gone'); return; }
    if (isFinal(rec)) {
      const text = rec.result?.text ?? '';
      t.client.offer(frame('done', {
        state: rec.state, worker: rec.result?.worker ?? rec.worker, error: rec.error,
        text: text.length > this.o.maxTaskBytes ? `${text.slice(0, this.o.maxTaskBytes)}\n… (truncated)` : text,
      }));
      t.client.close('task finished');
      return;
    }
    const answer = this.c.answer(rec);
    if (answer !== t.answer) {
      // A new attempt (or the task went back to the queue): its output starts over.
      if (t.answer || t.bytes) t.client.offer(frame('reset', { state: rec.state, worker: rec.worker, attempts: rec.attempts }));
      t.answer = answer; t.next = 0; t.bytes = 0;
    }
    if (!answer || t.bytes >= this.o.maxTaskBytes) return;
    const { text, next } = answer.since(t.next);
    if (!text) return;
    t.next = next;
    const piece = text.slice(0, this.o.maxTaskBytes - t.bytes);
    t.bytes += piece.length;
    t.client.offer(frame('text', { append: piece, state: rec.state, worker: rec.worker }));
  }
}
