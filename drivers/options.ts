import { SwarmError } from '../protocol/errors.js';
import { describe } from '../protocol/check.js';
import { DRIVER_OPTIONS, DRIVER_OPTION_CHECKS } from '#gen/driver-option-checks.js';
import type { DriverOptionSchemas, DriverOptions } from './option-schemas.js';

/** Options a driver takes in any case (`raw=TRUE`), lowered before the check. */
const CASELESS: Readonly<Record<string, ReadonlySet<string>>> = { ollama: new Set(['raw', 'check_model']) };

/**
 * A driver's `--driver-opt` settings, checked against its schema (drivers/option-schemas.ts, compiled
 * into option-checks.gen.js): numbers converted, defaults filled; an empty value counts as not given.
 */
export function driverOptions<K extends keyof typeof DriverOptionSchemas>(driver: string, raw: Record<string, string>): DriverOptions<K> {
  const check = DRIVER_OPTION_CHECKS[driver];
  if (!check) throw new SwarmError('SWARM_ERR_CONFIG', `no option schema for driver "${driver}"`);
  const caseless = CASELESS[driver];
  // Without a prototype: a key named __proto__ is a key like any other here, and so refused.
  const o: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(raw)) if (v !== '') o[k] = caseless?.has(k) ? v.toLowerCase() : v;
  if (check(o)) return o as DriverOptions<K>;
  const e = check.errors?.[0];
  if (e?.propertyName !== undefined) {
    throw new SwarmError('SWARM_ERR_CONFIG', `unknown ${driver} option "${e.propertyName}" (known: ${DRIVER_OPTIONS[driver]!.keys.map((k) => k.key).join(', ')})`);
  }
  const key = e?.instancePath.split('/')[1];
  throw new SwarmError('SWARM_ERR_CONFIG', `${driver} option ${describe(check.errors)}${key !== undefined ? `, got ${JSON.stringify(raw[key])}` : ''}`);
}

/** Sleep that an AbortSignal cuts short (resolves false when aborted). */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(!signal?.aborted);
  return new Promise((resolve) => {
    if (signal?.aborted) { resolve(false); return; }
    const onAbort = (): void => { clearTimeout(t); resolve(false); };
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(true); }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
