/** Message types of the Mittelö protocol (spec section 4.3, plus ACK). */
export const Type = {
  HANDSHAKE: 'HANDSHAKE',
  HANDSHAKE_ACK: 'HANDSHAKE_ACK',
  ASSIGN_ROLE: 'ASSIGN_ROLE',
  TASK_REQ: 'TASK_REQ',
  TASK_RES: 'TASK_RES',
  HEARTBEAT: 'HEARTBEAT',
  KILL: 'KILL',
  ERROR: 'ERROR',
  ACK: 'ACK',
  /** Failover: the hub names a worker's peers. */
  PEERS: 'PEERS',
  /** Failover: the hub replicates run state (deltas, and chunked full syncs) to workers. */
  STATE: 'STATE',
  /** Failover: a worker hands what gossip mode finished back to a returning hub. */
  HANDBACK: 'HANDBACK',
  /** Failover: a restarted hub names, per id, the finished tasks of the digest buckets that differ. */
  SYNC_IDS: 'SYNC_IDS',
  /** Failover: a holder answers SYNC_IDS with the ids it lacks or holds differently. */
  SYNC_WANT: 'SYNC_WANT',
} as const;
export type Type = (typeof Type)[keyof typeof Type];

/** Protocol version carried in every envelope's `ver`. */
export const PROTOCOL_VERSION = 1;

/** Default maximum length of one frame (a line for NDJSON), in bytes. */
export const DEFAULT_MAX_LINE = 1024 * 1024;
/** Bytes queued to one peer before it is cut off as too slow (it reads nothing). */
export const DEFAULT_MAX_OUTBOUND = 16 * 1024 * 1024;

/** Codecs a connection may negotiate in HANDSHAKE. NDJSON is the default. */
export const Codec = { NDJSON: 'ndjson', MSGPACK: 'msgpack' } as const;
export type Codec = (typeof Codec)[keyof typeof Codec];

/**
 * The HANDSHAKE cap of a worker whose engine keeps its last prompt's evaluated tokens: the hub then
 * prefers it for a task that starts like its last prompt (cache-aware dispatch).
 */
export const PROMPT_CACHE_CAP = 'prompt-cache';

/**
 * The HANDSHAKE cap of a worker whose engine says when a running task is about to end (HEARTBEAT
 * `ending`): a hub that leases ahead (`lease_ahead_ms` in HANDSHAKE_ACK's config) leases it its next
 * task at that moment, rather than by the mean run time of its recent tasks.
 */
export const ENDS_SOON_CAP = 'ends-soon';
