import t from 'tap';
import { EntrySigner } from '../../hub/entry-signer.js';
import { verifyResult } from '../../protocol/result-mac.js';
import type { ReplicaEntry } from '../../protocol/index.js';

const TOKEN = 'token-for-this-swarm';
const entry = (id: string, r: { worker: string; attempt: number; text: string }): ReplicaEntry => ({ id, result: { ...r } }) as ReplicaEntry;

t.test('a result\'s MAC is kept for its task\'s result: every holder\'s entry verifies, and a changed result is signed again', async (t) => {
  const s = new EntrySigner(TOKEN);
  const result = { worker: 'w-1', attempt: 1, text: 'answer ä' };
  const macs: string[] = [];
  for (let holder = 0; holder < 5; holder++) {
    const e = entry('a', result);
    s.result(e, result);
    macs.push(e.result!.mac!);
    t.ok(verifyResult(TOKEN, 'a', e.result as never), `holder ${holder}'s entry verifies`);
  }
  t.equal(new Set(macs).size, 1, 'one MAC for the same result');
  // The same result object, changed in place (as a retry's would be): signed anew, never the old MAC.
  for (const change of [{ text: 'other' }, { attempt: 2 }, { worker: 'w-2' }]) {
    Object.assign(result, change);
    const e = entry('a', result);
    s.result(e, result);
    t.ok(verifyResult(TOKEN, 'a', e.result as never), `after ${Object.keys(change)[0]} changed: verifies`);
    t.not(e.result!.mac, macs[0], 'a new MAC');
  }
  // Another task's entry with the same result object (never made so, but never trusted either).
  const e = entry('b', result);
  s.result(e, result);
  t.ok(verifyResult(TOKEN, 'b', e.result as never), 'signed for its own id');
  const none = new EntrySigner(undefined);
  const plain = entry('c', result);
  none.result(plain, result);
  t.equal(plain.result!.mac, undefined, 'without a token nothing is signed');
});
