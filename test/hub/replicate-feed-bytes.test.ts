import t from 'tap';
import pino from 'pino';
import type { ReplicaEntry } from '../../protocol/index.js';
import { HolderFeed, type FeedLink } from '../../hub/replicate-feed.js';
import { chunks } from '../../hub/replicate-chunks.js';
import { feedLines } from '../../cli/commands/status-feeds.js';

/**
 * `swarm status` shows what waits for each holder's link. It was the JSON's length in characters,
 * printed as bytes: a prompt in Japanese is 3 bytes a character down the link, so a holder three
 * times further behind than shown. It is counted in bytes now (the bound stays on characters).
 */

const log = pino({ level: 'silent' });

t.test('what waits for a holder is shown in bytes, as it goes down the link', async (t) => {
  const sent: string[] = [];
  let writable = false;
  const link: FeedLink = { send: (_p, json) => { sent.push(json); }, get writable() { return writable; }, drained: () => new Promise(() => {}), isClosed: false };
  const feed = new HolderFeed(link, (r) => r as unknown as ReplicaEntry, () => [], { chunkBytes: 64 * 1024, maxBacklog: 1 << 30, log });
  const entries = Array.from({ length: 200 }, (_, i) => ({ id: `b-${i}`, spec: { id: `b-${i}`, prompt: '日本語のプロンプト'.repeat(20), priority: 0 }, seq: i }) as unknown as ReplicaEntry);
  feed.flush(chunks(entries, 64 * 1024, log));
  feed.evict(['b-0'], JSON.stringify({ full: false, entries: [], evicted: ['b-0'] }));
  const v = feed.view();
  t.ok(v.backlog > 2 * feed.backlogChars, `${v.backlog} bytes waiting, ${feed.backlogChars} characters (before: ${feed.backlogChars} shown as bytes)`);
  // What goes down the link once it takes more: the bytes shown.
  writable = true;
  (feed as unknown as { pump(): void }).pump();
  t.equal(sent.reduce((n, j) => n + Buffer.byteLength(j), 0), v.backlog, 'the bytes shown are the bytes of the frames sent');
  t.equal(feed.view().backlog, 0, 'nothing waits once sent');
  const line = feedLines([{ holder: 'w-1', ...v, overflows: 1 }])[1]!;
  t.match(line, /w-1: in sync, \d+(\.\d+)? KiB waiting/, `status: ${line}`);
});
