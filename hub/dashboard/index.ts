import fs from 'node:fs';
import path from 'node:path';
import type http from 'node:http';
import type { Logger } from 'pino';
import { SwarmError } from '../../protocol/index.js';
import { send } from '../http.js';
import { DashboardAuth } from './auth.js';
import { FEED_DEFAULTS, Feed, type FeedOptions } from './feed.js';
import { Collector, type DashSource } from './state.js';
import { APP_JS } from './assets/app.js';
import { PAGE_CSS, pageHtml } from './assets/page.js';

export type { DashState, DashPatch, WorkerRow, RunRow, NodeRow, QueueView, HubView, Sample } from './types.js';
export type { FeedOptions } from './feed.js';
export type { DashSource } from './state.js';

const PAGE_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};
const PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/** A report is our own page without scripts: it may not run any. */
const REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'";

/**
 * The live dashboard on the control port: the page, its event stream (`/dashboard/events`), node
 * views (`/dashboard/task?id=`), run reports, and the one-time tickets that let a browser in.
 */
export class Dashboard {
  readonly auth: DashboardAuth;
  readonly feed: Feed;
  private readonly collector: Collector;

  /** `secure`: the control API serves HTTPS (the session cookie is then Secure; see DashboardAuth). */
  constructor(src: DashSource, port: number, log: Logger, opts: Partial<FeedOptions> = {}, secure = false) {
    this.auth = new DashboardAuth(port, secure);
    this.collector = new Collector(src);
    this.feed = new Feed(this.collector, { ...FEED_DEFAULTS, ...opts }, log);
  }

  /** Cookie-borne access to the control API's other routes (the page's controls use them). */
  authorized(req: http.IncomingMessage): boolean { return this.auth.authorized(req); }

  /** Handle a `/dashboard…` request; `bearer` says the request carried the control token. */
  route(req: http.IncomingMessage, res: http.ServerResponse, url: URL, bearer: boolean): void {
    const p = url.pathname;
    if (p === '/dashboard/ticket' && req.method === 'POST') {
      if (!bearer) throw new SwarmError('SWARM_ERR_AUTH', 'a ticket needs the bearer token');
      const t = this.auth.ticket();
      send(res, 200, { ...t, path: `/dashboard?ticket=${t.ticket}` });
      return;
    }
    const ticket = url.searchParams.get('ticket');
    if (p === '/dashboard' && ticket !== null && req.method === 'GET') {
      const cookie = this.auth.redeem(ticket);
      if (!cookie) return page(res, 401, denied('This link was used already or has expired.'));
      // Redirect: the ticket leaves the address bar and the history.
      res.writeHead(303, { ...PAGE_HEADERS, 'set-cookie': cookie, location: '/dashboard' }).end();
      return;
    }
    if (!bearer && !this.auth.authorized(req)) {
      if (p === '/dashboard' && req.method === 'GET') return page(res, 401, denied('Open the link that `swarm dashboard` prints.'));
      throw new SwarmError('SWARM_ERR_AUTH', 'missing or wrong bearer token or dashboard session');
    }
    if (req.method !== 'GET') throw new SwarmError('SWARM_ERR_CONFIG', `no route ${req.method} ${p}`);
    switch (p) {
      case '/dashboard': return page(res, 200, pageHtml());
      case '/dashboard/app.js': return asset(res, 'text/javascript; charset=utf-8', APP_JS);
      case '/dashboard/app.css': return asset(res, 'text/css; charset=utf-8', PAGE_CSS);
      case '/dashboard/state': return send(res, 200, this.collector.state());
      case '/dashboard/events': return this.feed.addClient(res);
      case '/dashboard/task': {
        const id = url.searchParams.get('id') ?? '';
        if (!this.feed.addTask(res, id)) throw new SwarmError('SWARM_ERR_UNKNOWN_TASK', `no task ${id}`);
        return;
      }
    }
    const m = /^\/dashboard\/report\/([\w.:-]+)$/.exec(p);
    if (m) return this.report(res, decodeURIComponent(m[1]!));
    throw new SwarmError('SWARM_ERR_CONFIG', `no route GET ${p}`);
  }

  private report(res: http.ServerResponse, run: string): void {
    const dir = this.collector.runDir(run);
    if (!dir) throw new SwarmError('SWARM_ERR_UNKNOWN_RUN', `no run ${run} on this hub`);
    fs.readFile(path.join(dir, 'report.html'), (err, body) => {
      if (err) { send(res, 404, { code: 'SWARM_ERR_UNKNOWN_RUN', msg: `run ${run} has no report yet` }); return; }
      res.writeHead(200, { ...PAGE_HEADERS, 'content-type': 'text/html; charset=utf-8', 'content-security-policy': REPORT_CSP, 'content-length': body.length });
      res.end(body);
    });
  }

  close(): void {
    this.feed.close();
    this.collector.close();
  }
}

function page(res: http.ServerResponse, status: number, html: string): void {
  res.writeHead(status, { ...PAGE_HEADERS, 'content-type': 'text/html; charset=utf-8', 'content-security-policy': PAGE_CSP, 'content-length': Buffer.byteLength(html) });
  res.end(html);
}

function asset(res: http.ServerResponse, type: string, body: string): void {
  res.writeHead(200, { ...PAGE_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function denied(why: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>swarm dashboard</title><link rel="icon" href="data:,"></head>`
    + `<body style="font:15px system-ui,sans-serif;margin:3em"><h1>swarm dashboard</h1><p>${why}</p><p>Run <code>swarm dashboard</code> for a new one-time link.</p></body></html>`;
}
