import t from 'tap';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import type { runHub as RunHub, RunningHub } from '../../cli/run-hub.js';
import { ROOT, alive, api, journal, pidsMentioning, until } from '../helpers/cli.js';
import { fixtureFile } from '../helpers/paths.js';

/**
 * A loopback proxy between the hub and its supervised workers that can cut every link (both ends
 * closed, as a reset looks to each side) and refuse new ones for a while. The workers named in
 * `badToken` present a wrong token in their HANDSHAKE (the first line, NDJSON): the hub refuses them
 * with SWARM_ERR_AUTH, as it would a worker given a wrong credential.
 */
async function cutter(target: () => number | undefined, badToken = new Set<string>()) {
  const links = new Set<net.Socket>();
  let refusing = false;
  const server = net.createServer((client) => {
    const port = target();
    if (refusing || port === undefined) { client.destroy(); return; }
    const upstream = net.connect({ host: '127.0.0.1', port });
    links.add(client); links.add(upstream);
    let head: Buffer = Buffer.alloc(0);
    const onHead = (c: Buffer) => {
      head = Buffer.concat([head, c]);
      const nl = head.indexOf(10);
      if (nl < 0 && head.length < 65_536) return;
      client.off('data', onHead);
      const cut = nl < 0 ? head.length : nl;
      let first: Buffer = head.subarray(0, cut);
      try {
        const m = JSON.parse(first.toString()) as { type?: string; payload?: { worker_id?: string; token?: string } };
        if (m.type === 'HANDSHAKE' && m.payload?.worker_id && badToken.has(m.payload.worker_id)) {
          m.payload.token = 'wc1.wrong';
          first = Buffer.from(JSON.stringify(m));
        }
      } catch { /* not a handshake line: passed on as it came */ }
      upstream.write(Buffer.concat([first, head.subarray(cut)]));
      client.pipe(upstream);
    };
    client.on('data', onHead);
    upstream.pipe(client);
    const end = () => { client.destroy(); upstream.destroy(); links.delete(client); links.delete(upstream); };
    for (const s of [client, upstream]) { s.on('error', end); s.on('close', end); }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    addr: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    /** Close every link now. */
    cut: () => { for (const s of [...links]) s.destroy(); },
    refuse: (on: boolean) => { refusing = on; },
    close: () => new Promise<void>((r) => { for (const s of links) s.destroy(); server.close(() => r()); }),
  };
}

/** A hub with `agents` supervised echo workers (the compiled CLI, as `swarm up` runs them) behind a cutter. */
async function swarmBehindCutter(t: Tap, config: { heartbeatMs?: number; deadAfterMs?: number }, procs = 2) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-sup-'));
  // The compiled run-hub: it spawns workers from dist/cli/main.js, its sibling.
  const { runHub } = await import(pathToFileURL(path.join(ROOT, 'dist/cli/run-hub.js')).href) as { runHub: typeof RunHub };
  let running: RunningHub | undefined;
  const proxy = await cutter(() => running?.hub.address?.port ?? readPort(dir));
  t.teardown(async () => { await running?.stop(); await proxy.close(); fs.rmSync(dir, { recursive: true, force: true }); });
  running = await runHub({
    dir, log: pino({ level: process.env.SWARM_TEST_LOG ?? 'silent' }), agents: 2, procs,
    config: { host: '127.0.0.1', port: 0, controlPort: 0, fsyncMs: 0, ...config },
    workerArgs: ['--hub', proxy.addr, '--driver', 'echo', '--driver-opt', 'latency_ms=1500', '--slots', '1'],
  });
  return { dir, running, proxy };
}

type Tap = { teardown(fn: () => unknown): void };

function readPort(dir: string): number | undefined {
  try { return (JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { port: number }).port; } catch { return undefined; }
}

/** Every task done, its result journaled exactly once. */
function tally(dir: string, ids: string[]): { lost: number; duplicated: number } {
  const results = journal(dir).filter((r) => r.t === 'result');
  const per = new Map<string, number>();
  for (const r of results) per.set(r.id!, (per.get(r.id!) ?? 0) + 1);
  return { lost: ids.filter((id) => !per.has(id)).length, duplicated: [...per.values()].filter((n) => n > 1).length };
}

