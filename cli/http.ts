import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { SwarmError, isErrorCode } from '../protocol/errors.js';
import { checkToken, envToken } from './state.js';
import { pemFile } from './file-option.js';

/**
 * Where a control API is and how to reach it: a local hub's hub.json, or a remote swarm named by
 * `--hub-url https://host:port` (SWARM_HUB_URL) with `--token` (SWARM_TOKEN) and the CA that signed
 * its certificate (`--tls-ca`, SWARM_TLS_CA).
 */
export interface ControlTarget {
  control: { host: string; port: number; tls?: boolean; ca?: string; ca_file?: string };
  token?: string;
}

/** The options every command that talks to a control API takes. */
export interface RemoteOptions { hubUrl?: string; token?: string; tlsCa?: string }

/** The remote control API the options (or the environment) name, or undefined for the local one. */
export function remoteTarget(o: RemoteOptions): ControlTarget | undefined {
  const raw = o.hubUrl ?? process.env.SWARM_HUB_URL;
  if (!raw) return undefined;
  let url: URL;
  try { url = new URL(raw); } catch { throw new SwarmError('SWARM_ERR_CONFIG', `--hub-url: not a URL: ${raw}`); }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new SwarmError('SWARM_ERR_CONFIG', `--hub-url: expected https://host:port, got ${raw}`);
  const tls = url.protocol === 'https:';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // A token in clear text across machines is the one thing to refuse: plain http only to loopback.
  if (!tls && !/^(127\.|::1$|localhost$)/.test(host)) throw new SwarmError('SWARM_ERR_INSECURE_BIND', `--hub-url: a remote control API is reached over https, not ${raw}`);
  const given = o.token ?? envToken();
  const token = given === undefined ? undefined : checkToken(given, 'the token given (--token, SWARM_TOKEN)');
  const caFile = o.tlsCa ?? process.env.SWARM_TLS_CA;
  let ca: string | undefined;
  // Checked as it is read, --tls-ca or SWARM_TLS_CA alike (a device was read until the process died).
  if (caFile) { try { ca = fs.readFileSync(pemFile(caFile), 'utf8'); } catch (err) { throw new SwarmError('SWARM_ERR_CONFIG', `--tls-ca: ${(err as Error).message}`); } }
  return { control: { host, port: Number(url.port || (tls ? 443 : 80)), tls, ca }, token };
}

/** Add --hub-url, --token and --tls-ca to a command that talks to the control API. */
export function remoteOptions<C extends { option(flags: string, description: string): C }>(cmd: C): C {
  return cmd
    .option('--hub-url <url>', 'a remote swarm\'s control API, https://host:port (env SWARM_HUB_URL); else the state directory\'s hub')
    .option('--token <secret>', 'the remote swarm\'s token (env SWARM_TOKEN)')
    .option('--tls-ca <file>', 'CA certificate that signed the remote control API\'s certificate (env SWARM_TLS_CA)');
}

/** The options of a command that talks to a swarm: its state directory's hub, or a remote one (remoteOptions). */
export function swarmOptions<C extends { option(flags: string, description: string): C }>(cmd: C): C {
  return remoteOptions(cmd).option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)');
}

/** Methods that may be sent twice: a retry cannot do anything twice. */
const IDEMPOTENT = new Set(['GET', 'HEAD']);

/**
 * Call the hub's control API; errors come back as SwarmError with the hub's code. An idempotent
 * request that fails because a pooled keep-alive socket was closed under it (the server closed the
 * idle connection as we reused it) is sent once more on a fresh socket.
 */
export async function call<T>(hub: ControlTarget, method: string, path: string, body?: unknown, timeoutMs = 30_000, onLine?: (v: unknown, raw?: string) => void): Promise<T> {
  try {
    return await attempt<T>(hub, method, path, body, timeoutMs, onLine);
  } catch (err) {
    if (!(err instanceof StaleSocket) || !IDEMPOTENT.has(method.toUpperCase())) throw err instanceof StaleSocket ? err.error : err;
    return attempt<T>(hub, method, path, body, timeoutMs, onLine).catch((e: unknown) => { throw e instanceof StaleSocket ? e.error : e; });
  }
}

/**
 * Like `call`, for an answer that may come as NDJSON (`application/x-ndjson`): each line is parsed
 * and given to `onLine` as it arrives, and this resolves with undefined at the end. Any other answer
 * resolves as `call` would (a hub that predates the streamed form answers in one piece).
 */
export function callLines<T>(hub: ControlTarget, method: string, path: string, body: unknown, onLine: (v: unknown, raw?: string) => void, timeoutMs = 30_000): Promise<T | undefined> {
  return call<T | undefined>(hub, method, path, body, timeoutMs, onLine);
}

/** Longest line of a streamed answer: a task's answer may be 16 MiB, JSON-escaped. */
const MAX_STREAM_LINE = 64 * 1024 * 1024;

/** A reset on a reused socket: the request may not have reached the hub at all. */
class StaleSocket extends Error {
  constructor(readonly error: SwarmError) { super(error.message); }
}

