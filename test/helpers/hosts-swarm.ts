import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, tempDir, until } from './cli.js';
import { agents, type AgentView } from './failover.js';
import { makeHosts, type Host, type HostProc } from './netns.js';

/**
 * A swarm across three hosts of the namespace test bed: the hub on A (TLS with a CA from
 * `swarm certs`, mutual TLS, a token, the control API on A's address over HTTPS), failover workers
 * on B and C. Every process runs in its host; each host has its own state directory.
 */
export interface HostsSwarm {
  a: Host; b: Host; c: Host;
  dir: string; certs: string; token: string;
  /** State directory per host name. */
  state: Record<string, string>;
  hubUrl: string;
  startHub(): Promise<HostProc>;
  startWorkers(h: Host, n: number, extra?: string[]): HostProc;
  /** `swarm …` in host A with --hub-url, --token and --tls-ca: the operator's remote CLI. */
  remote(args: string[], timeoutMs?: number): { code: number | null; stdout: string; stderr: string };
  /** The hub's /status through the remote CLI (undefined while it does not answer). */
  status(): Status | undefined;
  /** Failover status of the agents on B and C. */
  agents(): AgentView[];
}

export interface Status {
  hub: { pid: number; mode: string };
  workers: { id: string; addr?: string }[];
  tasks: { queued: number; leased: number; done: number; failed: number };
  failover?: { workers: { id: string; peerAddr: string; mode: string }[] };
}

export const HUB_PORT = 7070;
export const CONTROL_PORT = 7071;

export function hostsSwarm(t: Parameters<typeof tempDir>[0], opts: { latencyMs: number; hubArgs?: string[] }): HostsSwarm {
  // The folder first: teardowns run last-registered first, so the namespaces (and every process in
  // them) are gone before tempDir's teardown looks for a hub to stop (it would dial A's address from
  // the root namespace).
  const dir = tempDir(t);
  const bed = makeHosts(t, ['a', 'b', 'c']);
  const [a, b, c] = bed.hosts as [Host, Host, Host];
  const certs = path.join(dir, 'certs');
  // Certificates are files: made in the root namespace with openssl, no network involved.
  const made = spawnSync(process.execPath, [CLI, 'certs', '--dir', certs, '--host', `a=${a.addr}`, '--host', `b=${b.addr}`, '--host', `c=${c.addr}`], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`swarm certs failed: ${made.stderr}`);
  const token = fs.readFileSync(path.join(certs, 'token'), 'utf8').trim();
  const state = Object.fromEntries(['a', 'b', 'c'].map((n) => { const d = path.join(dir, n); fs.mkdirSync(d, { recursive: true }); return [n, d]; }));
  const cert = (n: string) => [path.join(certs, `${n}.crt`), path.join(certs, `${n}.key`)] as const;
  const hubUrl = `https://${a.addr}:${CONTROL_PORT}`;
  const remoteArgs = ['--hub-url', hubUrl, '--token', token, '--tls-ca', path.join(certs, 'ca.crt')];
  const sw: HostsSwarm = {
    a, b, c, dir, certs, token, state, hubUrl,
    async startHub() {
      const [crt, key] = cert('a');
      const log = path.join(state.a!, `hub-${Date.now()}.log`);
      const p = a.swarmBg(['hub', '--state-dir', state.a!, '--host', a.addr, '--port', String(HUB_PORT), '--control-host', a.addr,
        '--control-port', String(CONTROL_PORT), '--tls-cert', crt, '--tls-key', key, '--tls-ca', path.join(certs, 'ca.crt'),
        '--log-file', log, ...(opts.hubArgs ?? [])], { env: { SWARM_TOKEN: token } });
      const started = Date.now();
      let tries = 0, last = '';
      const ok = await until(() => {
        tries++;
        const t0 = Date.now();
        const r = sw.remote(['status', '--json'], 10_000);
        let pid: number | undefined;
        try { pid = (JSON.parse(r.stdout) as Status).hub?.pid; } catch { /* not up yet */ }
        last = `exit ${r.code} after ${Date.now() - t0} ms, hub pid ${pid ?? '-'}: ${(r.stderr || r.stdout).trim().slice(0, 300)}`;
        return r.code === 0 && pid === p.child.pid;
      }, 30_000, 300);
      if (!ok) {
        // What a hub that never answered leaves behind, so a failure says which part was slow or gone.
        const tail = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').slice(-1500) : '(no log file)';
        throw new Error(`hub on ${a.addr} (pid ${p.child.pid}, ${p.child.exitCode === null ? 'running' : `exited ${p.child.exitCode}`}) did not answer in ${Date.now() - started} ms, ${tries} status calls; the last: ${last}; its output: ${p.output().slice(-1000)}; its log: ${tail}`);
      }
      return p;
    },
    startWorkers(h, n, extra = []) {
      const [crt, key] = cert(h.name);
      return h.swarmBg(['worker', '--hub', `${a.addr}:${HUB_PORT}`, '--tls-ca', path.join(certs, 'ca.crt'), '--state-dir', state[h.name]!,
        '--count', String(n), '--id', h.name, '--failover', '--peer-tls-cert', crt, '--peer-tls-key', key, '--peer-tls-ca', path.join(certs, 'ca.crt'),
        '--driver', 'echo', '--driver-opt', `latency_ms=${opts.latencyMs}`, '--log-file', path.join(state[h.name]!, `${h.name}-${Date.now()}.log`), ...extra],
      { env: { SWARM_TOKEN: token } });
    },
    remote: (args, timeoutMs = 30_000) => a.swarm([...args, ...remoteArgs], { timeoutMs }),
    status() {
      const r = sw.remote(['status', '--json'], 10_000);
      if (r.code !== 0) return undefined;
      try { const s = JSON.parse(r.stdout) as Status; return s.hub && s.tasks ? s : undefined; } catch { return undefined; }
    },
    agents: () => [...agents(state.b!), ...agents(state.c!)],
  };
  return sw;
}

/** `n` echo tasks as a JSONL file (ids t-000…), for `swarm submit --file`. */
export function taskFile(dir: string, n: number, prefix = 't'): { file: string; ids: string[] } {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);
  const file = path.join(dir, `${prefix}-tasks.jsonl`);
  fs.writeFileSync(file, ids.map((id) => JSON.stringify({ id, prompt: `task ${id}` })).join('\n') + '\n');
  return { file, ids };
}

/** One pino line of a host's log files. */
export interface LogEvent { time: number; msg: string; worker?: string; reason?: string }

/**
 * The log lines of the files in `dir` whose names start with `prefix` (pino JSON, one per line), in
 * time order: the processes' own clock readings of when something happened, finer than polling.
 */
export function logEvents(dir: string, prefix: string): LogEvent[] {
  const out: LogEvent[] = [];
  for (const f of fs.readdirSync(dir).filter((n) => n.startsWith(prefix) && n.endsWith('.log'))) {
    for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      try { const e = JSON.parse(line) as LogEvent; if (typeof e.time === 'number' && typeof e.msg === 'string') out.push(e); } catch { /* not JSON */ }
    }
  }
  return out.sort((x, y) => x.time - y.time);
}
