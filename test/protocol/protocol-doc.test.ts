import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { ErrorCode, Type, DEFAULT_MAX_LINE, isErrorCode, validate } from '../../protocol/index.js';
import { until as untilMs } from '../helpers/wait.js';
import { ROOT, fixtureFile } from '../helpers/paths.js';

const until = (cond: () => boolean, ms = 5000) => untilMs(cond, ms, 10);

const docPath = path.join(ROOT, 'protocol', 'PROTOCOL.md');
const pyWorker = fixtureFile('py-worker.py');
const doc = fs.readFileSync(docPath, 'utf8');

t.test('PROTOCOL.md lists every error code with its status and fatality, and no stale ones', async (t) => {
  for (const [code, def] of Object.entries(ErrorCode)) {
    const row = doc.split('\n').find((l) => l.startsWith(`| \`${code}\` |`));
    t.ok(row, `${code} has a row in the table`);
    if (!row) continue;
    const cells = row.split('|').map((c) => c.trim());
    t.equal(cells[2], String(def.status), `${code} status`);
    t.equal(cells[3], def.fatal ? 'yes' : 'no', `${code} fatal`);
  }
  for (const m of doc.matchAll(/`(SWARM_ERR_[A-Z_]+)`/g)) t.ok(isErrorCode(m[1]), `${m[1]} named in the doc exists`);
});

t.test('every message type has an example line in PROTOCOL.md that validates', async (t) => {
  const blocks = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
  const seen = new Set<string>();
  for (const block of blocks) {
    t.notOk(block.includes('\n'), 'an example is one line');
    const v = validate(JSON.parse(block));
    t.ok(v.ok, `example validates: ${block.slice(0, 60)}${v.ok ? '' : ` (${v.code}: ${v.msg})`}`);
    if (v.ok) seen.add(v.msg.type);
  }
  for (const type of Object.values(Type)) t.ok(seen.has(type), `${type} has an example`);
  t.ok(doc.includes(DEFAULT_MAX_LINE.toLocaleString('en-US')), 'the default maximum line length is stated');
});

/** The Python worker as a child process, with its exit code and stderr. */
function startPy(args: string[]): { child: ChildProcess; exited: Promise<number | null>; stderr: () => string } {
  const child = spawn('python3', [pyWorker, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, stderr: () => err };
}

for (const codec of ['ndjson', 'msgpack'] as const) {
  t.test(`a Python worker written from PROTOCOL.md (${codec}) completes 20 tasks, each recorded once, and leaves on KILL`, async (t) => {
    // Imported here so the document checks above still run while the hub is being restored.
    const { startHub, waitWorkers, waitTasks } = await import('../helpers/inproc.js');
    const token = 'py-worker-token-42';
    const { hub, addr, stop } = await startHub({ token, msgpack: codec === 'msgpack' });
    const id = `py-${codec}`;
    const py = startPy(['--host', addr.host, '--port', String(addr.port), '--token', token, '--id', id, ...(codec === 'msgpack' ? ['--msgpack'] : [])]);
    t.teardown(async () => { if (py.child.exitCode === null) py.child.kill('SIGKILL'); await stop(); });

    const finals = new Map<string, number>();
    const off = hub.store.onChange((rec) => finals.set(rec.id, (finals.get(rec.id) ?? 0) + 1));
    t.ok(await waitWorkers(hub, 1), 'the Python worker joined');
    t.equal(hub.registry.get(id)?.conn.codec, codec, `the link speaks ${codec}`);

    const specs = Array.from({ length: 20 }, (_, i) => ({ id: `${codec}-t${i}`, prompt: `task ${i}: stream this wörd by wörd, please` }));
    const accepted = await hub.submit(specs);
    t.equal(accepted.filter((a) => a.duplicate).length, 0, 'all 20 accepted');
    t.ok(await waitTasks(hub, 20), 'all 20 finished');
    for (const s of specs) {
      const rec = hub.store.queue.get(s.id)!;
      t.equal(rec.state, 'done', `${s.id} done`);
      t.equal(rec.result?.text, s.prompt.toUpperCase(), `${s.id}: the streamed pieces make the upper-cased prompt`);
      t.match(rec.result?.receipt, { driver: 'py-upper', worker: id, attempt: 1 }, `${s.id} has a receipt`);
      t.ok((rec.result?.receipt?.tokens_out ?? 0) > 1, `${s.id} arrived in several pieces`);
      t.equal(finals.get(s.id), 1, `${s.id} recorded once`);
    }
    off();
    t.same(hub.store.queue.counts(), { queued: 0, leased: 0, done: 20, failed: 0 });
    t.equal(hub.metrics.duplicateResults, 0, 'no duplicate results');
    t.equal(hub.registry.get(id)?.done, 20, 'the worker ran each task once');
    t.equal(hub.metrics.protocolErrors.size, 0, 'the hub found nothing wrong in what the worker sent');

    t.ok(hub.kill(id, 'test over'), 'KILL sent');
    t.equal(await py.exited, 0, 'the worker exits 0 on KILL');
    t.ok(await until(() => hub.registry.size === 0), 'the worker left the registry');
    t.notMatch(py.stderr(), /hub error/, 'the hub sent the worker no ERROR');
  });
}

t.test('the Python worker is refused with SWARM_ERR_AUTH on a wrong token', async (t) => {
  const { startHub } = await import('../helpers/inproc.js');
  const { hub, addr, stop } = await startHub({ token: 'the-right-token' });
  const py = startPy(['--port', String(addr.port), '--host', addr.host, '--token', 'a-wrong-token']);
  t.teardown(async () => { if (py.child.exitCode === null) py.child.kill('SIGKILL'); await stop(); });
  t.equal(await py.exited, 3, 'exit code 3: refused');
  t.match(py.stderr(), /SWARM_ERR_AUTH/);
  t.equal(hub.registry.size, 0, 'nothing registered');
});

