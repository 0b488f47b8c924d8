import type { z } from 'zod';
import { SwarmError, isPlaceholderToken } from '../protocol/index.js';
import { describe } from '../protocol/check.js';
import type { HubConfigSchema } from './config-schema.js';
import { HUB_CONFIG } from '#gen/hub-config-check.js';

/** Hub settings: one strict schema with defaults (hub/config-schema.ts), validated once, frozen. */
export type HubConfig = Readonly<z.output<typeof HubConfigSchema>>;

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** True for addresses that only this machine can reach. */
export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith('127.');
}

/** Validate hub settings; refuses a non-loopback bind without a token. */
export function hubConfig(input: z.input<typeof HubConfigSchema>): HubConfig {
  // The generated check fills the defaults in place: into a copy, not the caller's object.
  const c = { ...input } as z.output<typeof HubConfigSchema>;
  if (!HUB_CONFIG(c)) throw new SwarmError('SWARM_ERR_CONFIG', `hub setting ${describe(HUB_CONFIG.errors)}`);
  if (!isLoopback(c.host) && !c.token) {
    throw new SwarmError('SWARM_ERR_INSECURE_BIND', `refusing to bind ${c.host} without a token (--token or SWARM_TOKEN)`);
  }
  if (!isLoopback(c.controlHost) && !c.token) {
    throw new SwarmError('SWARM_ERR_INSECURE_BIND', `refusing to bind the control API on ${c.controlHost} without a token`);
  }
  if (c.token && isPlaceholderToken(c.token) && (!isLoopback(c.host) || !isLoopback(c.controlHost))) {
    throw new SwarmError('SWARM_ERR_INSECURE_BIND', `refusing to bind ${isLoopback(c.host) ? c.controlHost : c.host} with a placeholder or short token: set a long random one (e.g. \`openssl rand -hex 24\`)`);
  }
  if (!isLoopback(c.controlHost) && !c.tlsCert) {
    // The token would cross the network in clear text.
    throw new SwarmError('SWARM_ERR_INSECURE_BIND', `refusing to serve the control API on ${c.controlHost} without TLS (--tls-cert and --tls-key)`);
  }
  if (c.tlsCa !== undefined && c.tlsCert === undefined) throw new SwarmError('SWARM_ERR_CONFIG', '--tls-ca needs --tls-cert and --tls-key');
  if ((c.tlsCert === undefined) !== (c.tlsKey === undefined)) {
    throw new SwarmError('SWARM_ERR_CONFIG', 'TLS needs both --tls-cert and --tls-key');
  }
  return Object.freeze(c);
}
