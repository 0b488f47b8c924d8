import type net from 'node:net';
import type { TLSSocket } from 'node:tls';

/**
 * Why a TLS link was refused, in words that name the cause, and who from. A client that rejects our
 * certificate under TLS 1.3 leaves the server a bare ECONNRESET on a socket whose address is already
 * gone, and OpenSSL reports a client that presented no certificate as UNABLE_TO_GET_ISSUER_CERT.
 */

/**
 * Make every socket's remote address readable after it closes: Node caches the peer's name the first
 * time it is read, and a TLS socket's `_parent` (the raw socket) keeps it. Call once per server.
 */
export function rememberRemotes(server: net.Server): void {
  server.on('connection', (raw: net.Socket) => { void raw.remoteAddress; });
}

/** `address:port` of a socket, live or already closed (with `rememberRemotes` on its server). */
export function remoteOf(s: net.Socket): string | undefined {
  const raw = (s as net.Socket & { _parent?: net.Socket })._parent;
  const addr = s.remoteAddress ?? raw?.remoteAddress;
  const port = s.remotePort ?? raw?.remotePort;
  return addr === undefined ? undefined : port === undefined ? addr : `${addr}:${port}`;
}

/** The cause of a failed TLS handshake on a server socket (`tlsClientError`), for the log. */
export function handshakeCause(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
    case 'ERR_SSL_PACKET_LENGTH_TOO_LONG':
      return 'plain TCP, not TLS: the client needs --tls (with --tls-ca or --tls-pin)';
    case 'ERR_SSL_HTTP_REQUEST':
      return 'a plain HTTP request: this port speaks TLS';
    case 'ECONNRESET':
      return 'the client closed the link in the handshake: most likely it does not trust this certificate (its --tls-ca or --tls-pin)';
    default:
      if (/^ERR_SSL_(TLSV1|SSLV3|TLSV13)_ALERT_/.test(err.code ?? '')) return `the client refused this certificate (${err.code})`;
      return `${err.code ?? 'TLS'}: ${err.message}`;
  }
}

/**
 * Why a mutual-TLS peer's certificate is not accepted, or undefined when it is. A peer that presented
 * none reads as UNABLE_TO_GET_ISSUER_CERT from OpenSSL: that is said as what it is.
 */
export function peerCertProblem(s: Partial<Pick<TLSSocket, 'authorized' | 'authorizationError' | 'getPeerCertificate'>>): string | undefined {
  if (s.authorized !== false) return undefined;
  const cert = s.getPeerCertificate?.();
  if (!cert || Object.keys(cert).length === 0) return 'no client certificate presented: the worker needs --tls-cert/--tls-key (signed by the hub\'s --tls-ca)';
  return `${String(s.authorizationError ?? 'not verified')}: its certificate is not signed by the hub's --tls-ca`;
}