async function attempt<T>(hub: ControlTarget, method: string, path: string, body: unknown, timeoutMs: number, onLine?: (v: unknown, raw?: string) => void): Promise<T> {
  const data = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  // TLS loads only for a remote hub: every local `swarm submit` would pay for it at start.
  const https = hub.control.tls ? (await import('node:https')).default : undefined;
  // The protocol's line decoder (bounded lines, UTF-8 checked) for a streamed answer, only then.
  const codec = onLine ? await import('../protocol/line-decoder.js') : undefined;
  return new Promise((resolve, reject) => {
    const c = hub.control;
    let ca = c.ca;
    if (c.tls && ca === undefined && c.ca_file) { try { ca = fs.readFileSync(c.ca_file, 'utf8'); } catch { /* then the system's CAs */ } }
    // Over TLS the certificate is checked against the given CA (else the system's); an IP is checked
    // against the certificate's IP names, a name against its DNS names.
    const req = (https ?? http).request({
      host: c.host, port: c.port, method, path, timeout: timeoutMs,
      ...(c.tls ? { ca, servername: net.isIP(c.host) ? undefined : c.host } : {}),
      headers: {
        ...(data !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
        ...(hub.token ? { authorization: `Bearer ${hub.token}` } : {}),
      },
    }, (res) => {
      if (onLine && codec && (res.statusCode ?? 500) < 400 && res.headers['content-type']?.includes('ndjson')) {
        readLines(res, new codec.LineDecoder({
          frame: onLine,
          error: (code, msg) => { reject(new SwarmError(code, `streamed answer: ${msg}`)); res.destroy(); },
        }, MAX_STREAM_LINE), resolve as (v: undefined) => void, reject);
        return;
      }
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        if ((res.statusCode ?? 500) >= 400) {
          let code: SwarmError['code'] = 'SWARM_ERR_INTERNAL';
          let msg = text;
          try { const e = JSON.parse(text) as { code?: unknown; msg?: string }; if (isErrorCode(e.code)) code = e.code; msg = e.msg ?? text; } catch { /* not JSON */ }
          // An answer from Node's HTTP layer rather than the hub's routes (431 for a request line and
          // headers past 16 KiB) has no body: name its status, and a 4xx is the request's fault, not a bug.
          if (!msg.trim()) {
            msg = `the control API answered ${method} ${path.length > 120 ? `${path.slice(0, 120)}… (${path.length} characters)` : path} with ${res.statusCode} ${res.statusMessage ?? ''}`.trim();
            if (code === 'SWARM_ERR_INTERNAL' && (res.statusCode ?? 500) < 500) code = 'SWARM_ERR_CONFIG';
          }
          reject(new SwarmError(code, msg));
          return;
        }
        try { resolve((res.headers['content-type']?.includes('json') ? JSON.parse(text) : text) as T); } catch (e) { reject(e); }
      });
    });
    req.on('timeout', () => req.destroy(new SwarmError('SWARM_ERR_TIMEOUT', `control API did not answer ${method} ${path} in ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof SwarmError) { reject(err); return; }
      const tlsRefused = c.tls && /certificate|self.signed|altnames|SSL|TLS/i.test(`${err.code} ${err.message}`);
      // The worker port answers an HTTP request with a protocol ERROR line, which no HTTP parser reads.
      const notHttp = typeof err.code === 'string' && err.code.startsWith('HPE_');
      const e = notHttp
        ? new SwarmError('SWARM_ERR_CONFIG', `${c.host}:${c.port} does not answer in HTTP (${err.code}): it looks like the hub's worker port, not its control API; --hub-url takes the control port (\`control\` in hub.json, or "control API" in the hub's log)`)
        : tlsRefused
        ? new SwarmError('SWARM_ERR_AUTH', `the control API at ${c.host}:${c.port} is not trusted: ${err.message} (${err.code ?? 'TLS'}); give the CA that signed it with --tls-ca`)
        : new SwarmError('SWARM_ERR_NO_SWARM', `cannot reach the hub's control API at ${c.host}:${c.port}: ${err.message}`);
      // Node's own pattern: a reused keep-alive socket that resets before any answer is safe to retry.
      reject(req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE') ? new StaleSocket(e) : e);
    });
    if (data !== undefined) req.write(data);
    req.end();
  });
}

/** Feed a streamed answer to `lines`; an answer cut short rejects (so does a bad line: the decoder's sink). */
function readLines(res: http.IncomingMessage, lines: { push(chunk: Buffer): void }, resolve: (v: undefined) => void, reject: (e: unknown) => void): void {
  let cut = false;
  res.on('data', (chunk: Buffer) => lines.push(chunk));
  res.on('end', () => { if (!cut) resolve(undefined); });
  res.on('aborted', () => { cut = true; reject(new SwarmError('SWARM_ERR_NO_SWARM', 'the hub closed the answer before its end')); });
  res.on('error', (err) => { cut = true; reject(err); });
}
