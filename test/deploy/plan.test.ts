// swarm plan: figures checked against hand arithmetic for stories260K and a Llama-3-8B-shaped header.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { computeBufferBytes, kvBytesPerToken, plan, readModelShape, formatPlan } from '../../deploy/plan/index.js';
import { parseSize } from '../../protocol/bytes.js';
import { llama3_8bShape, writeGguf } from '../helpers/gguf-writer.js';
import { STORIES } from '../helpers/llama.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

t.test('stories260K: shape and per-agent figures', async (t) => {
  if (!fs.existsSync(STORIES)) {
    if (process.env.CI === 'true') t.fail(`test model ${STORIES} missing`); else t.skip(`no ${STORIES}`, () => {});
    return;
  }
  const m = await readModelShape(STORIES);
  t.match(m, { architecture: 'llama', layers: 5, headCount: 8, headCountKv: 4, keyLength: 8, valueLength: 8, embeddingLength: 64, vocabSize: 512, dominantType: 'F32', repackableBytes: 0 });
  t.equal(m.fileBytes, fs.statSync(STORIES).size);
  // 5 layers x 4 KV heads x (8 + 8) x 2 bytes = 640 B per token; 2048 tokens = 1.25 MiB (llama.cpp prints 1.25 MiB)
  t.equal(kvBytesPerToken(m), 640);
  const p = plan(m, { agents: 25, ctx: 2048 });
  t.equal(p.memory.perAgent.kv, 1_310_720);
  t.equal(p.memory.perAgent.compute, 4 * 512 * (512 + 128)); // 1.25 MiB; llama.cpp measured 3.52 MiB (small fixed buffers)
  t.equal(p.memory.perAgent.output, 2048);
  t.equal(p.memory.perAgent.total, 1_310_720 + 1_310_720 + 2048 + 30 * MiB + 60 * MiB);
  t.equal(p.memory.fixed.total, 2 * GiB + 100 * MiB + m.fileBytes);
  t.equal(p.maxAgents, Math.floor((16 * GiB - p.memory.fixed.total) / p.memory.perAgent.total));
  t.equal(p.maxAgents, 153);
  t.ok(p.fits);
  t.same(p.warnings.map((w) => w.code).sort(), ['cgroup', 'cpu']);
});

t.test('Llama-3-8B shape (Q4_K_M mix) on 4 vCPU / 16 GB', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-plan-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'llama3-8b-shape.gguf');
  const s = llama3_8bShape();
  const size = writeGguf(file, s.meta, s.tensors);
  // tensor data by hand: Q4_K 3,088,908,288 + Q6_K 2,082,447,360 + F32 1,064,960 = 5,172,420,608 B
  t.ok(size > 5_172_420_608 && size < 5_172_420_608 + MiB, `file ${size} = header + tensor data`);
  const m = await readModelShape(file);
  t.match(m, { layers: 32, headCount: 32, headCountKv: 8, keyLength: 128, embeddingLength: 4096, vocabSize: 128256, dominantType: 'Q4_K', fileBytes: size });
  t.same(m.bytesByType, { Q4_K: 3_088_908_288, Q6_K: 2_082_447_360, F32: 1_064_960 });
  // repacked on x86: the 5 Q4_K matrices of each of 32 layers (87,293,952 B a layer); token_embd is not repacked
  t.equal(m.repackableBytes, 32 * 87_293_952);

  // 32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B = 128 KiB per token; 2048 tokens = 256 MiB
  t.equal(kvBytesPerToken(m), 131_072);
  t.equal(computeBufferBytes(m, 2048, 512), 4 * 512 * (128256 + 8192)); // 279,445,504 B = 266.5 MiB

  const ram = 16 * GiB;
  const base = { agents: 25, ramBytes: ram, cpus: 4, ctx: 2048 };
  const kv = 268_435_456, compute = 279_445_504, out = 513_024, worker = 60 * MiB, engine = 30 * MiB;
  const fixedNoRepack = 2 * GiB + 100 * MiB + size;

  const repack = plan(m, { ...base, engine: 'per-worker' });
  t.equal(repack.memory.perAgent.total, kv + compute + out + engine + worker + 2_793_406_464);
  t.equal(repack.memory.fixed.total, fixedNoRepack - 2_793_406_464);
  t.equal(repack.maxAgents, 3, 'private Q4_K copies: 3 agents');
  t.notOk(repack.fits);
  t.same(repack.warnings.map((w) => w.code), ['no-fit', 'repack', 'cgroup', 'cpu', 'compute']);

  const noRepack = plan(m, { ...base, engine: 'per-worker', repack: false });
  t.equal(noRepack.memory.perAgent.total, 642_765_824);
  t.equal(noRepack.maxAgents, Math.floor((ram - fixedNoRepack) / 642_765_824));
  t.equal(noRepack.maxAgents, 15);

  const smallUb = plan(m, { ...base, engine: 'per-worker', repack: false, ubatch: 64 });
  t.equal(smallUb.memory.perAgent.compute, 4 * 64 * 136_448);
  t.equal(smallUb.maxAgents, 24);

  const shared = plan(m, { ...base, engine: 'shared' });
  t.equal(shared.memory.perAgent.total, worker + kv + out);
  t.equal(shared.memory.fixed.total, fixedNoRepack + engine + compute);
  t.equal(shared.maxAgents, 28);
  t.ok(shared.fits);

  // the spec's own arithmetic with decimal units: (16 GB - 2 GB - 5.17 GB) / 350 MB = 25
  const spec = plan(m, { ...base, ramBytes: parseSize('16GB') });
  t.equal(spec.spec.agents, 25);
  t.same(spec.alternatives.map((a) => a.label), ['per-worker engines', 'per-worker engines, --no-repack', 'per-worker engines, --no-repack, --ubatch 64', 'one shared engine']);
  t.match(formatPlan(repack), /KV bytes per token \(f16\)\s+131072 B/);
  t.match(formatPlan(repack), /at most 3 agents fit/);
});

