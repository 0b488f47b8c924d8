import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { CLI } from './args.js';

/**
 * A test bed of hosts: each host is a network namespace with loopback up and one veth link to a
 * bridge that lives in a "switch" namespace of its own, so nothing is ever attached to the root
 * namespace's interfaces. Every endpoint of a test runs inside a host namespace (`ip netns exec`);
 * the root namespace never talks to a host address (from the root namespace that traffic would
 * leave the machine). Everything made here is removed on teardown, even when the test failed.
 */

/** A background process started inside a host. */
export interface HostProc { child: ChildProcess; output: () => string }

export interface Host {
  /** Short name given by the test (a, b, c…). */
  readonly name: string;
  /** The namespace's name. */
  readonly ns: string;
  /** The host's address on the bridge (private, non-routable, reachable only from the other hosts). */
  readonly addr: string;
  /** Run a command in this host to completion. */
  exec(cmd: string[], opts?: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv }): { code: number | null; stdout: string; stderr: string };
  /**
   * Run a command with only this host's network (`nsenter --net`), keeping the root namespace's
   * mounts: what Podman needs, whose storage mounts `ip netns exec`'s private mount namespace would
   * hide from later podman commands. A container in the host network of a pod started this way
   * lives in this host's network namespace; `podman exec` into it must run here too (a host-network
   * container has no namespace of its own to join: the exec'd process keeps its caller's network).
   */
  netExec(cmd: string[], opts?: { timeoutMs?: number; input?: string }): { code: number | null; stdout: string; stderr: string };
  /** Run `swarm …` in this host to completion. */
  swarm(args: string[], opts?: { timeoutMs?: number; env?: NodeJS.ProcessEnv }): { code: number | null; stdout: string; stderr: string };
  /** Start `swarm …` in this host in the background (its own process group). */
  swarmBg(args: string[], opts?: { env?: NodeJS.ProcessEnv }): HostProc;
  /** Pids of every process running in this host's namespace. */
  pids(): number[];
  /** SIGKILL every process of this host (the machine losing power); resolves when none is left. */
  killAll(): Promise<void>;
  /** Cut this host off the bridge (its switch port goes down: the cable pulled). */
  partition(): void;
  /** Plug it back in. */
  heal(): void;
}

export interface HostBed {
  hosts: Host[];
  cleanup(): Promise<void>;
  /** Run `fn` first on cleanup, while the namespaces still exist (e.g. remove pods living in them). */
  onCleanup(fn: () => void | Promise<void>): void;
}

const sh = (args: string[], input?: string) => spawnSync(args[0]!, args.slice(1), { encoding: 'utf8', input, timeout: 20_000 });

