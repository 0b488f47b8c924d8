/**
 * Restart at any age: build a state directory with N tasks of history (each finished, ~210-byte
 * prompts, the default retention horizon applied as it goes), SIGKILL the process that wrote it
 * mid-stream (tasks still being submitted and finished), then time
 * - `TaskStore.open` on it in this process (wall and CPU: replay of snapshot plus tail), and
 * - `swarm up --agents 4 --driver echo --detach` on it: `ready_ms` as `up` reports it (the hub has
 *   replayed and every worker has joined), then `swarm down`.
 * Run: `npm run build && node dist/bench/restart.js [--tasks 1000000] [--retain 24h,100000] [--keep]`.
 * Writes bench/results/restart.json. The load average is recorded beside the numbers.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TaskStore } from '../hub/store.js';
import { parseRetain } from '../hub/retention.js';
import { machine } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/cli/main.js');
const SELF = fileURLToPath(import.meta.url);
const arg = (name: string, def: string): string => { const i = process.argv.indexOf(name); return i >= 0 ? process.argv[i + 1]! : def; };
const load = (): number[] => os.loadavg().map((x) => +x.toFixed(1));
const cpu = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const Q = { maxDepth: 1_000_000, leaseMs: 600_000, defaultMaxAttempts: 3 };
const J = { fsyncMs: 0 };

/** Child: write `n` tasks of history into `dir`, then keep going (new work in flight) until killed. */
async function build(dir: string, n: number, retain: string): Promise<void> {
  const s = await TaskStore.open(dir, Q, J, { retain: parseRetain(retain), evictEveryMs: 3600_000 });
  const w = { id: 'w', caps: [] as string[] };
  const pad = 'x'.repeat(180);
  const B = 5000;
  let i = 0;
  const round = async (): Promise<void> => {
    await s.submitMany(Array.from({ length: B }, (_, k) => ({ id: `t-${i + k}`, prompt: `prompt ${i + k} ${pad}` })));
    const done: Promise<unknown>[] = [];
    for (let k = 0; k < B; k++) { const r = s.lease(w); if (r) done.push(s.complete(r.id, { text: `result ${r.id}`, worker: 'w', attempt: 1 })); }
    await Promise.all(done);
    i += B;
    await s.evict();
  };
  while (i < n) {
    await round();
    if (i % 100_000 === 0) process.stdout.write(`progress ${i}\n`);
  }
  process.stdout.write(`built ${i}\n`);
  // Still writing when the parent's SIGKILL lands: "any point".
  for (;;) await round();
}

async function main(): Promise<void> {
  const n = Number(arg('--tasks', '1000000'));
  const retain = arg('--retain', '24h,100000');
  const keep = process.argv.includes('--keep');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-restart-'));
  try {
    const t0 = performance.now();
    const child = spawn(process.execPath, [SELF, '--child', dir, String(n), retain], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        if (/built \d+/.test(out)) setTimeout(() => { child.kill('SIGKILL'); resolve(); }, 300 + Math.random() * 700);
      });
      child.once('exit', (code, sig) => { if (sig !== 'SIGKILL') reject(new Error(`builder exited ${code ?? sig}`)); });
    });
    await new Promise((r) => child.once('exit', r));
    const buildS = (performance.now() - t0) / 1000;
    const files = Object.fromEntries(fs.readdirSync(dir).filter((f) => f.endsWith('.ndjson')).map((f) => [f, +(fs.statSync(path.join(dir, f)).size / 2 ** 20).toFixed(1)]));
    const archiveMb = +(fs.readdirSync(path.join(dir, 'results')).reduce((a, f) => a + fs.statSync(path.join(dir, 'results', f)).size, 0) / 2 ** 20).toFixed(1);

    const loadOpen = load();
    const w0 = performance.now();
    const c0 = cpu();
    const s = await TaskStore.open(dir, Q, J, { retain: parseRetain(retain), evictEveryMs: 3600_000 });
    const openMs = Math.round(performance.now() - w0);
    const openCpuMs = Math.round(cpu() - c0);
    const hot = s.queue.counts();
    const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
    await s.close();

    const loadUp = load();
    const up = spawnSync(process.execPath, [CLI, 'up', '--agents', '4', '--driver', 'echo', '--detach', '--json', '--no-failover', '--insecure-no-auth', '--state-dir', dir, '--retain', retain], { encoding: 'utf8', timeout: 120_000 });
    spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { encoding: 'utf8', timeout: 60_000 });
    let readyMs: number | undefined;
    try { readyMs = (JSON.parse(up.stdout.trim().split('\n').at(-1)!) as { ready_ms: number }).ready_ms; } catch { /* below */ }
    const out = {
      at: new Date().toISOString(), command: `node dist/bench/restart.js ${process.argv.slice(2).join(' ')}`.trim(), machine: machine(),
      history_tasks: n, retain, build_s: +buildS.toFixed(1), files_mb: files, archive_mb: archiveMb,
      hot_after_restart: hot, open_ms: openMs, open_cpu_ms: openCpuMs, rss_after_open_mb: rss, load_at_open: loadOpen,
      swarm_up_ready_ms: readyMs ?? null, swarm_up_error: readyMs === undefined ? `${up.stdout}${up.stderr}`.slice(-2000) : undefined, load_at_up: loadUp,
    };
    console.log(JSON.stringify(out, null, 2));
    const file = path.join(ROOT, 'bench/results/restart.json');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  } finally { if (keep) console.log(`kept ${dir}`); else fs.rmSync(dir, { recursive: true, force: true }); }
}

if (process.argv[2] === '--child') await build(process.argv[3]!, Number(process.argv[4]), process.argv[5]!);
else await main();
process.exit(0);
