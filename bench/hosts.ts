/**
 * Cross-host bench on the namespace test bed (root, Linux): task throughput and dispatch latency of
 * 25 echo workers with the hub's link through the bridge (workers on hosts A, B and C, all dialing A's
 * bridge address) against the same swarm on A's loopback; then failover detection across hosts (the
 * hub killed, time until every worker is in gossip mode). TLS and a token in both, as deployed.
 *   sudo node dist/bench/hosts.js [--tasks 3000] [--workers 25] [--rounds 1]
 * Each round runs loopback (the baseline: no bridge) then bridge, so a drift in the machine's load
 * shows as a spread between rounds rather than as a difference between the modes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, arg, checkArgs } from './args.js';
import { makeHosts, namespacesUnavailable, type Host, type HostProc } from './netns.js';

const TASKS = Number(arg('tasks', '3000'));
const WORKERS = Number(arg('workers', '25'));
const ROUNDS = Number(arg('rounds', '1'));
checkArgs('hosts', 'Cross-host bench on the namespace test bed (root, Linux): throughput, dispatch latency and failover detection across hosts.');
const HUB_PORT = 7070, CONTROL_PORT = 7071;

interface Result { round: number; mode: string; wallMs: number; tasksPerS: number; p50: number; p99: number; detectMs?: number; load: string }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');

async function until(cond: () => boolean, ms: number, every = 200): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (cond()) return true; await sleep(every); }
  return cond();
}

async function run(mode: 'bridge' | 'loopback', round: number): Promise<Result> {
  const cleanups: (() => void | Promise<void>)[] = [];
  const bed = makeHosts({ teardown: (fn) => { cleanups.push(fn); } }, ['a', 'b', 'c']);
  const [a, b, c] = bed.hosts as [Host, Host, Host];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-hosts-'));
  try {
    const certs = path.join(dir, 'certs');
    const made = spawnSync(process.execPath, [CLI, 'certs', '--dir', certs, '--host', `a=${a.addr},127.0.0.1`, '--host', `b=${b.addr}`, '--host', `c=${c.addr}`], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(made.stderr);
    const token = fs.readFileSync(path.join(certs, 'token'), 'utf8').trim();
    const ca = path.join(certs, 'ca.crt');
    const hubAddr = mode === 'bridge' ? a.addr : '127.0.0.1';
    const state = (n: string) => { const d = path.join(dir, n); fs.mkdirSync(d, { recursive: true }); return d; };
    const env = { SWARM_TOKEN: token };
    const hub = a.swarmBg(['hub', '--state-dir', state('a'), '--host', hubAddr, '--port', String(HUB_PORT), '--control-host', a.addr, '--control-port', String(CONTROL_PORT),
      '--tls-cert', path.join(certs, 'a.crt'), '--tls-key', path.join(certs, 'a.key'), '--log-file', path.join(dir, 'hub.log')], { env });
    const remote = ['--hub-url', `https://${a.addr}:${CONTROL_PORT}`, '--token', token, '--tls-ca', ca];
    const status = () => { const r = a.swarm(['status', '--json', ...remote], { timeoutMs: 20_000 }); try { return JSON.parse(r.stdout) as { hub?: unknown; workers: unknown[]; metrics: { dispatch_p50_ms: number; dispatch_p99_ms: number } }; } catch { return undefined; } };
    if (!(await until(() => !!status()?.hub, 30_000, 500))) throw new Error(`hub did not start: ${hub.output()}`);
    // bridge: a third of the workers on each host; loopback: all on A, dialing 127.0.0.1.
    const split = mode === 'bridge' ? [[a, Math.floor(WORKERS / 3)], [b, Math.floor(WORKERS / 3)], [c, WORKERS - 2 * Math.floor(WORKERS / 3)]] as const : [[a, WORKERS]] as const;
    const workers: HostProc[] = [];
    const stateDirs: string[] = [];
    for (const [h, n] of split) {
      const sd = state(`w-${h.name}`);
      stateDirs.push(sd);
      workers.push(h.swarmBg(['worker', '--hub', `${hubAddr}:${HUB_PORT}`, '--tls-ca', ca, '--count', String(n), '--id', h.name, '--failover', '--state-dir', sd,
        '--peer-tls-cert', path.join(certs, `${h.name}.crt`), '--peer-tls-key', path.join(certs, `${h.name}.key`), '--peer-tls-ca', ca,
        '--driver', 'echo', '--log-file', path.join(dir, `w-${h.name}.log`)], { env }));
    }
    if (!(await until(() => status()?.workers.length === WORKERS, 120_000, 1000))) throw new Error(`workers did not join: ${status()?.workers.length}`);
    const file = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(file, Array.from({ length: TASKS }, (_, i) => JSON.stringify({ id: `t-${i}`, prompt: `task ${i}` })).join('\n') + '\n');
    const t0 = Date.now();
    const sub = a.swarm(['submit', '--file', file, '--wait', '--json', '--timeout', '600000', ...remote], { timeoutMs: 620_000 });
    const wallMs = Date.now() - t0;
    if (sub.code !== 0) throw new Error(`submit failed: ${sub.stderr.slice(-500)}`);
    const m = status()!.metrics;
    const loadAt = load();
    // Failover detection: the hub killed; every worker's status file says gossip, with when it switched.
    const killedAt = Date.now();
    try { process.kill(hub.child.pid!, 'SIGKILL'); } catch { /* gone */ }
    const since = (): number[] => stateDirs.flatMap((sd) => {
      const d = path.join(sd, 'failover');
      return (fs.existsSync(d) ? fs.readdirSync(d) : []).flatMap((n) => {
        try { return (JSON.parse(fs.readFileSync(path.join(d, n), 'utf8')) as { agents: { mode: string; gossip_since?: number }[] }).agents.map((x) => (x.mode === 'gossip' ? x.gossip_since ?? 0 : -1)); } catch { return []; }
      });
    });
    const all = await until(() => { const s = since(); return s.length === WORKERS && s.every((x) => x > 0); }, 60_000, 100);
    const detectMs = all ? Math.max(...since()) - killedAt : undefined;
    return { round, mode, wallMs, tasksPerS: TASKS / (wallMs / 1000), p50: m.dispatch_p50_ms, p99: m.dispatch_p99_ms, detectMs, load: loadAt };
  } finally {
    for (const fn of cleanups) await fn();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const why = namespacesUnavailable();
if (why) { process.stderr.write(`bench/hosts: ${why}\n`); process.exit(1); }
const results: Result[] = [];
for (let round = 1; round <= ROUNDS; round++) for (const mode of ['loopback', 'bridge'] as const) {
  const r = await run(mode, round);
  results.push(r);
  process.stdout.write(`round ${round} ${mode.padEnd(9)} ${TASKS} tasks in ${r.wallMs} ms (${r.tasksPerS.toFixed(0)} tasks/s incl. CLI start), dispatch p50 ${r.p50.toFixed(3)} ms p99 ${r.p99.toFixed(3)} ms; failover: all ${WORKERS} in gossip ${r.detectMs ?? 'n/a'} ms after the hub's kill; load ${r.load}\n`);
}
process.stdout.write(JSON.stringify({ tasks: TASKS, workers: WORKERS, cpus: os.cpus().length, results }) + '\n');
process.exit(0);
