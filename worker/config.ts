import type { z } from 'zod';
import { SwarmError } from '../protocol/errors.js';
import { describe } from '../protocol/check.js';
import type { WorkerConfigSchema } from './config-schema.js';
import { WORKER_CONFIG } from '#gen/worker-config-check.js';

/**
 * Worker settings, validated once against worker/config-schema.ts (through the code
 * protocol/gen-validators.ts compiles from it: worker processes load no zod), frozen; bounds that
 * follow from others are computed here, not set by hand.
 */

/** Settings as given: any group, any field, may be left out. */
export type WorkerConfigInput = z.input<typeof WorkerConfigSchema>;
type Parsed = z.output<typeof WorkerConfigSchema>;

/** Settings as used: every field set, derived bounds added, frozen. */
export interface WorkerConfig {
  readonly agent: Readonly<Parsed['agent']>;
  readonly client: Readonly<Parsed['client']>;
  /** `vetoWithinMs` is derived: half the lapse (a peer that heard the hub that recently vetoes a failover). */
  readonly hubMonitor: Readonly<Parsed['hubMonitor'] & { vetoWithinMs: number }>;
  readonly coordinator: Readonly<Parsed['coordinator']>;
  readonly sync: Readonly<Parsed['sync']>;
  readonly transport: Readonly<Parsed['transport']>;
  /** `bytes` is derived: half the line limit, so a HANDBACK frame's entries and envelope fit one line. */
  readonly handback: Readonly<Parsed['handback'] & { bytes: number }>;
}

const bad = (why: string) => new SwarmError('SWARM_ERR_CONFIG', `worker settings: ${why}`);

/** Validate worker settings (unknown names are errors), fill defaults, derive bounds, freeze. */
export function workerConfig(input: WorkerConfigInput = {}): WorkerConfig {
  // The check fills defaults in place: into a copy of the caller's groups.
  const c = (input && typeof input === 'object' && !Array.isArray(input)
    ? Object.fromEntries(Object.entries(input).map(([g, v]) => [g, v && typeof v === 'object' && !Array.isArray(v) ? { ...v } : v]))
    : input) as Parsed & { hubMonitor: { vetoWithinMs: number }; handback: { bytes: number } };
  if (!WORKER_CONFIG(c)) throw bad(describe(WORKER_CONFIG.errors));
  if (c.client.minBackoffMs > c.client.maxBackoffMs) throw bad('client.minBackoffMs: above client.maxBackoffMs');
  if (c.hubMonitor.suspicionMinMs > c.hubMonitor.suspicionMaxMs) throw bad('hubMonitor.suspicionMinMs: above hubMonitor.suspicionMaxMs');
  c.hubMonitor.vetoWithinMs = Math.floor(c.hubMonitor.lapseMs / 2);
  c.handback.bytes = Math.floor(c.agent.maxLine / 2);
  for (const g of Object.values(c)) Object.freeze(g);
  return Object.freeze(c);
}

/** The defaults, for parts built without a config (tests, sims). */
export const WORKER_DEFAULTS: WorkerConfig = workerConfig();

/** `defaults` with the fields `given` sets (undefined leaves a default alone). */
export function withDefaults<T extends object>(defaults: Readonly<T>, given: Partial<T> | undefined): T {
  const out = { ...defaults } as T;
  if (given) for (const [k, v] of Object.entries(given)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
