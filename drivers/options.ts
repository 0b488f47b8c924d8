import { SwarmError } from '../protocol/index.js';

/** Reject options a driver does not know (a typo must not pass silently). */
export function checkKnown(driver: string, o: Record<string, string>, known: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new SwarmError('SWARM_ERR_CONFIG', `unknown ${driver} option "${k}" (known: ${known.join(', ')})`);
  }
}

/** An integer option >= min, or the default. */
export function intOption(driver: string, o: Record<string, string>, key: string, def: number, min = 0): number {
  const v = o[key];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new SwarmError('SWARM_ERR_CONFIG', `${driver} option ${key} must be an integer >= ${min}, got "${v}"`);
  return n;
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
