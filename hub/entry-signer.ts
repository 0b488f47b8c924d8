import type { ReplicaEntry } from '../protocol/index.js';
import { hubKey, hubSignFailure, hubSignResult, hubSignSpecAt } from '../protocol/result-mac.js';

/**
 * Signs what the hub replicates (protocol/result-mac.ts), so a hub of this swarm that lost its
 * journal can still verify the specs and results a worker hands back. Without a token it does
 * nothing: no one proves anything then. A spec's MAC is kept per spec object: the periodic repair
 * sends the same specs again and again.
 */
export class EntrySigner {
  private readonly key?: string;
  private readonly specs = new WeakMap<object, string>();

  constructor(token: string | undefined) { if (token) this.key = hubKey(token); }

  /** `at`: when the hub accepted the task, signed with the spec (protocol/result-mac.ts `sh2.`). */
  spec(e: ReplicaEntry, at: number): void {
    if (!this.key || !e.spec) return;
    let mac = this.specs.get(e.spec);
    if (!mac) { mac = hubSignSpecAt(this.key, e.spec, at); this.specs.set(e.spec, mac); }
    e.spec_mac = mac;
  }

  result(e: ReplicaEntry): void {
    const r = e.result;
    if (this.key && r && typeof r.text === 'string') r.mac = hubSignResult(this.key, e.id, r.attempt, r.worker, r.text);
  }

  failure(e: ReplicaEntry): void {
    const f = e.failure;
    if (this.key && f?.error) f.mac = hubSignFailure(this.key, e.id, f.attempt, f.worker, f.error);
  }
}