t.test('a supervised worker whose link drops reconnects and keeps its process (same pid), and finishes its tasks', async (t) => {
  const { dir, running, proxy } = await swarmBehindCutter(t, {}); // dead_after 10 s: the reconnect grace is 20 s
  const { hub, supervisor } = running;
  t.ok(await until(() => hub.registry.size === 2, 60_000), 'both workers joined');
  const pids = supervisor!.pids().sort();
  t.same([...hub.registry.all()].map((w) => w.pid).sort(), pids, 'the workers are the supervised processes');
  const joined = new Map([...hub.registry.all()].map((w) => [w.id, w.connectedAt]));

  const ids = Array.from({ length: 6 }, (_, i) => `sup-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  t.ok(await until(() => [...hub.registry.all()].every((w) => w.inflight.size === 1), 30_000), 'both workers are running a task');
  proxy.cut();
  // Both come back on new links, as the same processes.
  t.ok(await until(() => [...hub.registry.all()].filter((w) => w.connectedAt > joined.get(w.id)!).length === 2, 30_000), 'both workers reconnected');
  t.ok(await until(() => ids.every((id) => hub.store.queue.get(id)?.state === 'done'), 60_000), 'every task done');
  t.same(supervisor!.pids().sort(), pids, 'the supervisor kept both processes');
  t.same([...hub.registry.all()].map((w) => w.pid).sort(), pids, 'the reconnected workers are the same pids');
  t.ok(pids.every(alive));
  t.same(tally(dir, ids), { lost: 0, duplicated: 0 });
});

t.test('a supervised worker that stays disconnected past the grace is killed and respawned', async (t) => {
  // dead_after 1.5 s: the grace is 3 s.
  const { dir, running, proxy } = await swarmBehindCutter(t, { heartbeatMs: 300, deadAfterMs: 1500 });
  const { hub, supervisor } = running;
  t.ok(await until(() => hub.registry.size === 2, 60_000), 'both workers joined');
  const pids = supervisor!.pids();
  proxy.refuse(true);
  proxy.cut();
  // Nobody can reconnect: after the grace the supervisor replaces both processes.
  t.ok(await until(() => { const now = supervisor!.pids(); return now.length === 2 && now.every((p) => !pids.includes(p)); }, 60_000, 100), 'both processes were replaced');
  t.ok(pids.every((p) => !alive(p)), 'the old processes are gone');
  proxy.refuse(false);
  t.ok(await until(() => hub.registry.size === 2, 60_000), 'the new workers joined');
  const ids = ['late-0', 'late-1'];
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  t.ok(await until(() => ids.every((id) => hub.store.queue.get(id)?.state === 'done'), 60_000), 'and run tasks');
  t.same(tally(dir, ids), { lost: 0, duplicated: 0 });
});

t.test('two workers in one process: one that stays disconnected past the grace takes the process, and both come back', async (t) => {
  const { dir, running, proxy } = await swarmBehindCutter(t, { heartbeatMs: 300, deadAfterMs: 1500 }, 1);
  const { hub, supervisor } = running;
  t.ok(await until(() => hub.registry.size === 2, 60_000), 'both workers joined');
  const pids = supervisor!.pids();
  t.equal(pids.length, 1, 'one process');
  t.same([...hub.registry.all()].map((w) => w.pid), [pids[0], pids[0]], 'both workers live in it');
  proxy.refuse(true);
  proxy.cut();
  t.ok(await until(() => { const now = supervisor!.pids(); return now.length === 1 && now[0] !== pids[0]; }, 60_000, 100), 'the process was replaced');
  t.notOk(alive(pids[0]!), 'the old process is gone');
  proxy.refuse(false);
  t.ok(await until(() => hub.registry.size === 2, 60_000), 'both workers joined again');
  t.same([...hub.registry.all()].map((w) => w.pid), supervisor!.pids().concat(supervisor!.pids()), 'from the new process');
  const ids = ['late-0', 'late-1', 'late-2'];
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  t.ok(await until(() => ids.every((id) => hub.store.queue.get(id)?.state === 'done'), 60_000), 'and run tasks');
  t.same(tally(dir, ids), { lost: 0, duplicated: 0 });
});

t.test('after a hub crash, an adopted process one of whose agents had stopped (refused, not KILLed) is replaced after the grace: that agent comes back, no task lost or repeated', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-sup-'));
  const { runHub } = await import(pathToFileURL(path.join(ROOT, 'dist/cli/run-hub.js')).href) as { runHub: typeof RunHub };
  let second: RunningHub | undefined;
  // w-2's first HANDSHAKE is refused: it has never joined, so it stops for good (a refusal before
  // joining is not retried) while w-1 and w-3 in the same process go on.
  const bad = new Set(['w-2']);
  const proxy = await cutter(() => second?.hub.address?.port ?? readPort(dir), bad);
  // dead_after 1.5 s: the reconnect grace is 3 s.
  const opts = {
    dir, agents: 3, procs: 1,
    // A token, as `swarm up` has: each worker then presents its own credential, which w-2's lacks.
    config: { host: '127.0.0.1', port: 0, controlPort: 0, fsyncMs: 0, heartbeatMs: 300, deadAfterMs: 1500, token: randomBytes(24).toString('hex') },
    workerArgs: ['--hub', proxy.addr, '--driver', 'echo', '--driver-opt', 'latency_ms=200', '--slots', '1'],
  };
  const first = spawn(process.execPath, [fixtureFile('run-hub-child.mjs'), JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(async () => {
    try { first.kill('SIGKILL'); } catch { /* gone */ }
    await second?.stop();
    // Whatever still runs from this directory (a failed test's workers): ours, started for it.
    for (const pid of pidsMentioning(dir)) try { process.kill(-pid, 'SIGKILL'); } catch { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
    await proxy.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  let said = '';
  first.stdout!.on('data', (c: Buffer) => (said += c.toString()));
  t.ok(await until(() => said.includes('ready'), 60_000), 'the first hub is up');
  const status = () => api<{ workers: { id: string; pid: number }[] }>(dir, 'GET', '/status').catch(() => ({ workers: [] }));
  const log = () => { try { return fs.readFileSync(path.join(dir, 'logs', 'w-1.log'), 'utf8'); } catch { return ''; } };
  t.ok(await until(async () => (await status()).workers.map((w) => w.id).sort().join() === 'w-1,w-3' && /refused by the hub/.test(log()), 60_000), 'w-1 and w-3 joined; w-2 was refused and stopped');
  const pid = (JSON.parse(fs.readFileSync(path.join(dir, 'pids', 'w-2.pid'), 'utf8')) as { pid: number }).pid;
  t.same((await status()).workers.map((w) => w.pid), [pid, pid], 'all in one process');

  const before = Array.from({ length: 40 }, (_, i) => `a-${i}`);
  await api(dir, 'POST', '/tasks', { tasks: before.map((id) => ({ id, prompt: id })) });
  t.ok(await until(() => journal(dir).filter((r) => r.t === 'result').length >= 5, 30_000), 'results flowing');
  first.kill('SIGKILL');
  t.ok(await until(() => first.exitCode !== null || first.signalCode !== null, 10_000), 'the first hub crashed');
  t.ok(alive(pid), 'its worker process lives on');

  // Nothing refuses w-2 now: only its process's replacement can bring it back.
  bad.clear();
  second = await runHub({ ...opts, log: pino({ level: process.env.SWARM_TEST_LOG ?? 'silent' }) });
  const { hub, supervisor } = second;
  t.same(supervisor!.pids(), [pid], 'the second hub adopted the process');
  const after = Array.from({ length: 40 }, (_, i) => `b-${i}`);
  await hub.submit(after.map((id) => ({ id, prompt: id })));
  t.ok(await until(() => { const now = supervisor!.pids(); return now.length === 1 && now[0] !== pid; }, 30_000, 100), 'the grace ended with the process replaced');
  const ids = [...before, ...after];
  // So the count below means something: the process went with w-1's and w-3's work unfinished.
  t.ok(ids.some((id) => hub.store.queue.get(id)?.state !== 'done'), 'mid-batch');
  t.notOk(alive(pid), 'the old process is gone');
  const fresh = supervisor!.pids()[0];
  t.ok(await until(() => hub.registry.size === 3 && [...hub.registry.all()].every((w) => w.pid === fresh), 60_000), 'w-1, w-2 and w-3 joined from the new process');
  t.ok(await until(() => ids.every((id) => hub.store.queue.get(id)?.state === 'done'), 60_000), 'every task done');
  const late = Array.from({ length: 9 }, (_, i) => `c-${i}`);
  await hub.submit(late.map((id) => ({ id, prompt: id })));
  t.ok(await until(() => late.every((id) => hub.store.queue.get(id)?.state === 'done'), 60_000), 'and the three run new ones');
  t.same(tally(dir, [...ids, ...late]), { lost: 0, duplicated: 0 });
  t.ok(journal(dir).some((r) => r.t === 'result' && (r as { worker?: string }).worker === 'w-2'), 'w-2 among them');
});
