/**
 * Failover benchmarks, phase 1: the gossip layer on its own.
 *   node dist/bench/failover.js [--sizes 25,100,200] [--trials 20] [--real-trials 5]
 * Prints JSON lines:
 *   convergence: members over real TCP on loopback (several per process) joining through one seed,
 *     wall time until every member sees all live; then a member killed -> every survivor marks it dead.
 *   detection (simulated clock): hub heartbeats stop at a random phase -> every worker in gossip mode.
 *   detection (real clock, TCP): the same with real timers and sockets, fewer trials.
 */
import { ManualClock, seededRandom } from '../worker/gossip/clock.js';
import { MemNetwork } from '../worker/gossip/mem-transport.js';
import { Membership } from '../worker/gossip/membership.js';
import { GossipNode } from '../worker/gossip/node.js';
import { TcpTransport } from '../worker/gossip/transport.js';
import { arg, flag, checkArgs } from './args.js';

const sizes = arg('sizes', '25,100,200').split(',').map(Number);
const trials = Number(arg('trials', '20'));
const realTrials = Number(arg('real-trials', '5'));
const SIM_ONLY = flag('sim-only');
checkArgs('failover', 'Failover, the gossip layer on its own: convergence in simulation, then real-process trials.');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, maxMs: number, step = 20): Promise<number | undefined> {
  const t0 = performance.now();
  while (performance.now() - t0 < maxMs) { if (cond()) return performance.now() - t0; await sleep(step); }
  return undefined;
}
function pct(xs: number[], p: number): number {
  const s = xs.slice().sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!);
}
const out = (o: object) => process.stdout.write(JSON.stringify(o) + '\n');

async function convergence(n: number): Promise<void> {
  // The same settings as test/worker/gossip-tcp.test.ts: fast rounds for 25, 1 s probes for the big clusters.
  const fast = { probeIntervalMs: 300, probeTimeoutMs: 120, gossipIntervalMs: 100, pushPullIntervalMs: 3000, reconnectIntervalMs: 500, suspicionMult: 3 };
  const config = n > 50 ? { ...fast, probeIntervalMs: 2000, probeTimeoutMs: 1000, gossipIntervalMs: 300, suspicionMult: 6 } : fast;
  const ms: { m: Membership; tr: TcpTransport }[] = [];
  for (let i = 0; i < n; i++) {
    const tr = new TcpTransport({ maxConns: 32 });
    await tr.listen();
    ms.push({ m: new Membership({ id: `w-${String(i).padStart(3, '0')}`, transport: tr, config }), tr });
  }
  for (const { m } of ms) { m.start(); if (m !== ms[0]!.m) m.join(ms[0]!.tr.addr); }
  // Event-loop lag while converging: all members share one process and two cores.
  let lag = 0;
  let last = performance.now();
  const lagTimer = setInterval(() => { const now = performance.now(); lag = Math.max(lag, now - last - 100); last = now; }, 100);
  const joined = await until(() => ms.every(({ m }) => m.live().length === n), 120_000);
  clearInterval(lagTimer);
  const victim = ms[Math.floor(n / 2)]!;
  victim.m.stop();
  await victim.tr.close();
  const dead = await until(() => ms.every(({ m }) => m === victim.m || m.get(victim.m.id)?.state === 'dead'), 180_000);
  out({ bench: 'gossip-convergence', transport: 'tcp-loopback', members: n, probe_interval_ms: config.probeIntervalMs,
    join_converged_ms: joined === undefined ? null : Math.round(joined), kill_detected_by_all_ms: dead === undefined ? null : Math.round(dead),
    max_loop_lag_ms: Math.round(lag), dropped: ms.reduce((a, x) => a + x.tr.stats.dropped, 0) });
  for (const { m, tr } of ms) { m.stop(); await tr.close(); }
}

