/**
 * A replica holder's steady state, in one process and without the rest of the swarm: the hub's
 * deltas for many tasks (spec, then result; prompts of 100 B-16 KB as in bench/soak.ts, the result
 * its echo), msgpack-encoded and decoded as on the wire, merged into one `Replica` that forgets the
 * oldest final entries past a retention of `--retain` (as the hub's `evicted` does). Prints the
 * process's RSS, heap and external bytes at every 10% and the RSS growth between the 20% and 100%
 * marks: the soak's holders' figure without its faults. Runs against any build of the replica (it
 * uses merge, forget, ids and size only), so the same file measures a before and an after.
 *
 * Run: `npm run build && node dist/bench/holder-churn.js [--tasks 200000] [--retain 20000]`.
 */
import os from 'node:os';
import { decode, encode } from 'msgpackr';
import { arg, checkArgs } from './args.js';
import { Replica, type Entry } from '../worker/gossip/replica.js';
import { soakPrompt } from './soak-prompt.js';

const TASKS = Number(arg('tasks', '200000', 'tasks whose deltas are merged'));
const RETAIN = Number(arg('retain', '20000', 'final entries kept (the oldest are forgotten past it)'));
checkArgs('holder-churn', "One replica holder's steady state without the swarm: RSS, heap and buffers as deltas merge and the oldest leave.");
const FRAME = 100;

const prompt = soakPrompt;

async function main(): Promise<void> {
  const r = new Replica();
  const mb = (x: number) => Math.round(x / 2 ** 20);
  const rows: { at: number; rss: number; heap_used: number; heap_total: number; external: number }[] = [];
  let maxRss = 0;
  for (let i = 0; i < TASKS; i += FRAME) {
    const specs: Entry[] = [], results: Entry[] = [];
    for (let k = i; k < Math.min(TASKS, i + FRAME); k++) {
      const p = prompt(k);
      specs.push({ id: `t${k}`, spec: { id: `t${k}`, prompt: p }, seq: k });
      results.push({ id: `t${k}`, result: { worker: 'w-2', attempt: 1, text: `echo: ${p}` } });
    }
    for (const e of decode(encode(specs)) as Entry[]) r.merge(e);
    for (const e of decode(encode(results)) as Entry[]) r.merge(e);
    if (r.size > RETAIN + 5000) r.forget(r.ids().slice(0, r.size - RETAIN));
    // One frame a turn, as a worker's socket delivers them.
    await new Promise((res) => setImmediate(res));
    const m = process.memoryUsage();
    maxRss = Math.max(maxRss, m.rss);
    const done = Math.min(TASKS, i + FRAME);
    if (done % (TASKS / 10) < FRAME) rows.push({ at: Math.round((100 * done) / TASKS), rss: mb(m.rss), heap_used: mb(m.heapUsed), heap_total: mb(m.heapTotal), external: mb(m.external) });
  }
  const at20 = rows.find((x) => x.at >= 20)!.rss, at100 = rows.at(-1)!.rss;
  console.log(JSON.stringify({ tasks: TASKS, retain: RETAIN, entries_at_end: r.size, rss_mb_at20: at20, rss_mb_at100: at100, growth_pct: +((100 * (at100 - at20)) / at20).toFixed(1), max_rss_mb: mb(maxRss), load: os.loadavg().map((x) => +x.toFixed(2)), by_10pct: rows }));
}

void main();