t.test('batched engine: its agents share worker processes as `swarm up --procs` lays them out', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-plan-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'llama3-8b-shape.gguf');
  const s = llama3_8bShape();
  const size = writeGguf(file, s.meta, s.tensors);
  const m = await readModelShape(file);
  const kv = 268_435_456, compute = 279_445_504, out = 513_024;
  const base = { agents: 25, ramBytes: 16 * GiB, cpus: 4, ctx: 2048, engine: 'batched' as const };
  // Measured (deploy/plan/estimate.ts): a worker process 80 MiB, each further one 40, an agent in one
  // 1 MiB; the engine's own Node process 96 MiB besides its 30 MiB heap, and 0.5 MiB a sequence.
  const procs = (k: number) => 80 * MiB + (k - 1) * 40 * MiB;
  const perAgent = kv + out + MiB + MiB / 2;
  const host = 2 * GiB + 100 * MiB + size + 126 * MiB + compute;

  const auto = plan(m, base);
  t.equal(auto.workerProcesses, 3, 'auto on 4 vCPUs: one worker process per vCPU less one');
  t.equal(auto.memory.perAgent.worker, MiB);
  t.equal(auto.memory.perAgent.engine, MiB / 2);
  t.equal(auto.memory.perAgent.total, perAgent);
  t.equal(auto.memory.fixed.workerProcesses, procs(3));
  t.equal(auto.memory.fixed.engine, 126 * MiB);
  t.equal(auto.memory.fixed.total, host + procs(3));
  t.equal(auto.memory.total, host + procs(3) + 25 * perAgent);
  t.ok(auto.memory.fixed.workerProcesses + 25 * auto.memory.perAgent.worker < 25 * 18 * MiB, 'less than the 18 MiB an agent it counted when each had a process');
  t.equal(auto.maxAgents, Math.floor((16 * GiB - host - procs(3)) / perAgent));
  t.equal(auto.maxAgents, 33);
  t.ok(plan(m, { ...base, agents: auto.maxAgents }).fits, 'the most that fit do fit');
  t.notOk(plan(m, { ...base, agents: auto.maxAgents + 1 }).fits, 'and one more does not');
  t.match(formatPlan(auto), /worker processes \(Node\)\s+160 MiB: 3 \(--procs auto\)/);
  t.match(formatPlan(auto), /agent in a worker process\s+1 MiB\n/);

  const one = plan(m, { ...base, procs: 1 });
  t.equal(one.workerProcesses, 1);
  t.equal(one.memory.fixed.workerProcesses, 80 * MiB);
  const each = plan(m, { ...base, procs: 25 });
  t.equal(each.workerProcesses, 25);
  t.equal(each.memory.fixed.workerProcesses, procs(25));
  t.equal(plan(m, { ...base, cpus: 2 }).workerProcesses, 1, 'auto on 2 vCPUs: one');
  // The processes grow with the agents: past 1,000 agents a process, more of them.
  const many = plan(m, { ...base, agents: 2500, ramBytes: 1024 * GiB, procs: 1 });
  t.equal(many.workerProcesses, 3);
  const big = plan(m, { ...base, ramBytes: 1024 * GiB, procs: 1 });
  t.ok(plan(m, { ...base, ramBytes: 1024 * GiB, procs: 1, agents: big.maxAgents }).fits);
  t.notOk(plan(m, { ...base, ramBytes: 1024 * GiB, procs: 1, agents: big.maxAgents + 1 }).fits);
  t.equal(big.maxAgents, Math.floor((1024 * GiB - host - procs(Math.ceil(big.maxAgents / 1000))) / perAgent));

  // Per-worker engines and a shared llama-server's clients: still a process per agent counted.
  const perWorker = plan(m, { ...base, engine: 'per-worker', repack: false });
  const packed = plan(m, { ...base, engine: 'per-worker', repack: false, procs: 2 });
  t.equal(packed.workerProcesses, 2);
  t.same(packed.memory, perWorker.memory, 'engines packed into fewer processes were not measured: counted as before');
  t.equal(perWorker.memory.fixed.workerProcesses, 0);
  t.equal(plan(m, { ...base, engine: 'shared', procs: 2 }).workerProcesses, 25, 'a shared llama-server: a process per agent, whatever --procs says');
});

t.test('parseSize', async (t) => {
  t.equal(parseSize('16G'), 16 * GiB);
  t.equal(parseSize('16GiB'), 16 * GiB);
  t.equal(parseSize('16GB'), 16e9);
  t.equal(parseSize('512M'), 512 * MiB);
  t.throws(() => parseSize('lots'));
});
