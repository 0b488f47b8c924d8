/** What the election reads of a failover worker. */
export interface HolderCandidate { id: string; pid?: number; host?: string }

export const byId = <T extends { id: string }>(a: T, b: T) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * Choose `n` replica holders. The state is needed at failover by the acting coordinator, the lowest
 * live id, and a process's agents die together, as a host's processes do: so each process counts
 * once (its lowest id), and hosts come first. The lowest id of each host, hosts in the order of
 * their lowest ids, up to `n`; then, with fewer hosts than `n`, the lowest ids of the other
 * processes. When a host dies, the next coordinator is the lowest id of another host: a holder.
 * A process is its host and pid; a worker that reports neither is a process of its own. Pids alone
 * say nothing across containers or pid namespaces (every container's worker is PID 1).
 */
export function electHolders<T extends HolderCandidate>(workers: Iterable<T>, n: number): T[] {
  const ordered = [...lowestPerProcess(workers).values()].sort(byId);
  const hosts = new Set<string>();
  const first: T[] = [];
  const rest: T[] = [];
  for (const w of ordered) {
    const host = w.host ?? `proc:${w.pid ?? w.id}`;
    if (hosts.has(host)) rest.push(w); else { hosts.add(host); first.push(w); }
  }
  return [...first, ...rest].slice(0, Math.max(1, n)).sort(byId);
}

/** The process a worker runs in: its host and pid; a worker that reports neither is a process of its own. */
export function processKey(w: HolderCandidate): string {
  return w.pid !== undefined || w.host !== undefined ? `${w.host ?? ''}\u0000${w.pid ?? ''}` : `id:${w.id}`;
}

/** The lowest id of each process among `workers`, by `processKey`. */
export function lowestPerProcess<T extends HolderCandidate>(workers: Iterable<T>): Map<string, T> {
  const procs = new Map<string, T>();
  for (const w of workers) {
    const key = processKey(w);
    const cur = procs.get(key);
    if (!cur || w.id < cur.id) procs.set(key, w);
  }
  return procs;
}
