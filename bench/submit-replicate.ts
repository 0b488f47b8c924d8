import { spawn, type ChildProcess } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { ControlServer, Hub, hubConfig } from '../hub/index.js';
import { WorkerPool } from '../worker/index.js';
import { arg, checkArgs } from './args.js';

/**
 * How long one large submit holds the hub's event loop while it is replicated to the holders: a hub
 * (in this process) with `--holders` holder processes (one agent each, on loopback), and a client
 * process that POSTs `--tasks` tasks of `--bytes` of prompt at once. The tasks need a role no worker
 * has, so what the hub does after accepting them is replication. Measured in the hub's process,
 * from the moment the store accepted the batch until every holder's feed has sent it: the longest
 * turn of the loop (a setImmediate ticker), the hub process's CPU time in all, the event-loop delay (perf_hooks, 1 ms resolution), and
 * how many turns passed 30 ms; and over the whole POST (its body's parse included) for reference.
 *
 *   node dist/bench/submit-replicate.js --tasks 10000 --bytes 3000 --holders 3 --runs 3 [--keepers 1]
 */

const self = fileURLToPath(import.meta.url);
const TOKEN = 'bench-submit-replicate-token-0123456789abcdef';

if (process.argv[2] === 'holder') {
  // One holder process: an agent with a failover peer port, which the hub elects a holder.
  const [, , , id, port] = process.argv;
  const pool = new WorkerPool({ ids: [id!], driver: { name: 'echo', options: {} }, slots: 1, token: TOKEN, locate: async () => ({ host: '127.0.0.1', port: Number(port) }), failover: { host: '127.0.0.1', port: 0 } }, pino({ level: 'silent' }));
  const running = pool.run();
  process.on('message', (m) => {
    if (m === 'count') process.send!({ count: pool.agents[0]?.failover?.node.replica.size ?? -1 });
    if (m === 'stop') void pool.stop('bench over').then(() => running).then(() => process.exit(0));
  });
} else if (process.argv[2] === 'client') {
  const [, , , port, n, bytes, tag] = process.argv;
  const pad = 'p'.repeat(Number(bytes));
  const tasks = Array.from({ length: Number(n) }, (_, i) => ({ id: `${tag}-${i}`, prompt: `${pad} ${i}`, role: 'x' }));
  const body = JSON.stringify({ tasks });
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/tasks`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body });
  await res.text();
  process.send!({ status: res.status, ms: performance.now() - t0, chars: body.length });
  process.exit(0);
} else {
  const tasks = Number(arg('tasks', '10000', 'tasks in the one POST'));
  const bytes = Number(arg('bytes', '3000', 'prompt characters a task'));
  const holders = Number(arg('holders', '3', 'holder processes'));
  const keepers = Number(arg('keepers', '0', 'more agent processes, which keep the open tasks (at most 2 do)'));
  const runs = Number(arg('runs', '3', 'POSTs, one after another (each to the same hub)'));
  checkArgs('submit-replicate', 'One large POST /tasks replicated to holder processes: how long it holds the hub\'s event loop.');

  const hub = new Hub(hubConfig({ port: 0, fsyncMs: 0, token: TOKEN, deadAfterMs: 300_000 }), pino({ level: 'silent' }));
  const addr = await hub.start();
  const control = new ControlServer(hub, { host: '127.0.0.1', port: 0, token: TOKEN }, pino({ level: 'silent' }));
  const { port: controlPort } = await control.start();
  const kids: ChildProcess[] = [];
  for (let i = 0; i < holders + keepers; i++) kids.push(spawn(process.execPath, [self, 'holder', `h-${i + 1}`, String(addr.port)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  const ask = <T>(c: ChildProcess, m: string) => new Promise<T>((r) => { c.once('message', (x) => r(x as T)); c.send(m); });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const until = async (f: () => boolean | Promise<boolean>, ms: number) => { for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(20)) if (await f()) return true; return false; };
  try {
    const ready = () => { const fs = hub.failover.feedViews(); return hub.failover.holders().length === holders && fs.length === holders + Math.min(2, keepers) && fs.every((f) => !f.syncing && f.syncs >= 1); };
    if (!(await until(ready, 60_000))) throw new Error('holders did not join');

    // The longest turn: a setImmediate ticker, the time between two of its ticks, in wall time and in
    // the hub process's CPU time (on a loaded host a turn's wall time includes the time the process
    // waited for a core: its CPU time is what the turn itself cost).
    let last = performance.now(), lastCpu = process.cpuUsage(), maxTurn = 0, maxCpu = 0, over30 = 0, cpuOver30 = 0, ticking = true;
    const tick = () => {
      const now = performance.now(), cpu = process.cpuUsage();
      const d = now - last, c = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
      if (d > maxTurn) maxTurn = d;
      if (c > maxCpu) maxCpu = c;
      if (d > 30) over30++;
      if (c > 30) cpuOver30++;
      last = now; lastCpu = cpu;
      if (ticking) setImmediate(tick);
    };
    const eld = monitorEventLoopDelay({ resolution: 1 });
    const whole = monitorEventLoopDelay({ resolution: 1 });
    // The window opens when the store has accepted the batch (the replication starts in that turn).
    const store = hub.store as unknown as { submitMany: (s: readonly unknown[], o?: unknown) => Promise<unknown> };
    const submitMany = store.submitMany.bind(store);
    let accepted = 0, cpu0 = process.cpuUsage();
    store.submitMany = async (s, o) => {
      const out = await submitMany(s, o);
      if (s.length >= 1000) { accepted = performance.now(); cpu0 = process.cpuUsage(); maxTurn = 0; maxCpu = 0; over30 = 0; cpuOver30 = 0; last = accepted; lastCpu = process.cpuUsage(); eld.reset(); eld.enable(); ticking = true; setImmediate(tick); }
      return out;
    };
    const rows: string[] = [];
    for (let run = 0; run < runs; run++) {
      const base = hub.failover.stats.deltas;
      accepted = 0;
      whole.reset(); whole.enable();
      const client = spawn(process.execPath, [self, 'client', String(controlPort), String(tasks), String(bytes), `r${run}`], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      const answer = new Promise<{ status: number; ms: number; chars: number }>((r) => client.once('message', (x) => r(x as never)));
      // Replicated: every task of the batch handed to the feeds, and nothing waits for a holder's link.
      const sent = () => accepted > 0 && hub.failover.stats.deltas - base >= tasks && hub.failover.feedViews().every((f) => f.backlog === 0 && !f.syncing);
      let end = 0;
      let cpuMs = 0;
      const ok = await until(() => { if (sent()) { if (!end) { end = performance.now(); const c = process.cpuUsage(cpu0); cpuMs = (c.user + c.system) / 1000; } return true; } return false; }, 120_000);
      ticking = false;
      eld.disable();
      const a = await answer;
      whole.disable();
      const copies = async () => (await Promise.all(kids.map((k) => ask<{ count: number }>(k, 'count')))).map((c) => c.count);
      await until(async () => (await copies()).slice(0, holders).every((c) => c >= (run + 1) * tasks), 60_000);
      const counts = (await copies()).map((count) => ({ count }));
      const row = { run, ok, status: a.status, mb: +(a.chars / 1e6).toFixed(1), post_ms: Math.round(a.ms), replicate_ms: Math.round(end - accepted), replicate_cpu_ms: Math.round(cpuMs), max_turn_ms: +maxTurn.toFixed(1), turns_over_30ms: over30, max_turn_cpu_ms: +maxCpu.toFixed(1), turns_cpu_over_30ms: cpuOver30, eld_max_ms: +(eld.max / 1e6).toFixed(1), eld_p99_ms: +(eld.percentile(99) / 1e6).toFixed(1), post_eld_max_ms: +(whole.max / 1e6).toFixed(1), holder_copies: counts.map((c) => c.count).join('/') };
      rows.push(JSON.stringify(row));
      console.log(JSON.stringify(row));
      await sleep(1000);
    }
  } finally {
    await Promise.all(kids.map((k) => new Promise((r) => { k.once('exit', r); k.send('stop'); setTimeout(() => { k.kill('SIGKILL'); r(undefined); }, 5000).unref(); })));
    await control.stop();
    await hub.stop({ killWorkers: true, graceMs: 1000 });
  }
  process.exit(0);
}
