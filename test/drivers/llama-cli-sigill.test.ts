import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { llamaCliFactory, INPUT_MARK, RESET_MARK, type LlamaCliDriver } from '../../drivers/llama-cli/index.js';
import { binWithout, cpuVariants, rememberedChoice } from '../../drivers/llama-build/cpu-variant.js';
import { collect } from '../helpers/llama.js';
import { tempDir } from '../helpers/cli.js';

// A stand-in interactive CLI: it asks for input with the colour switch the real one uses and answers
// each line; it dies of SIGILL at start when one of `atStart` sits beside it, at its first turn when
// one of `atTurn` does (looked up through its resolved path, as ggml does through /proc/self/exe).
const CLI = `const log = process.env.CRASH_LOG;
const ask = () => process.stdout.write(${JSON.stringify(INPUT_MARK)});
ask();
let buf = '';
process.stdin.on('data', (d) => {
  buf += d;
  for (let i; (i = buf.indexOf('\\n')) >= 0; buf = buf.slice(i + 1)) {
    const line = buf.slice(0, i);
    if (process.env.CRASH_TURN) { require('node:fs').appendFileSync(log, 'turn ' + process.env.CRASH_TURN + '\\n'); process.kill(process.pid, 'SIGILL'); }
    process.stdout.write(${JSON.stringify(RESET_MARK)} + 'answer to ' + line + '\\n');
    ask();
  }
});`;

function fakeBuild(dir: string, crash: { atStart?: string[]; atTurn?: string[] }): { bin: string; server: string; crashes: () => string[] } {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  for (const v of ['x64', 'haswell', 'zen4', 'sapphirerapids']) fs.writeFileSync(path.join(bin, `libggml-cpu-${v}.so`), '');
  fs.writeFileSync(path.join(dir, 'cli.cjs'), CLI);
  const log = path.join(dir, 'crashes');
  const script = [
    '#!/bin/sh', 'ulimit -c 0', 'd=$(dirname "$(readlink -f "$0")")',
    `for v in ${(crash.atStart ?? []).join(' ')}; do if [ -e "$d/libggml-cpu-$v.so" ]; then echo "start $v" >> '${log}'; kill -ILL $$; fi; done`,
    'turn=""',
    `for v in ${(crash.atTurn ?? []).join(' ')}; do if [ -z "$turn" ] && [ -e "$d/libggml-cpu-$v.so" ]; then turn=$v; fi; done`,
    `CRASH_TURN=$turn CRASH_LOG='${log}' exec '${process.execPath}' '${path.join(dir, 'cli.cjs')}'`, ''].join('\n');
  fs.writeFileSync(path.join(bin, 'llama-completion'), script, { mode: 0o755 });
  fs.writeFileSync(path.join(bin, 'llama-server'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  return {
    bin: path.join(bin, 'llama-completion'), server: path.join(bin, 'llama-server'),
    crashes: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean) : []),
  };
}

const driver = (bin: string): LlamaCliDriver => llamaCliFactory({ name: 'llama-cli', model: '/dev/null', options: { bin, start_timeout_ms: '20000' } }) as LlamaCliDriver;

/** Keep the drivers' warnings off the test's output, and count them. */
function quietWarnings(t: { teardown(f: () => void): void }): string[] {
  const seen: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((s: string | Uint8Array, ...rest: never[]) => {
    if (/CPU variant/.test(String(s))) { seen.push(String(s)); return true; }
    return write(s, ...rest);
  }) as typeof process.stderr.write;
  t.teardown(() => { process.stderr.write = write; });
  return seen;
}

t.test('llama-cli killed by SIGILL at start: the next CPU variant runs, and is remembered', async (t) => {
  const warnings = quietWarnings(t);
  const f = fakeBuild(tempDir(t), { atStart: ['sapphirerapids'] });
  const d = driver(f.bin);
  t.teardown(() => d.stop());
  const r = await collect(d.chat('hello', {}));
  t.equal(r.text, 'answer to hello');
  t.equal(d.cpuVariant, 'zen4');
  t.same(f.crashes(), ['start sapphirerapids'], 'crashed once');
  t.match(warnings.join(''), /llama-cli: CPU variant\(s\) sapphirerapids excluded/);
  t.same(rememberedChoice(f.bin), { chosen: 'zen4', excluded: ['sapphirerapids'] });
  await d.stop();

  const d2 = driver(f.bin);
  t.teardown(() => d2.stop());
  t.equal((await collect(d2.chat('again', {}))).text, 'answer to again');
  t.equal(f.crashes().length, 1, 'a later start goes straight to the remembered variant');
});

t.test('llama-cli killed by SIGILL at its first decode: the turn runs again on the next variant', async (t) => {
  quietWarnings(t);
  const f = fakeBuild(tempDir(t), { atTurn: ['sapphirerapids', 'zen4'] });
  const d = driver(f.bin);
  t.teardown(() => d.stop());
  const r = await collect(d.chat('hi', {}));
  t.equal(r.text, 'answer to hi', 'the task completes');
  t.same(f.crashes(), ['turn sapphirerapids', 'turn zen4'], 'each bad variant died once');
  t.equal(d.cpuVariant, 'haswell');
  t.equal(d.fallback(), 'llama-cli on CPU variant haswell, sapphirerapids, zen4 hidden (killed by SIGILL on this CPU)', 'what the worker reports (swarm status)');
  t.equal((await collect(d.chat('more', {}))).text, 'answer to more');
  t.equal(f.crashes().length, 2, 'never run again');
});

t.test('a view of the build made for llama-server serves llama-cli too (its program was only a symlink there)', async (t) => {
  quietWarnings(t);
  const f = fakeBuild(tempDir(t), { atStart: ['sapphirerapids'] });
  const variants = cpuVariants(path.dirname(f.bin));
  binWithout(f.server, variants, 1);
  const d = driver(f.bin);
  t.teardown(() => d.stop());
  t.equal((await collect(d.chat('x', {}))).text, 'answer to x');
  t.same(f.crashes(), ['start sapphirerapids'], 'the view did not lead back to the hidden variant');
});

t.test('SIGILL with every variant is a clear ENGINE_START error', async (t) => {
  quietWarnings(t);
  const f = fakeBuild(tempDir(t), { atStart: ['sapphirerapids', 'zen4', 'haswell', 'x64'] });
  const d = driver(f.bin);
  t.teardown(() => d.stop());
  await t.rejects(collect(d.chat('x', {})), { code: 'SWARM_ERR_ENGINE_START', message: /every CPU variant.*sapphirerapids, zen4, haswell, x64/ });
  t.equal(f.crashes().length, 4);
  t.same(d.pids(), []);
});