function must(args: string[]): string {
  const r = sh(args);
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed (${r.status}): ${r.stderr || r.error?.message}`);
  return r.stdout;
}

/**
 * Why namespaces cannot be made here, or undefined when they can: tries to make (and remove) one.
 * Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2.
 */
export function namespacesUnavailable(): string | undefined {
  if (process.platform !== 'linux') return `network namespaces are Linux only (platform ${process.platform})`;
  const which = sh(['ip', '-V']);
  if (which.error || which.status !== 0) return 'iproute2 (`ip`) is not installed';
  const probe = `swprobe${process.pid}`;
  const r = sh(['ip', 'netns', 'add', probe]);
  if (r.status !== 0) return `cannot create a network namespace (needs root): ${(r.stderr || '').trim()}`;
  sh(['ip', 'netns', 'del', probe]);
  return undefined;
}

function pidsOf(ns: string): number[] {
  const r = sh(['ip', 'netns', 'pids', ns]);
  if (r.status !== 0) return [];
  return r.stdout.split('\n').map((l) => Number(l.trim())).filter((n) => Number.isInteger(n) && n > 0);
}

async function killNs(ns: string): Promise<void> {
  for (let round = 0; round < 50; round++) {
    const pids = pidsOf(ns);
    if (!pids.length) return;
    for (const p of pids) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } }
    await new Promise((r) => setTimeout(r, 40));
  }
}

/**
 * Make `names.length` hosts on one bridge, addresses 10.231.0.1, .2, … (/24). Names are unique per
 * run (pid and random suffix), so parallel tests each get their own bed. Registers its cleanup on `t`.
 */
export function makeHosts(t: { teardown(fn: () => void | Promise<void>): void }, names: string[]): HostBed {
  const tag = `${process.pid % 100000}${crypto.randomBytes(2).toString('hex')}`;
  const sw = `swsw${tag}`;
  const made: string[] = [];
  const first: (() => void | Promise<void>)[] = [];
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    for (const fn of first) { try { await fn(); } catch { /* the namespaces go regardless */ } }
    for (const ns of made) await killNs(ns);
    // Deleting a namespace destroys its interfaces: each veth pair and the bridge go with them.
    for (const ns of made.reverse()) sh(['ip', 'netns', 'del', ns]);
  };
  t.teardown(cleanup);
  // A test killed by tap's timeout still runs teardowns; an exiting process gets this last try, and
  // so does one ended by SIGTERM (which skips 'exit' handlers). Only synchronous hooks finish here.
  const lastTry = () => {
    if (cleaned) return;
    cleaned = true;
    for (const fn of first) { try { void fn(); } catch { /* go on */ } }
    for (const ns of made) { for (const p of pidsOf(ns)) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } } sh(['ip', 'netns', 'del', ns]); }
  };
  process.once('exit', lastTry);
  process.once('SIGTERM', () => { lastTry(); process.exit(143); });
  try {
    must(['ip', 'netns', 'add', sw]);
    made.push(sw);
    must(['ip', '-n', sw, 'link', 'set', 'lo', 'up']);
    must(['ip', '-n', sw, 'link', 'add', 'br0', 'type', 'bridge']);
    must(['ip', '-n', sw, 'link', 'set', 'br0', 'up']);
  } catch (err) { void cleanup(); throw err; }
  const hosts = names.map((name, i): Host => {
    const ns = `swh${i}${tag}`;
    const port = `p${i}`;
    const addr = `10.231.0.${i + 1}`;
    try {
      must(['ip', 'netns', 'add', ns]);
      made.push(ns);
      must(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
      // Both ends are made inside the switch namespace and one is moved straight into the host: the
      // root namespace never holds either end.
      must(['ip', '-n', sw, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      must(['ip', '-n', sw, 'link', 'set', port, 'master', 'br0', 'up']);
      must(['ip', '-n', ns, 'addr', 'add', `${addr}/24`, 'dev', 'eth0']);
      must(['ip', '-n', ns, 'link', 'set', 'eth0', 'up']);
    } catch (err) { void cleanup(); throw err; }
    const inNs = (cmd: string[]) => ['netns', 'exec', ns, ...cmd];
    return {
      name, ns, addr,
      exec(cmd, o = {}) {
        const r = spawnSync('ip', inNs(cmd), { encoding: 'utf8', input: o.input, timeout: o.timeoutMs ?? 60_000, env: { ...process.env, ...o.env }, maxBuffer: 256 << 20 });
        return { code: r.status, stdout: r.stdout ?? '', stderr: (r.stderr ?? '') + (r.error ? String(r.error) : '') };
      },
      netExec(cmd, o = {}) {
        const r = spawnSync('nsenter', [`--net=/run/netns/${ns}`, ...cmd], { encoding: 'utf8', input: o.input, timeout: o.timeoutMs ?? 120_000, maxBuffer: 64 << 20 });
        return { code: r.status, stdout: r.stdout ?? '', stderr: (r.stderr ?? '') + (r.error ? String(r.error) : '') };
      },
      swarm(args, o = {}) { return this.exec([process.execPath, CLI, ...args], o); },
      swarmBg(args, o = {}) {
        // `ip netns exec` execs the command: the child's pid is node's own.
        const child = spawn('ip', inNs([process.execPath, CLI, ...args]), { env: { ...process.env, ...o.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
        let out = '';
        child.stdout!.on('data', (c: Buffer) => { out = (out + c.toString()).slice(-200_000); });
        child.stderr!.on('data', (c: Buffer) => { out = (out + c.toString()).slice(-200_000); });
        return { child, output: () => out };
      },
      pids: () => pidsOf(ns),
      killAll: () => killNs(ns),
      partition: () => { must(['ip', '-n', sw, 'link', 'set', port, 'down']); },
      heal: () => { must(['ip', '-n', sw, 'link', 'set', port, 'up']); },
    };
  });
  return { hosts, cleanup, onCleanup: (fn) => { first.push(fn); } };
}
