import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { DashPatch, DashState } from '../hub/dashboard/types.js';
import type { ControlTarget } from './http.js';

/** One server-sent event. */
export interface SseEvent { event: string; id?: string; data: string }

/**
 * Splits a server-sent-events byte stream into events (the parser does no I/O). Keeps a partial
 * line across chunks; a line longer than `maxLine` is an error (the hub never sends one).
 */
export class SseParser {
  private buf = '';
  private cur: { event?: string; id?: string; data: string[] } = { data: [] };
  constructor(private readonly sink: (e: SseEvent) => void, private readonly maxLine = 64 * 1024 * 1024) {}

  push(chunk: string): void {
    this.buf += chunk;
    let i: number;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i).replace(/\r$/, '');
      this.buf = this.buf.slice(i + 1);
      this.line(line);
    }
    if (this.buf.length > this.maxLine) throw new Error(`event stream line over ${this.maxLine} bytes`);
  }

  private line(line: string): void {
    if (line === '') {
      if (this.cur.data.length) this.sink({ event: this.cur.event ?? 'message', id: this.cur.id, data: this.cur.data.join('\n') });
      this.cur = { data: [] };
      return;
    }
    if (line.startsWith(':')) return;
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
    if (field === 'event') this.cur.event = value;
    else if (field === 'data') this.cur.data.push(value);
    else if (field === 'id') this.cur.id = value;
  }
}

/** The dashboard's state as a `snapshot` and `patch`es rebuild it. */
export function applyEvent(s: DashState | undefined, e: SseEvent): DashState | undefined {
  if (e.event === 'snapshot') return JSON.parse(e.data) as DashState;
  if (e.event !== 'patch' || !s) return s;
  const p = JSON.parse(e.data) as DashPatch;
  const { samples, ...rest } = p;
  return { ...s, ...rest, history: samples ? [...s.history, ...samples].slice(-300) : s.history };
}

/**
 * Follow the hub's dashboard event stream with the bearer token; reconnects (fresh snapshot) after
 * a drop until `stop()` is called. `onState` gets the state after every message; `onLink` the link state.
 */
export function follow(hub: ControlTarget, onState: (s: DashState) => void, onLink: (up: boolean, why?: string, status?: number) => void): { stop(): void } {
  const c = hub.control;
  let ca = c.ca;
  if (c.tls && ca === undefined && c.ca_file) { try { ca = fs.readFileSync(c.ca_file, 'utf8'); } catch { /* then the system's CAs */ } }
  // Over TLS the certificate is checked as `swarm status` checks it (cli/http.ts).
  const tls = c.tls ? { ca, servername: net.isIP(c.host) ? undefined : c.host } : {};
  let state: DashState | undefined;
  let req: http.ClientRequest | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const connect = () => {
    if (stopped) return;
    req = (c.tls ? https : http).get({
      host: c.host, port: c.port, path: '/dashboard/events', ...tls,
      headers: { accept: 'text/event-stream', ...(hub.token ? { authorization: `Bearer ${hub.token}` } : {}) },
    }, (res) => {
      if (res.statusCode !== 200) { res.resume(); retry(`HTTP ${res.statusCode}`, res.statusCode); return; }
      onLink(true);
      res.setEncoding('utf8');
      const parser = new SseParser((e) => { state = applyEvent(state, e); if (state && e.event !== 'ping') onState(state); });
      res.on('data', (c: string) => parser.push(c));
      res.on('end', () => retry('stream ended'));
      res.on('error', () => retry('stream error'));
    });
    req.on('error', (err) => retry(err.message));
  };
  /** `status`: the hub answered with it (it is there; a refused token, a restart), else it was not reached. */
  const retry = (why: string, status?: number) => {
    if (stopped || timer) return;
    onLink(false, why, status);
    timer = setTimeout(() => { timer = undefined; connect(); }, 1000);
  };
  connect();
  return { stop() { stopped = true; if (timer) clearTimeout(timer); req?.destroy(); } };
}
