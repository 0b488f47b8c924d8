import type http from 'node:http';
import { SwarmError, errorCodeOf } from '../protocol/index.js';

/**
 * Past `max` a body is read on and thrown away, so the client, still sending, gets the answer (413
 * SWARM_ERR_LINE_TOO_LONG) instead of a reset it cannot tell from a hub that died; past this many
 * times `max` the connection is cut.
 */
const DISCARD_FACTOR = 16;

/** Read a request body up to `max` bytes; a longer one is refused with SWARM_ERR_LINE_TOO_LONG (413) once it has arrived. */
export function readBody(req: http.IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= max) { parts.push(c); return; }
      parts.length = 0;
      if (size > max * DISCARD_FACTOR) { reject(tooLong(max)); req.destroy(); }
    });
    req.on('end', () => (size > max ? reject(tooLong(max)) : resolve(Buffer.concat(parts).toString('utf8'))));
    req.on('error', reject);
  });
}

const tooLong = (max: number): SwarmError => new SwarmError('SWARM_ERR_LINE_TOO_LONG', `request body over ${max} bytes (${Math.round(max / 1048576)} MiB): send it in several`);

/** A JSON reply (once; a second call on the same response is ignored). */
export function send(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** An error reply `{code, msg}` with the code's HTTP status; bad JSON or a malformed URL is 400, anything unknown 500. */
export function sendError(res: http.ServerResponse, err: unknown): void {
  if (err instanceof SwarmError) return send(res, err.status, { code: err.code, msg: err.message });
  if (err instanceof SyntaxError) return send(res, 400, { code: 'SWARM_ERR_BAD_JSON', msg: err.message });
  // decodeURIComponent of a path like /tasks/%E0%A4%A: the client's URL, not a bug of the hub.
  if (err instanceof URIError) return send(res, 400, { code: 'SWARM_ERR_BAD_PAYLOAD', msg: `malformed percent-encoding in the URL: ${err.message}` });
  send(res, 500, { code: errorCodeOf(err, 'SWARM_ERR_INTERNAL'), msg: (err as Error)?.message ?? String(err) });
}
