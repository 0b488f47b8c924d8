import t from 'tap';
import { HandoffStats } from '../../drivers/batched/handoff-stats.js';

t.test('the hand-off line: a connection\'s first chat has no idle gap; means and quantiles of the rest', async (t) => {
  const s = new HandoffStats();
  t.match(s.line(), /^0 chats; idle .* mean -, p50 -, p90 - \(0\); arrival to first token ms: mean -, p50 -, p90 - \(0\); sent ahead: 0 chats, idle mean -$/, 'nothing yet');
  s.arrived(undefined);
  s.firstToken(10);
  for (const g of [1, 2, 3, 4]) { s.arrived(g); s.firstToken(20); }
  t.equal(s.chats, 5);
  t.equal(s.line(), "5 chats; idle between a sequence's chats ms: mean 2.50, p50 3.00, p90 4.00 (4); arrival to first token ms: mean 18.00, p50 20.00, p90 20.00 (5); sent ahead: 0 chats, idle mean -");
  // Chats sent ahead (queued behind the running one) count apart too: they start as it ends.
  s.arrived(0.5, true);
  s.arrived(0.1, true);
  t.match(s.line(), /^7 chats; .*\(6\); .*; sent ahead: 2 chats, idle mean 0\.30$/);
});

t.test('the samples for the quantiles stay bounded; the means cover every chat', async (t) => {
  const s = new HandoffStats();
  for (let i = 0; i < 10_000; i++) s.arrived(i < 5000 ? 100 : 1);
  t.match(s.line(), /mean 50\.50, p50 1\.00, p90 1\.00 \(10000\)/, 'the quantiles from the latest 4,096, the mean from all');
});
