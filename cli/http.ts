import http from 'node:http';
import { SwarmError, isErrorCode } from '../protocol/index.js';
import type { HubFile } from './state.js';

/** Methods that may be sent twice: a retry cannot do anything twice. */
const IDEMPOTENT = new Set(['GET', 'HEAD']);

/**
 * Call the hub's control API; errors come back as SwarmError with the hub's code. An idempotent
 * request that fails because a pooled keep-alive socket was closed under it (the server closed the
 * idle connection as we reused it) is sent once more on a fresh socket.
 */
export async function call<T>(hub: HubFile, method: string, path: string, body?: unknown, timeoutMs = 30_000): Promise<T> {
  try {
    return await attempt<T>(hub, method, path, body, timeoutMs);
  } catch (err) {
    if (!(err instanceof StaleSocket) || !IDEMPOTENT.has(method.toUpperCase())) throw err instanceof StaleSocket ? err.error : err;
    return attempt<T>(hub, method, path, body, timeoutMs).catch((e: unknown) => { throw e instanceof StaleSocket ? e.error : e; });
  }
}

/** A reset on a reused socket: the request may not have reached the hub at all. */
class StaleSocket extends Error {
  constructor(readonly error: SwarmError) { super(error.message); }
}

function attempt<T>(hub: HubFile, method: string, path: string, body: unknown, timeoutMs: number): Promise<T> {
  const data = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: hub.control.host, port: hub.control.port, method, path, timeout: timeoutMs,
      headers: {
        ...(data !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
        ...(hub.token ? { authorization: `Bearer ${hub.token}` } : {}),
      },
    }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        if ((res.statusCode ?? 500) >= 400) {
          let code: SwarmError['code'] = 'SWARM_ERR_INTERNAL';
          let msg = text;
          try { const e = JSON.parse(text) as { code?: unknown; msg?: string }; if (isErrorCode(e.code)) code = e.code; msg = e.msg ?? text; } catch { /* not JSON */ }
          reject(new SwarmError(code, msg));
          return;
        }
        try { resolve((res.headers['content-type']?.includes('json') ? JSON.parse(text) : text) as T); } catch (e) { reject(e); }
      });
    });
    req.on('timeout', () => req.destroy(new SwarmError('SWARM_ERR_TIMEOUT', `control API did not answer ${method} ${path} in ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof SwarmError) { reject(err); return; }
      const e = new SwarmError('SWARM_ERR_NO_SWARM', `cannot reach the hub's control API: ${err.message}`);
      // Node's own pattern: a reused keep-alive socket that resets before any answer is safe to retry.
      reject(req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE') ? new StaleSocket(e) : e);
    });
    if (data !== undefined) req.write(data);
    req.end();
  });
}
