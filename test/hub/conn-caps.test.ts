// Idle connections to the worker port and the control API took the hub to 19,793 of its 20,000 fds:
// a few more and it could not open its journal, archive or log (EMFILE), nor accept its own workers.
// Each port now has a cap, both fitted under the fd limit less a reserve (hub/conn-caps.ts).
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { spawn } from 'node:child_process';
import t from 'tap';
import { CLI, alive, api, hubFile, tempDir, until } from '../helpers/cli.js';
import { killGroup, startHub, startWorkers, submit, tally } from '../helpers/failover.js';
import { MIN_RESERVE_FDS, fitConnCaps, openFilesLimit } from '../../hub/conn-caps.js';

const CAP = 50;
const EXTRA = 20;

interface ConnStatus { workers: { id: string }[]; connections: { worker_cap: number; control_cap: number; fd_limit: number | null; reserve: number; refused: { worker: number; control: number } } }

t.test('caps fit under the fd limit less a reserve of 10% or 256, whichever is more', async (t) => {
  t.same(fitConnCaps({ workers: 20_000, control: 1280 }, 1_048_576), { workers: 20_000, control: 1280, fdLimit: 1_048_576, reserve: 104_858 }, 'a large limit: as configured');
  const c = fitConnCaps({ workers: 20_000, control: 1280 }, 20_000);
  t.equal(c.reserve, 2000, '10% of 20,000');
  t.ok(c.workers + c.control <= 18_000 && c.lowered, `lowered to ${c.workers} + ${c.control}`);
  t.equal(c.control, 1280, 'the control API keeps its cap (under a quarter of the room)');
  const small = fitConnCaps({ workers: 20_000, control: 1280 }, 1024);
  t.equal(small.reserve, MIN_RESERVE_FDS, '256 under a small limit');
  t.same([small.workers, small.control], [576, 192], '1024: the control API gets a quarter of the 768 left');
  t.same(fitConnCaps({ workers: 10, control: 5000 }, 1024).control, 758, 'a control cap takes what the worker port leaves');
  t.same(fitConnCaps({ workers: 5, control: 5 }, 3), { workers: 1, control: 1, fdLimit: 3, reserve: 256, lowered: { workers: 5, control: 5 } }, 'at least 1 each');
  t.same(fitConnCaps({ workers: 10, control: 10 }, undefined), { workers: 10, control: 10, reserve: 0 }, 'no known limit: as configured');
  const f = path.join(tempDir(t), 'limits');
  fs.writeFileSync(f, 'Limit                     Soft Limit           Hard Limit           Units\nMax open files            4096                 524288               files\n');
  t.equal(openFilesLimit(f), 4096, 'the soft limit is read from /proc/self/limits');
});

t.test('a hub whose caps do not fit its ulimit -n lowers them and says so once', async (t) => {
  const dir = path.join(tempDir(t), 'state');
  const log = path.join(dir, 'hub.log');
  fs.mkdirSync(dir, { recursive: true });
  const sh = `ulimit -n 1024 && exec "${process.execPath}" "${CLI}" hub --state-dir "${dir}" --log-file "${log}"`;
  const child = spawn('sh', ['-c', sh], { stdio: 'ignore', detached: true });
  t.teardown(() => { try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(() => hubFile(dir)?.pid === child.pid, 20_000, 50), 'the hub started');
  const st = await api<ConnStatus>(dir, 'GET', '/status');
  t.equal(st.connections.fd_limit, 1024, 'it read its own limit');
  t.ok(st.connections.worker_cap + st.connections.control_cap <= 1024 - 256, `caps ${st.connections.worker_cap} + ${st.connections.control_cap} leave 256 fds`);
  const warned = fs.readFileSync(log, 'utf8').split('\n').filter((l) => l.includes('connection caps lowered'));
  t.equal(warned.length, 1, 'one warning');
  t.match(warned[0], /1024 open files .* less 256 .* worker port \d+ \(configured 20000\), control API \d+ \(configured 1280\)/, 'with the numbers');
});

/** Open `n` idle connections to `port`; while `refresh` holds, one the hub closes is opened again (bounded by `maxOpens`). */
function flood(port: number, n: number, refresh: boolean, maxOpens = 5000) {
  const socks = new Set<net.Socket>();
  let closed = 0, opens = 0, stopped = false;
  const open = (): void => {
    if (stopped || opens >= maxOpens) return;
    opens++;
    const s = net.connect({ host: '127.0.0.1', port });
    socks.add(s);
    s.on('error', () => {});
    s.on('close', () => { socks.delete(s); if (stopped) return; closed++; if (refresh) setTimeout(open, 20); });
  };
  for (let i = 0; i < n; i++) open();
  return { get closed() { return closed; }, get open() { return socks.size; }, stop() { stopped = true; for (const s of socks) s.destroy(); } };
}

/** A GET /status on its own connection (no pool): true when it is answered within 3 s. */
const answered = (port: number): Promise<boolean> => new Promise((resolve) => {
  const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent: false, timeout: 3000 }, (res) => { res.resume(); resolve(true); });
  req.on('error', () => resolve(false));
  req.on('timeout', () => { req.destroy(); resolve(false); });
});

