/**
 * A real memory limit around the hub's process only, as a container runtime gives it: a cgroup v1
 * memory group (/sys/fs/cgroup/memory/<name>, needs root) with `memory.limit_in_bytes`, which the hub
 * joins at its start through bench/cgroup-hook.ts (`SWARM_HUB_NODE_ARGS="--import ..."` with
 * `SWARM_BENCH_HUB_CGROUP` naming the group). The kernel charges the group with what a container's
 * limit counts: the hub's anonymous memory and the page cache of the files it writes; past the limit
 * it reclaims cache first (`failcnt` counts those hits) and OOM-kills the hub when nothing is left to
 * reclaim (`oom_kill` of memory.oom_control).
 */
import fs from 'node:fs';
import path from 'node:path';

const ROOT = '/sys/fs/cgroup/memory';
const MiB = 2 ** 20;
/** A 100 ms pause without spinning a core (remove runs from exit handlers, where nothing can be awaited). */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

export interface CgroupUse { usage_mb: number; rss_mb: number; cache_mb: number }
export interface CgroupReport { limit_mb: number; max_usage_mb: number; failcnt: number; oom_kill: number; under_oom: number; pids_joined: number }

export class HubCgroup {
  private constructor(readonly dir: string, readonly limitBytes: number) {}

  /** A new group with this limit; throws where cgroup v1's memory controller is not writable. */
  static create(name: string, limitMiB: number): HubCgroup {
    if (!fs.existsSync(path.join(ROOT, 'memory.limit_in_bytes'))) throw new Error(`--hub-limit: no cgroup v1 memory controller at ${ROOT}`);
    const dir = path.join(ROOT, name);
    fs.mkdirSync(dir);
    const bytes = Math.round(limitMiB * MiB);
    fs.writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(bytes));
    // The few MB a process charges before its hook runs (node's start) move with it where the kernel still can.
    try { fs.writeFileSync(path.join(dir, 'memory.move_charge_at_immigrate'), '3'); } catch { /* removed in newer kernels: a few MB stay outside */ }
    return new HubCgroup(dir, bytes);
  }

  private read(f: string): string { return fs.readFileSync(path.join(this.dir, f), 'utf8'); }

  /** Now: the group's charge, and of it the anonymous memory and the page cache (memory.stat). */
  use(): CgroupUse | undefined {
    try {
      const st = this.read('memory.stat');
      const v = (k: string) => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(st)?.[1] ?? 0);
      return { usage_mb: +(Number(this.read('memory.usage_in_bytes')) / MiB).toFixed(1), rss_mb: +(v('total_rss') / MiB).toFixed(1), cache_mb: +(v('total_cache') / MiB).toFixed(1) };
    } catch { return undefined; }
  }

  /** The pids in the group now. */
  pids(): number[] { try { return this.read('cgroup.procs').split('\n').filter(Boolean).map(Number); } catch { return []; } }

  /** Over the group's whole life: its peak charge, the times it hit the limit, the OOM kills. */
  report(joined: number): CgroupReport {
    const oom = this.read('memory.oom_control');
    return {
      limit_mb: +(this.limitBytes / MiB).toFixed(1), max_usage_mb: +(Number(this.read('memory.max_usage_in_bytes')) / MiB).toFixed(1), failcnt: Number(this.read('memory.failcnt')),
      oom_kill: Number(/^oom_kill (\d+)/m.exec(oom)?.[1] ?? 0), under_oom: Number(/^under_oom (\d+)/m.exec(oom)?.[1] ?? 0), pids_joined: joined,
    };
  }

  /** Remove the group (once its processes are gone; a process still in it moves to the root group first). */
  remove(): void {
    for (const p of this.pids()) { try { fs.writeFileSync(path.join(ROOT, 'cgroup.procs'), String(p)); } catch { /* gone */ } }
    for (let i = 0; i < 50; i++) { try { fs.rmdirSync(this.dir); return; } catch { /* charges still draining */ } Atomics.wait(PAUSE, 0, 0, 100); }
  }
}
