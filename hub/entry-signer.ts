import type { ReplicaEntry } from '../protocol/index.js';
import { hubKey, hubSignFailure, hubSignResult, hubSignSpecAt } from '../protocol/result-mac.js';

/**
 * Signs what the hub replicates (protocol/result-mac.ts), so a hub of this swarm that lost its
 * journal can still verify the specs and results a worker hands back. Without a token it does
 * nothing: no one proves anything then. A spec's MAC is kept per spec object, a result's per result
 * object: the periodic repair, and each holder's sync, send the same entries again and again.
 */
export class EntrySigner {
  private readonly key?: string;
  private readonly specs = new WeakMap<object, string>();
  private readonly results = new WeakMap<object, { mac: string; id: string; attempt: number; worker: string; text: string }>();

  constructor(token: string | undefined) { if (token) this.key = hubKey(token); }

  /** `at`: when the hub accepted the task, signed with the spec (protocol/result-mac.ts `sh2.`). */
  spec(e: ReplicaEntry, at: number): void {
    if (!this.key || !e.spec) return;
    let mac = this.specs.get(e.spec);
    if (!mac) { mac = hubSignSpecAt(this.key, e.spec, at); this.specs.set(e.spec, mac); }
    e.spec_mac = mac;
  }

  /**
   * `of`: the task's own result, which keeps its MAC while id, attempt, worker and text are the same:
   * a restarted hub sends every finished task to each of its holders (five by default), and the MAC
   * was most of an entry's cost.
   */
  result(e: ReplicaEntry, of?: object): void {
    const r = e.result;
    if (!this.key || !r || typeof r.text !== 'string') return;
    const had = of && this.results.get(of);
    if (had && had.id === e.id && had.attempt === r.attempt && had.worker === r.worker && had.text === r.text) { r.mac = had.mac; return; }
    r.mac = hubSignResult(this.key, e.id, r.attempt, r.worker, r.text);
    if (of) this.results.set(of, { mac: r.mac, id: e.id, attempt: r.attempt, worker: r.worker, text: r.text });
  }

  failure(e: ReplicaEntry): void {
    const f = e.failure;
    if (this.key && f?.error) f.mac = hubSignFailure(this.key, e.id, f.attempt, f.worker, f.error);
  }
}
