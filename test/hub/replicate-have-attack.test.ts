import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { HaveBuilder } from '../../protocol/replica-have.js';
import { tempDir } from '../helpers/cli.js';
import { finishAsGhost, quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { until } from '../helpers/wait.js';

/**
 * A hostile holder's HANDSHAKE `sync.have` (a raw client with a worker's credential): far past the
 * bucket limit, malformed, with a bucket count that does not match its hashes, a copy of the hub's
 * own digest (claiming to hold everything while holding nothing), a different digest on every
 * reconnect. The hub answers an ERROR or ignores it; an honest holder's copy, the hub's records and
 * a holder joining after are untouched: lost, duplicated and changed 0.
 */

const N = 3000;
const OPEN = 100;

t.test('a lying or malformed have costs nobody but the liar', async (t) => {
  const dir = tempDir(t);
  const { hub, addr, stop } = await startHub({ stateDir: dir });
  const ids = Array.from({ length: N }, (_, i) => `ha-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: `p ${id}`, role: 'x' })));
  const finish = (n: number) => finishAsGhost(hub, n);
  await finish(N - OPEN);

  const pools: WorkerPool[] = [];
  const runs: Promise<unknown>[] = [];
  const holder = (id: string) => {
    const pool = new WorkerPool({ ids: [id], driver: { name: 'echo', options: {} }, slots: 1, locate: async () => addr, failover: { host: '127.0.0.1', port: 0 } }, quiet);
    pools.push(pool); runs.push(pool.run());
    return () => pool.agents[0]?.failover?.node.replica;
  };
  const raws: RawWorker[] = [];
  t.teardown(async () => { for (const r of raws) r.destroy(); for (const p of pools) await p.stop('test over'); await Promise.all(runs); await stop(); });
  const agrees = (replica: ReturnType<ReturnType<typeof holder>>) => !!replica && ids.every((id) => {
    const mine = hub.store.queue.get(id);
    return replica.state(id) === mine?.state && (mine?.state !== 'done' || replica.get(id)?.result?.text === `echo: p ${id}`);
  });
  const honest = holder('honest');
  t.ok(await waitWorkers(hub, 1), 'the honest holder joined');
  t.ok(await until(() => agrees(honest()), 30_000), 'the honest holder has the whole state');

  let k = 0;
  /** A raw holder (its own host, so it is elected) reporting `have`; the reply and what it then received. */
  const liar = async (have: unknown): Promise<{ reply: Frame; entries: () => number; raw: RawWorker }> => {
    const raw = await RawWorker.connect(addr);
    raws.push(raw);
    const id = `liar-${++k}`;
    const reply = await raw.handshake({ worker_id: id, peer_addr: '127.0.0.1:9', host_id: `host-${id}`, pid: 100_000 + k, sync: { gen: 'another-hub', ver: 7, have } });
    const entries = () => raw.frames.filter((f) => f.type === 'STATE').reduce((n, f) => n + (f.payload?.entries?.length ?? 0), 0);
    return { reply, entries, raw };
  };
  const refused = (r: Frame) => r?.type === 'ERROR' && /^SWARM_ERR_/.test(String(r.payload?.code));

  // Far past the limit (10x the buckets), and malformed: refused at the handshake with a code.
  const big = await liar({ n: 4096, h: Array.from({ length: 40_960 }, (_, i) => i) });
  t.ok(refused(big.reply), `10x the buckets: ${JSON.stringify(big.reply?.payload)}`);
  for (const bad of [{ n: 40_960, h: [] }, { n: 16, h: Array(16).fill(-1) }, { n: 16, h: Array(16).fill(2 ** 33) }, { n: 16, h: Array(16).fill(0.5) }, { n: 'all' }, 'everything', { n: 0, h: [] }]) {
    const r = await liar(bad);
    t.ok(refused(r.reply), `malformed ${JSON.stringify(bad).slice(0, 40)}: ${r.reply?.payload?.code}`);
    t.notOk([...hub.registry.all()].some((w) => w.id === `liar-${k}`), 'and it did not join');
    r.raw.destroy();
  }

  // A bucket count its hashes do not match, or not a power of two: ignored, the whole state goes.
  for (const odd of [{ n: 4096, h: [1, 2, 3] }, { n: 3, h: [1, 2, 3] }, { n: 16, h: Array(4096).fill(0) }]) {
    const r = await liar(odd);
    t.equal(r.reply?.type, 'HANDSHAKE_ACK', `odd count n=${odd.n} h=${odd.h.length}: joined`);
    t.ok(await until(() => r.entries() >= N, 20_000), `and got the whole state (${r.entries()} entries)`);
    r.raw.destroy();
  }

  // The hub's own digest, as if it held everything: it gets the open tasks only, its own loss.
  const everything = () => {
    const d = new HaveBuilder(256);
    for (const r of hub.store.queue.all()) if (r.result) d.add(r.id, 3, r.result.worker, r.result.attempt);
    return d.digest();
  };
  const syncsBefore = hub.failover.stats.haveSyncs;
  const claim = await liar(everything());
  t.equal(claim.reply?.type, 'HANDSHAKE_ACK', 'claims everything: joined');
  t.ok(await until(() => hub.failover.stats.haveSyncs > syncsBefore, 20_000), 'its claim was used');
  await until(() => claim.entries() >= OPEN, 20_000);
  t.ok(claim.entries() < N, `it got what it claimed to lack (${claim.entries()} entries)`);

  // A different digest on every reconnect, while tasks finish.
  for (let i = 0; i < 5; i++) {
    const r = await liar(i % 2 ? everything() : { n: 16 << i, h: Array.from({ length: 16 << i }, () => (Math.random() * 2 ** 32) >>> 0) });
    t.equal(r.reply?.type, 'HANDSHAKE_ACK', `reconnect ${i}: joined`);
    await finish(10);
    r.raw.destroy();
  }
  claim.raw.destroy();

  // Nobody else paid: the honest holder's copy and a holder joining now match the hub exactly.
  await finish(OPEN);
  const c = hub.store.queue.counts();
  t.equal(c.done, N, 'every task recorded done once (lost 0, duplicated 0)');
  t.ok(await until(() => agrees(honest()), 30_000), 'the honest holder still equals the hub (changed 0)');
  // One holder a process: the honest one leaves, so the late one (same process) is elected and synced.
  const late = holder('late');
  await pools[0]!.stop('make room');
  t.ok(await until(() => agrees(late()), 30_000), 'a holder joining after the liars gets the whole state');
  t.equal(ids.filter((id) => hub.store.queue.get(id)?.result?.text !== `echo: p ${id}`).length, 0, 'the hub\'s own records unchanged');
});
