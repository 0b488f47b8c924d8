/** Wire shapes of gossip traffic between workers (msgpack over the peer transport). */

/** A member's liveness as SWIM sees it. */
export const MemberState = { ALIVE: 'alive', SUSPECT: 'suspect', DEAD: 'dead' } as const;
export type MemberState = (typeof MemberState)[keyof typeof MemberState];

/** One membership change, the unit piggy-backed on probes. `by` names who suspected or declared. */
export interface Change {
  id: string;
  addr: string;
  inc: number;
  s: MemberState;
  by?: string;
}

/** What the sender believes about the receiver, sent only when it is not `alive` (drives refutation). */
export interface YourView { s: MemberState; inc: number }

/** Piggy-backed broadcasts: membership changes and application broadcasts (replica deltas). */
export interface Piggy { m?: Change[]; u?: unknown[] }

interface Base { from: string; fa: string }

export const GossipType = {
  PING: 'ping', ACK: 'ack', PING_REQ: 'ping-req', NACK: 'nack', GOSSIP: 'gossip', STATE: 'state', APP: 'app',
} as const;
export type GossipType = (typeof GossipType)[keyof typeof GossipType];

/** A message on the peer transport. Every message names its sender and the sender's address. */
export type GossipMsg =
  | (Base & { t: 'ping'; seq: number; to: string; pb?: Piggy; yv?: YourView })
  | (Base & { t: 'ack'; seq: number; pb?: Piggy; yv?: YourView })
  | (Base & { t: 'ping-req'; seq: number; target: string; ta: string; pb?: Piggy })
  | (Base & { t: 'nack'; seq: number })
  | (Base & { t: 'gossip'; pb: Piggy })
  | (Base & { t: 'state'; members: Change[]; reply: boolean })
  | (Base & { t: 'app'; ch: string; body: unknown });

/** A message-passing endpoint. Addresses are opaque strings ("host:port" for TCP, a name in memory). */
export interface Transport {
  /** This endpoint's own address, as peers should dial it. */
  readonly addr: string;
  /** Best effort, fire and forget: a lost message is normal (SWIM tolerates it). */
  send(to: string, msg: GossipMsg): void;
  onMessage(fn: (msg: GossipMsg) => void): void;
  close(): Promise<void>;
}