/** Simulated clock, in-memory network (2 ms latency): join through one seed, then one member killed. */
function convergenceSim(n: number): void {
  const clock = new ManualClock();
  const rand = seededRandom(n);
  const net = new MemNetwork(clock, 2, 0, rand);
  const ms = Array.from({ length: n }, (_, i) => new Membership({ id: `w-${i}`, transport: net.endpoint(`w-${i}`), clock, rand }));
  for (const m of ms) { m.start(); if (m !== ms[0]) m.join('w-0'); }
  const t0 = clock.now();
  while (!ms.every((m) => m.live().length === n) && clock.now() - t0 < 600_000) clock.advance(50);
  const joined = clock.now() - t0;
  const victim = ms[Math.floor(n / 2)]!;
  victim.stop(); net.isolate(victim.id);
  const t1 = clock.now();
  while (!ms.every((m) => m === victim || m.get(victim.id)?.state === 'dead') && clock.now() - t1 < 600_000) clock.advance(50);
  out({ bench: 'gossip-convergence', transport: 'simulated', members: n, probe_interval_ms: 1000, join_converged_ms: joined, kill_detected_by_all_ms: clock.now() - t1, messages: net.stats.delivered });
  for (const m of ms) m.stop();
}

/** Simulated: hub heartbeats every 1 s stop at a random phase; time until every node is in gossip mode. */
function detectionSim(n: number, seed: number): number {
  const clock = new ManualClock();
  const rand = seededRandom(seed);
  const net = new MemNetwork(clock, 1, 0, rand);
  const ids = Array.from({ length: n }, (_, i) => `w-${i}`);
  const nodes = ids.map((id) => new GossipNode({ id, transport: net.endpoint(id), clock, rand, execute: async () => ({ text: '' }) }));
  for (const nd of nodes) { for (const id of ids) nd.membership.add(id, id); nd.start(); }
  // Heartbeats arrive at each worker with its own phase (sent per connection), every 1 s.
  const phase = nodes.map(() => Math.floor(rand() * 1000));
  const killAt = clock.now() + 5000 + Math.floor(rand() * 1000);
  for (let t = clock.now(); t < killAt; t += 10) {
    clock.advance(10);
    nodes.forEach((nd, i) => { if ((clock.now() + phase[i]!) % 1000 < 10) nd.hub.heard(); });
  }
  const t0 = clock.now();
  while (!nodes.every((nd) => nd.mode === 'gossip') && clock.now() - t0 < 30_000) clock.advance(10);
  for (const nd of nodes) nd.stop();
  return clock.now() - t0;
}

/** Real clock and TCP: a simulated hub beats every 1 s per worker, then stops. */
async function detectionReal(n: number): Promise<number | undefined> {
  const nodes: GossipNode[] = [];
  const trs: TcpTransport[] = [];
  for (let i = 0; i < n; i++) {
    const tr = new TcpTransport({ maxConns: 16 });
    await tr.listen();
    trs.push(tr);
    nodes.push(new GossipNode({ id: `w-${i}`, transport: tr, execute: async () => ({ text: '' }) }));
  }
  for (const nd of nodes) { nodes.forEach((x, j) => nd.membership.add(x.id, trs[j]!.addr)); nd.start(); }
  const beats = nodes.map((nd) => { nd.hub.heard(); const t = setInterval(() => nd.hub.heard(), 1000); return t; });
  await sleep(3000 + Math.random() * 1000);
  const t0 = performance.now();
  for (const b of beats) clearInterval(b);
  const ms = await until(() => nodes.every((nd) => nd.mode === 'gossip'), 30_000, 10);
  for (const nd of nodes) nd.stop();
  for (const tr of trs) await tr.close();
  return ms;
}

for (const n of sizes) convergenceSim(n);
if (!SIM_ONLY) for (const n of sizes) await convergence(n);
const sim: number[] = [];
for (let i = 0; i < trials; i++) sim.push(detectionSim(25, 1000 + i));
out({ bench: 'hub-detection', clock: 'simulated', workers: 25, trials, lapse_ms: 3000, p50_ms: pct(sim, 50), p90_ms: pct(sim, 90), p99_ms: pct(sim, 99), max_ms: Math.max(...sim) });
const real: number[] = [];
if (SIM_ONLY) process.exit(0);
for (let i = 0; i < realTrials; i++) { const ms = await detectionReal(25); if (ms !== undefined) real.push(ms); }
if (real.length) out({ bench: 'hub-detection', clock: 'real', transport: 'tcp-loopback', workers: 25, trials: realTrials, detected: real.length, p50_ms: pct(real, 50), max_ms: Math.round(Math.max(...real)) });
process.exit(0);