t.test(`caps of ${CAP}: ${CAP + EXTRA} idle connections to each port are refused past the cap; a joined worker keeps working and tasks submitted once the control API frees run once`, async (t) => {
  const dir = path.join(tempDir(t), 'state');
  const hub = await startHub(dir, ['--max-worker-links', String(CAP), '--max-control-connections', String(CAP)]);
  t.teardown(() => killGroup(hub));
  const h = hubFile(dir)!;
  const workers = startWorkers(dir, 1);
  t.teardown(() => killGroup(workers));
  t.ok(await until(async () => ((await api<ConnStatus>(dir, 'GET', '/status')).workers ?? []).length === 1, 20_000, 100), 'the worker joined');
  const before = await submit(dir, 60, 'a');

  // The worker port's flood reopens what the hub closes (an unauthenticated link is also cut after 5 s).
  const wf = flood(h.port, CAP + EXTRA, true);
  const cf = flood(h.control.port, CAP + EXTRA, false);
  t.teardown(() => { wf.stop(); cf.stop(); });
  t.ok(await until(() => wf.closed >= EXTRA - 1 && cf.closed >= EXTRA, 10_000, 50), `past the caps, links are closed at accept (worker port ${wf.closed}, control ${cf.closed})`);
  t.ok(cf.open <= CAP, `the control API holds at most its cap: ${cf.open}`);
  t.notOk(await answered(h.control.port), 'a further control request is refused while the cap is held');

  // The joined worker runs every task submitted before, with both ports full.
  t.ok(await until(() => tally(dir, before).lost === 0, 30_000, 100), 'the joined worker ran the tasks while both ports were full');
  t.ok(alive(hub.child.pid!), 'the hub lives');

  // Freed, the control API answers and journals tasks; they run while the worker port stays flooded.
  cf.stop();
  t.ok(await until(() => answered(h.control.port), 10_000, 100), 'the control API answers once its connections are freed');
  const after = await submit(dir, 20, 'b');
  t.ok(await until(() => tally(dir, after).lost === 0, 30_000, 100), 'tasks submitted after the flood ran');
  const r = tally(dir, [...before, ...after]);
  t.same({ lost: r.lost, duplicated: r.duplicated, wrong: r.wrong }, { lost: 0, duplicated: 0, wrong: 0 }, `80 tasks: lost 0, duplicated 0 (${r.results} results)`);

  const st = await api<ConnStatus>(dir, 'GET', '/status');
  t.equal(st.connections.worker_cap, CAP, 'worker cap as configured (it fits)');
  t.equal(st.connections.control_cap, CAP, 'control cap as configured');
  t.ok(st.connections.refused.worker >= EXTRA - 1 && st.connections.refused.control >= EXTRA, `refusals counted: ${JSON.stringify(st.connections.refused)}`);
  const metrics = await api<string>(dir, 'GET', '/metrics');
  t.match(metrics, /swarm_connections_refused_total\{port="control"\} \d+/, 'and on /metrics');

  // A worker started while the worker port is full is closed at accept, retries, and joins once it frees.
  const late = startWorkers(dir, 1, 'late');
  t.teardown(() => killGroup(late));
  await new Promise((r) => setTimeout(r, 1500));
  t.ok(alive(late.child.pid!), 'the worker refused at accept keeps retrying (it did not exit)');
  wf.stop();
  t.ok(await until(async () => ((await api<ConnStatus>(dir, 'GET', '/status')).workers ?? []).length === 2, 30_000, 200), 'it joined once the worker port freed');
  const last = await submit(dir, 20, 'c');
  t.ok(await until(() => tally(dir, last).lost === 0, 30_000, 100), 'and tasks run');
  const all = tally(dir, [...before, ...after, ...last]);
  t.same({ lost: all.lost, duplicated: all.duplicated, wrong: all.wrong }, { lost: 0, duplicated: 0, wrong: 0 }, `100 tasks: lost 0, duplicated 0 (${all.results} results)`);

  // Logged rate-limited: at most 10 lines a kind per 10 s, however many were refused.
  const logs = fs.readdirSync(dir).filter((f) => f.startsWith('hub-') && f.endsWith('.log')).map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n');
  const lines = logs.split('\n').filter((l) => l.includes(': connection refused,') && !l.includes('more in'));
  t.ok(lines.length >= 2 && lines.length <= 40, `refusals logged one by one: ${lines.length}`);
  t.ok(alive(hub.child.pid!), 'the hub lives');
});
