/**
 * Where Ollama listens, read the way Ollama itself reads OLLAMA_HOST: `host`, `host:port`, `:port`,
 * `http://host[:port][/path]` or `https://…`. Without a scheme the port defaults to 11434; with
 * `http://` or `https://` and no port, to 80 or 443 (as in Ollama's envconfig.Host).
 */
export const DEFAULT_OLLAMA_URL = 'http://127.0.0.1:11434';

/** Base URL (no trailing slash) for an OLLAMA_HOST value; undefined or blank gives the default. */
export function ollamaBaseUrl(value: string | undefined): string {
  const s = (value ?? '').trim();
  if (s === '') return DEFAULT_OLLAMA_URL;
  let scheme = 'http';
  let rest = s;
  let defaultPort = '11434';
  const i = s.indexOf('://');
  if (i >= 0) {
    scheme = s.slice(0, i).toLowerCase();
    rest = s.slice(i + 3);
    if (scheme === 'http') defaultPort = '80';
    else if (scheme === 'https') defaultPort = '443';
  }
  const slash = rest.indexOf('/');
  const hostport = slash >= 0 ? rest.slice(0, slash) : rest;
  const pathPart = slash >= 0 ? rest.slice(slash).replace(/\/+$/, '') : '';
  let host = '127.0.0.1';
  let port = defaultPort;
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(hostport);
  if (m) {
    if (m[1]) host = m[1];
    if (m[2]) port = m[2];
  } else if (hostport) host = hostport;
  const n = Number(port);
  if (!Number.isInteger(n) || n < 0 || n > 65535) return DEFAULT_OLLAMA_URL;
  // A server bound to "all interfaces" is reached on loopback by a client on the same host.
  if (host === '0.0.0.0') host = '127.0.0.1';
  if (host === '[::]') host = '[::1]';
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  return `${scheme}://${host}:${port}${pathPart}`;
}
