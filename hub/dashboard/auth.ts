import crypto from 'node:crypto';
import type http from 'node:http';

/** A one-time ticket is good for this long: long enough to open a browser, too short to leak usefully. */
export const TICKET_MS = 60_000;
/** A dashboard session (its cookie) lasts this long. */
export const SESSION_MS = 12 * 3600_000;
/** Sessions held at once; the oldest goes first. */
const MAX_SESSIONS = 64;
const MAX_TICKETS = 64;

const secret = (): string => crypto.randomBytes(24).toString('base64url');

/**
 * Browser access to the control API. The bearer token never reaches the browser: `swarm dashboard`
 * (holding the token) asks for a ticket; the browser trades it once, within a minute, for an HttpOnly
 * SameSite=Strict session cookie. Cookie-borne requests must also come from the page itself (Host
 * and Origin checks against DNS rebinding and other local pages) and carry `x-swarm-dashboard` when
 * they change anything (a header no other site can add without a preflight this server refuses).
 * Over plain HTTP (loopback only) the Host must name this machine; over HTTPS the certificate does
 * that (a rebound name fails the browser's check), so any Host the certificate serves is fine, and
 * the cookie is `Secure`.
 */
export class DashboardAuth {
  private readonly tickets = new Map<string, number>();
  private readonly sessions = new Map<string, number>();
  /** Cookies are not kept apart by port: two hubs on one host need two names. */
  readonly cookie: string;

  constructor(port: number, private readonly secure = false, private readonly now: () => number = Date.now) {
    this.cookie = `swarm_dash_${port}`;
  }

  /** A new single-use ticket. */
  ticket(): { ticket: string; expires_in_ms: number } {
    this.prune();
    if (this.tickets.size >= MAX_TICKETS) this.tickets.delete(this.tickets.keys().next().value!);
    const t = secret();
    this.tickets.set(t, this.now() + TICKET_MS);
    return { ticket: t, expires_in_ms: TICKET_MS };
  }

  /** Trade a ticket (once) for a session cookie header; undefined when it is unknown, used or late. */
  redeem(ticket: string): string | undefined {
    const until = this.tickets.get(ticket);
    this.tickets.delete(ticket);
    if (until === undefined || until < this.now()) return undefined;
    this.prune();
    if (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    const sid = secret();
    this.sessions.set(sid, this.now() + SESSION_MS);
    return `${this.cookie}=${sid}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(SESSION_MS / 1000)}${this.secure ? '; Secure' : ''}`;
  }

  /** True when the request carries a live session cookie and comes from the dashboard's own page. */
  authorized(req: http.IncomingMessage): boolean {
    const sid = readCookie(req.headers.cookie, this.cookie);
    if (!sid) return false;
    const until = this.sessions.get(sid);
    if (until === undefined || until < this.now()) return false;
    if (!req.headers.host || (!this.secure && !loopbackHost(req.headers.host))) return false;
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `${this.secure ? 'https' : 'http'}://${req.headers.host}`) return false;
    const safe = req.method === 'GET' || req.method === 'HEAD';
    return safe || req.headers['x-swarm-dashboard'] === '1';
  }

  private prune(): void {
    const now = this.now();
    for (const [k, until] of this.tickets) if (until < now) this.tickets.delete(k);
    for (const [k, until] of this.sessions) if (until < now) this.sessions.delete(k);
  }
}

/** One cookie's value from a Cookie header. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** A Host header naming this machine by a loopback address or `localhost` (not a rebound DNS name). */
export function loopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d+$/, '');
  return name === 'localhost' || name === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(name);
}
