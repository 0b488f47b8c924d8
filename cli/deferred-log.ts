import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from 'pino';

const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;
type Level = keyof typeof LEVELS;
interface Rec { chain: Record<string, unknown>[]; level: Level; args: unknown[]; time: number }

/**
 * A worker's logger whose pino loads later: records are kept until load() (the worker calls it once
 * it has joined its hub), then written by pino with the times they were made. Loading pino is
 * ~15 ms of the ~130 ms of CPU a worker spends before it joins, and `swarm up` starts 25 workers at
 * once on 2 cores. A process that exits before load() writes the kept records itself, as pino would.
 */
export function deferredLogger(name: string, file?: string, level = process.env.SWARM_LOG_LEVEL ?? 'info'): { log: Logger; load: () => Promise<void> } {
  const queue: Rec[] = [];
  const targets = new Map<Record<string, unknown>[], Logger>();
  let real: Logger | undefined;
  let replayAt: number | undefined;
  let loading: Promise<void> | undefined;
  const target = (chain: Record<string, unknown>[]): Logger => {
    let t = targets.get(chain);
    if (!t) targets.set(chain, (t = chain.reduce((l, b) => l.child(b), real!)));
    return t;
  };
  const call = (chain: Record<string, unknown>[], lv: Level, args: unknown[]) =>
    (target(chain)[lv] as (...a: unknown[]) => void)(...args);
  const make = (chain: Record<string, unknown>[]): Logger => {
    const node: Record<string, unknown> = {
      child: (b: Record<string, unknown>) => make([...chain, b]),
      flush: () => real?.flush(),
    };
    for (const lv of Object.keys(LEVELS) as Level[]) {
      node[lv] = (...args: unknown[]) => {
        if (real) call(chain, lv, args);
        else queue.push({ chain, level: lv, args, time: Date.now() });
      };
    }
    return node as unknown as Logger;
  };
  const load = (): Promise<void> => {
    loading ??= (async () => {
      const { makeLogger } = await import('./log.js');
      // Replayed records keep their own time.
      real = makeLogger(name, file, level, { timestamp: () => `,"time":${replayAt ?? Date.now()}` });
      for (const r of queue.splice(0)) { replayAt = r.time; call(r.chain, r.level, r.args); }
      replayAt = undefined;
    })();
    return loading;
  };
  process.once('exit', () => { if (!real && queue.length) writeRaw(name, file, level, queue); });
  return { log: make([]), load };
}

/** The kept records as pino's NDJSON lines, synchronously (we are exiting). */
function writeRaw(name: string, file: string | undefined, level: string, recs: Rec[]): void {
  const min = LEVELS[level as Level] ?? 30;
  const lines = recs.filter((r) => LEVELS[r.level] >= min).map((r) => {
    const [first, second] = r.args;
    const obj = first instanceof Error ? { err: { type: first.name, message: first.message, stack: first.stack } }
      : typeof first === 'object' && first !== null ? first : {};
    const msg = typeof first === 'string' ? first : typeof second === 'string' ? second : first instanceof Error ? first.message : undefined;
    return JSON.stringify({ level: LEVELS[r.level], time: r.time, pid: process.pid, hostname: os.hostname(), name, ...Object.assign({}, ...r.chain), ...obj, ...(msg !== undefined ? { msg } : {}) }) + '\n';
  });
  try { if (file) fs.appendFileSync(file, lines.join('')); else fs.writeSync(2, lines.join('')); } catch { /* nowhere to write */ }
}
