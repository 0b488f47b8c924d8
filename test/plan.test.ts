// swarm plan: figures checked against hand arithmetic for stories260K and a Llama-3-8B-shaped header.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { computeBufferBytes, kvBytesPerToken, parseSize, plan, readModelShape, formatPlan } from '../deploy/plan/index.js';
import { llama3_8bShape, writeGguf } from './helpers/gguf-writer.js';
import { STORIES } from './helpers/llama.js';

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

t.test('parseSize', async (t) => {
  t.equal(parseSize('16G'), 16 * GiB);
  t.equal(parseSize('16GiB'), 16 * GiB);
  t.equal(parseSize('16GB'), 16e9);
  t.equal(parseSize('512M'), 512 * MiB);
  t.throws(() => parseSize('lots'));
});
