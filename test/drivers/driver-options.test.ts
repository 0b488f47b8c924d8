import t from 'tap';
import { DriverOptionSchemas } from '../../drivers/option-schemas.js';
import { driverOptionsHelp } from '../../drivers/option-summary.js';
import { parseBatchedOptions } from '../../drivers/batched/options.js';
import { parseEchoOptions } from '../../drivers/echo/driver.js';
import { parseLlamaServerOptions } from '../../drivers/llama-server/options.js';
import { parseSimulatedOptions } from '../../drivers/simulated/driver.js';

t.test('the --driver-opt help lists every key of every driver\'s schema', async (t) => {
  const help = driverOptionsHelp();
  for (const [driver, schema] of Object.entries(DriverOptionSchemas)) {
    t.match(help, `${schema.description}:`, `${driver} has a line`);
    for (const [key, field] of Object.entries(schema.shape)) {
      // Keys of the per-worker engine that the batched one accepts and ignores are not offered.
      if ((field as { def: { type: string } }).def.type === 'optional' && (field as { def: { innerType: { def: { type: string } } } }).def.innerType.def.type === 'unknown') continue;
      t.match(help, new RegExp(`\\s${key}=`), `${driver} ${key}`);
    }
  }
});

t.test('driver options: text converted to numbers, defaults filled, unknown and malformed keys refused with SWARM_ERR_CONFIG', async (t) => {
  t.match(parseEchoOptions({ latency_ms: '50', fail: '1' }), { latencyMs: 50, tokenMs: 0, fail: true, loop: false });
  t.match(parseBatchedOptions({ threads: '2', prefix_cache: '0', slots: '4' }), { threads: 2, ctx: 2048, prefixCache: false }, 'a per-worker key is accepted and ignored');
  t.equal(parseBatchedOptions({ threads: '' }).threads, 'auto', 'an empty value is no value');
  t.match(parseLlamaServerOptions({ np: '4' }), { slots: 4, ctx: 8192, threads: 1 });
  t.equal(parseSimulatedOptions({ p: '0.7' }).p, 0.7);
  t.throws(() => parseEchoOptions({ latency: '5' }), { code: 'SWARM_ERR_CONFIG', message: /unknown echo option "latency" \(known: latency_ms, / });
  t.throws(() => parseEchoOptions({ latency_ms: '-1' }), { code: 'SWARM_ERR_CONFIG', message: /echo option latency_ms: must be >= 0, got "-1"/ });
  t.throws(() => parseEchoOptions({ token_ms: '1.5' }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => parseBatchedOptions({ threads: 'many' }), { code: 'SWARM_ERR_CONFIG' });
  for (const n of ['1000000', '513', '0', '007']) t.throws(() => parseBatchedOptions({ threads: n }), { code: 'SWARM_ERR_CONFIG' }, `threads=${n}: refused`);
  t.equal(parseBatchedOptions({ threads: '512' }).threads, 512, 'ggml\'s largest count is taken');
  t.throws(() => parseLlamaServerOptions({ threads: '1000000' }), { code: 'SWARM_ERR_CONFIG' }, 'the same bound for llama-server');
  t.throws(() => parseSimulatedOptions({ p: '2' }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => parseEchoOptions(JSON.parse('{"__proto__":"1"}') as Record<string, string>), { code: 'SWARM_ERR_CONFIG' }, 'a key named __proto__ is a key');
});

t.test('batched threads=N takes exactly the counts ggml runs: one bound, the pattern made from it', async (t) => {
  const { MAX_THREADS, upTo } = await import('../../drivers/option-schemas.js');
  for (const max of [1, 9, 10, 99, 100, 101, 512, 1000, 2047]) {
    const re = new RegExp(`^(${upTo(max)})$`);
    const wrong = Array.from({ length: max * 2 + 20 }, (_, n) => n).filter((n) => re.test(String(n)) !== (n >= 1 && n <= max));
    t.same(wrong, [], `1..${max} and nothing else`);
    t.notOk(re.test(`0${max}`) || re.test('01'), 'no leading zero');
  }
  const took = (n: number) => { try { return parseBatchedOptions({ threads: String(n) }).threads === n; } catch { return false; } };
  t.ok(took(MAX_THREADS) && !took(MAX_THREADS + 1) && took(1) && !took(0), `the batched engine's bound is MAX_THREADS (${MAX_THREADS})`);
  t.throws(() => parseLlamaServerOptions({ threads: String(MAX_THREADS + 1) }), { code: 'SWARM_ERR_CONFIG' }, 'and llama-server\'s');
});

t.test('swarm up checks the options of every driver it supervises as the driver does: ollama\'s flags in any case', async (t) => {
  const { workerArgs } = await import('../../cli/commands/worker.js');
  t.same(workerArgs({ driver: 'ollama', driverOpt: { raw: 'TRUE', check_model: 'Off' }, slots: 1 }).slice(0, 2), ['--driver', 'ollama'], 'a flag in capitals is taken');
  t.throws(() => workerArgs({ driver: 'ollama', driverOpt: { rwa: '1' }, slots: 1 }), { code: 'SWARM_ERR_CONFIG' }, 'a misspelt ollama option is refused before a worker starts');
});
