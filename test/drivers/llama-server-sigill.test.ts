import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { LlamaServerDriver } from '../../drivers/llama-server/index.js';
import { cpuVariants, rememberedChoice } from '../../drivers/llama-build/cpu-variant.js';
import { swarm, tempDir } from '../helpers/cli.js';

// A stand-in llama-server that serves /health, but dies of SIGILL when one of `crash` sits beside it,
// looked up through its resolved path as ggml does through /proc/self/exe.
const HEALTH = `const port = Number(process.argv[process.argv.indexOf('--port') + 1]);
require('node:http').createServer((q, s) => { s.writeHead(q.url === '/health' ? 200 : 404, { 'content-type': 'application/json' }); s.end('{"status":"ok"}'); }).listen(port, '127.0.0.1');`;

function fakeBuild(dir: string, crash: string[]): { bin: string; crashes: () => number } {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  for (const v of ['x64', 'haswell', 'zen4', 'sapphirerapids']) fs.writeFileSync(path.join(bin, `libggml-cpu-${v}.so`), '');
  fs.writeFileSync(path.join(bin, 'libggml-base.so'), '');
  fs.writeFileSync(path.join(dir, 'health.cjs'), HEALTH);
  const log = path.join(dir, 'crashes');
  fs.writeFileSync(path.join(bin, 'llama-server'), [
    '#!/bin/sh', 'ulimit -c 0', 'd=$(dirname "$(readlink -f "$0")")',
    `for v in ${crash.join(' ')}; do if [ -e "$d/libggml-cpu-$v.so" ]; then echo "$v" >> '${log}'; kill -ILL $$; fi; done`,
    `exec '${process.execPath}' '${path.join(dir, 'health.cjs')}' "$@"`, ''].join('\n'), { mode: 0o755 });
  return { bin: path.join(bin, 'llama-server'), crashes: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0) };
}

const driver = (bin: string): LlamaServerDriver => new LlamaServerDriver({ name: 'llama-server', model: '/dev/null', options: { bin, start_timeout_ms: '20000' } });

t.test('variants are ordered as ggml scores them', async (t) => {
  const f = fakeBuild(tempDir(t), []);
  t.same(cpuVariants(path.dirname(f.bin)), ['sapphirerapids', 'zen4', 'haswell', 'x64']);
});

t.test('SIGILL with the top CPU variant: the next one is used, and remembered', async (t) => {
  const f = fakeBuild(tempDir(t), ['sapphirerapids']);
  const warnings: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((s: string | Uint8Array, ...rest: never[]) => { if (/CPU variant/.test(String(s))) warnings.push(String(s)); return write(s, ...rest); }) as typeof process.stderr.write;
  t.teardown(() => { process.stderr.write = write; });

  t.equal(rememberedChoice(f.bin), undefined, 'nothing remembered before a crash');
  // A damaged choice file is nothing remembered, not a negative skip.
  fs.mkdirSync(path.join(path.dirname(f.bin), '.cpu-variants'), { recursive: true });
  fs.writeFileSync(path.join(path.dirname(f.bin), '.cpu-variants', 'choice.json'), JSON.stringify({ cpu: os.cpus()[0]?.model ?? 'unknown', skip: -2 }));
  t.equal(rememberedChoice(f.bin), undefined, 'a negative skip is ignored');
  const d = driver(f.bin);
  await d.start();
  t.equal(d.cpuVariant, 'zen4');
  t.equal(d.fallback(), 'llama-server on CPU variant zen4, sapphirerapids hidden (killed by SIGILL on this CPU)', 'what the worker reports (swarm status)');
  t.same(rememberedChoice(f.bin), { chosen: 'zen4', excluded: ['sapphirerapids'] });
  const which = swarm(['engine', 'which'], { env: { SWARM_LLAMA_BIN_DIR: path.dirname(f.bin) } });
  t.match(which.stdout, /cpu variant\s+zen4 \(sapphirerapids killed llama-server with SIGILL/, 'swarm engine which says which variant runs');
  const whichJson = swarm(['engine', 'which', '--json'], { env: { SWARM_LLAMA_BIN_DIR: path.dirname(f.bin) } });
  t.same(JSON.parse(whichJson.stdout).cpu_variant, { chosen: 'zen4', excluded: ['sapphirerapids'] });
  t.equal(f.crashes(), 1, 'crashed once, with sapphirerapids');
  t.match(warnings.join(''), /sapphirerapids excluded/);
  t.equal(d.pids().length, 1);
  await d.stop();

  const d2 = driver(f.bin);
  await d2.start();
  t.equal(d2.cpuVariant, 'zen4');
  t.equal(f.crashes(), 1, 'the second start did not crash first');
  await d2.stop();
});

t.test('SIGILL with every variant is a clear ENGINE_START error', async (t) => {
  const f = fakeBuild(tempDir(t), ['sapphirerapids', 'zen4', 'haswell', 'x64']);
  const d = driver(f.bin);
  await t.rejects(d.start(), { code: 'SWARM_ERR_ENGINE_START', message: /every CPU variant.*sapphirerapids, zen4, haswell, x64/ });
  t.equal(f.crashes(), 4);
  t.same(d.pids(), []);
});
