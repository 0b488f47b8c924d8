import http from 'node:http';
import { SwarmError, isErrorCode } from '../protocol/index.js';
import type { HubFile } from './state.js';

/** Call the hub's control API; errors come back as SwarmError with the hub's code. */
export function call<T>(hub: HubFile, method: string, path: string, body?: unknown, timeoutMs = 30_000): Promise<T> {
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
    req.on('error', (err) => reject(err instanceof SwarmError ? err : new SwarmError('SWARM_ERR_NO_SWARM', `cannot reach the hub's control API: ${err.message}`)));
    if (data !== undefined) req.write(data);
    req.end();
  });
}
