import { SwarmError } from '../protocol/index.js';

/**
 * Which failures to join a hub are refusals rather than bad luck: a wrong token, or a certificate
 * one side does not accept. Retrying those cannot help (the same credentials are presented again),
 * so a worker that has never joined stops on one with SWARM_ERR_AUTH instead of retrying forever.
 * Everything else (refused connection, reset, timeout, a hub restarting) stays transient.
 */

/** Node's codes for a hub certificate this worker does not trust (verification on our side). */
const UNTRUSTED = new Set([
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE', 'CERT_REVOKED', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID', 'HOSTNAME_MISMATCH',
]);

/** OpenSSL alerts by which the hub refuses this worker's certificate (or its absence) under mutual TLS. */
const REJECTED = /^ERR_SSL_(TLSV1|SSLV3|TLSV13)_ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|CERTIFICATE_REQUIRED|UNSUPPORTED_CERTIFICATE|ACCESS_DENIED)$/;

/** The refusal `err` stands for, or undefined when it is transient. `code` is Node's error code, or the hub's ERROR code. */
export function refusal(err: unknown): SwarmError | undefined {
  // A TLS link that cannot be verified (no CA, no pin) is a configuration no retry mends.
  if (err instanceof SwarmError) return err.code === 'SWARM_ERR_AUTH' || err.code === 'SWARM_ERR_CONFIG' ? err : undefined;
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return undefined;
  const msg = (err as Error).message;
  if (code === 'CERT_PIN_MISMATCH') return new SwarmError('SWARM_ERR_AUTH', `${msg}; --tls-pin is the SHA-256 fingerprint of the hub's certificate`, { cause: err });
  if (UNTRUSTED.has(code)) return new SwarmError('SWARM_ERR_AUTH', `the hub's certificate is not trusted: ${msg} (${code}); --tls-ca names the CA that signed it`, { cause: err });
  if (REJECTED.test(code)) return new SwarmError('SWARM_ERR_AUTH', `the hub refused this worker's certificate: ${msg} (${code}); --tls-cert/--tls-key, signed by the hub's --tls-ca`, { cause: err });
  return undefined;
}
