/** One holder's or keeper's feed as the hub's status has it (`failover.feeds`: hub/replicate-feed.ts FeedView); fields a hub before them lacks are absent. */
export interface FeedStatus {
  holder: string; keeper?: boolean; syncing: boolean; backlog?: number; frames: number; syncs: number; overflows: number;
  waits?: number; yields?: number; skipped: number; synced: number; bare: number; oversize?: number;
}

/** The hub's counters of holders that fell behind (`failover` in the status). */
export interface BehindStatus { behindResumed?: number; behindRestarted?: number; rescans?: number }

/**
 * One line per holder's feed: whether a sync is under way, what waits for its link, and why it is
 * behind if it is (`overflows`: deltas dropped past the bound; `waits`: the holder read slowly;
 * `yields`: a sync gave the hub's loop its turn), so an operator sees a holder falling behind and why.
 * While every holder is in sync with little waiting and none ever fell behind, one line says so
 * (`--json` has the counters): the counters are for the swarm whose holders fall behind.
 */
export function feedLines(feeds: readonly FeedStatus[], b: BehindStatus = {}): string[] {
  if (!feeds.length) return [];
  const n = (x: number | undefined) => (x ?? 0).toLocaleString('en-US');
  const quiet = (b.behindResumed ?? 0) + (b.behindRestarted ?? 0) + (b.rescans ?? 0) === 0
    && feeds.every((f) => !f.syncing && f.overflows === 0 && (f.backlog ?? 0) < QUIET_BACKLOG);
  const keepers = feeds.filter((f) => f.keeper).length;
  const who = `${feeds.length - keepers} holder(s)${keepers ? ` and ${keepers} keeper(s) of the open tasks` : ''}`;
  if (quiet) return [`feeds    ${who} in sync (${feeds.slice(0, 5).map((f) => f.holder).join(', ')}${feeds.length > 5 ? ', …' : ''}), none fell behind`];
  const out = feeds.map((f) => `  ${f.holder}${f.keeper ? ' (keeper)' : ''}: ${f.syncing ? 'SYNCING' : 'in sync'}${f.backlog !== undefined ? `, ${chars(f.backlog)} of JSON waiting` : ''}; ${n(f.frames)} frames, ${n(f.syncs)} syncs, ${n(f.overflows)} fell behind, ${n(f.waits)} waits for the link, ${n(f.yields)} yields to the loop${f.oversize ? `, ${n(f.oversize)} flushes over the bound sent whole` : ''}; ${n(f.synced)} entries synced (${n(f.bare)} without spec), ${n(f.skipped)} deltas left to a sync`);
  const behind = (b.behindResumed ?? 0) + (b.behindRestarted ?? 0);
  return [`feeds    ${who}; fell behind ${n(behind)} time(s): ${n(b.behindResumed)} resumed from a mark, ${n(b.behindRestarted)} synced from zero, ${n(b.rescans)} passes over the hot state`, ...out];
}

/**
 * The hub counts what waits for a link in JSON characters (its bound is set in them, and counting
 * bytes would cost a pass over every frame's text): said as characters, not as bytes, since a
 * prompt in Japanese is 3 bytes a character down the link.
 */
function chars(c: number): string {
  return c < 10_000 ? `${c.toLocaleString('en-US')} characters` : c < 1e6 ? `${Math.round(c / 1000)}k characters` : `${(c / 1e6).toFixed(1)}M characters`;
}

/** What may wait for a holder's link, in JSON characters, for its feed to count as keeping up. */
const QUIET_BACKLOG = 1 << 20;
