import type http from 'node:http';
import { SwarmError } from '../protocol/index.js';
import { readBody as readBodyMax, send, sendError } from './http.js';
import type { RunManager, StartRun } from './runs.js';

const MAX_BODY = 256 * 1024 * 1024;
const readBody = (req: http.IncomingMessage): Promise<string> => readBodyMax(req, MAX_BODY);

/**
 * Control API routes for runs, mounted by the control server:
 * POST /runs (start; body StartRun) -> 202 {run, dir}; GET /runs -> {runs}; GET /runs/:id -> progress
 * or outcome; POST /runs/:id/wait {timeout_ms} -> the run once done (or its progress at the timeout);
 * POST /runs/:id/cancel {reason?} -> the run, ended with verdict `cancelled` (`cancelled: false` if it had ended).
 * Returns false when the path is not a runs route.
 */
export async function handleRuns(runs: RunManager | undefined, req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<boolean> {
  if (url.pathname !== '/runs' && !url.pathname.startsWith('/runs/')) return false;
  try {
    if (!runs) throw new SwarmError('SWARM_ERR_CONFIG', 'runs need a hub with a state directory (journal on)');
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    if (req.method === 'POST' && parts.length === 1) {
      const body = JSON.parse((await readBody(req)) || '{}') as StartRun;
      send(res, 202, await runs.start(body));
      return true;
    }
    if (req.method === 'GET' && parts.length === 1) { send(res, 200, { runs: runs.list() }); return true; }
    const id = parts[1]!;
    if (req.method === 'GET' && parts.length === 2) {
      const v = runs.get(id);
      if (!v) throw new SwarmError('SWARM_ERR_UNKNOWN_RUN', `no run ${id}`);
      send(res, 200, v);
      return true;
    }
    if (req.method === 'POST' && parts.length === 3 && parts[2] === 'cancel') {
      const body = JSON.parse((await readBody(req)) || '{}') as { reason?: unknown };
      const reason = typeof body.reason === 'string' && body.reason.trim() ? body.reason.trim().slice(0, 1000) : undefined;
      send(res, 200, await runs.cancel(id, reason));
      return true;
    }
    if (req.method === 'POST' && parts.length === 3 && parts[2] === 'wait') {
      const body = JSON.parse((await readBody(req)) || '{}') as { timeout_ms?: number };
      const done = runs.wait(id);
      if (done) await Promise.race([done, new Promise((r) => setTimeout(r, Math.min(600_000, body.timeout_ms ?? 30_000)))]);
      const v = runs.get(id);
      if (!v) throw new SwarmError('SWARM_ERR_UNKNOWN_RUN', `no run ${id}`);
      send(res, 200, v);
      return true;
    }
    send(res, 404, { code: 'SWARM_ERR_CONFIG', msg: `no route ${req.method} ${url.pathname}` });
  } catch (err) {
    sendError(res, err);
  }
  return true;
}
