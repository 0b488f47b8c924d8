import t from 'tap';
import path from 'node:path';
import { TaskStore } from '../../hub/store.js';
import { MAX_TASKS_PER_REQUEST } from '../../hub/control.js';
import { api, hubFile, swarmBg, tempDir, until } from '../helpers/cli.js';

/**
 * One upload far past what a request may carry (a million tiny tasks: 20 MB, under the body limit)
 * against a real hub process: refused at once with a code, nothing of it queued, the hub answering
 * all along; and the largest batch a request may carry is journaled as one group commit.
 */

interface Status { tasks: { queued: number } }

const ndjson = (n: number, prefix: string): string => Array.from({ length: n }, (_, i) => `{"id":"${prefix}${i}","prompt":"p"}`).join('\n');

t.test('a million tasks in one POST /tasks: 400 SWARM_ERR_TOO_LARGE naming the bound, nothing queued, the hub keeps answering', async (t) => {
  const state = path.join(tempDir(t), 'state');
  const hub = swarmBg(['hub', '--state-dir', state]);
  t.teardown(() => { try { process.kill(-hub.child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(() => hubFile(state)?.pid === hub.child.pid, 60_000), 'hub up');
  const h = hubFile(state)!;
  const res = await fetch(`http://${h.control.host}:${h.control.port}/tasks`, { method: 'POST', body: ndjson(10 * MAX_TASKS_PER_REQUEST, 'm'), headers: { authorization: `Bearer ${h.token}` } });
  const body = await res.json() as { code: string; msg: string };
  t.equal(res.status, 400, `refused with a client error (${body.code}: ${body.msg})`);
  t.equal(body.code, 'SWARM_ERR_TOO_LARGE');
  t.match(body.msg, /at most 100,000/, 'the message names the bound');
  t.equal((await api<Status>(state, 'GET', '/status')).tasks.queued, 0, 'nothing of the refused upload is queued');
});

t.test('more tasks than fit in a call\'s arguments are journaled in one submit, all of them', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, { maxDepth: 1_000_000, leaseMs: 60_000, defaultMaxAttempts: 3 }, { fsyncMs: 0 });
  const n = 2 * MAX_TASKS_PER_REQUEST;
  const out = await s.submitMany(Array.from({ length: n }, (_, i) => ({ id: `s${i}`, prompt: 'p' })));
  t.equal(out.filter((o) => !o.duplicate).length, n, 'every task accepted');
  await s.close();
  const again = await TaskStore.open(dir, { maxDepth: 1_000_000, leaseMs: 60_000, defaultMaxAttempts: 3 }, { fsyncMs: 0 });
  t.equal(again.queue.counts().queued, n, 'and every one is in the journal');
  await again.close();
});
