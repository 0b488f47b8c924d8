import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CLI, swarm, tempDir } from '../helpers/cli.js';
import { llama3_8bShape, writeGguf } from '../helpers/gguf-writer.js';

/** Every line of stderr, without the trailing empty one. */
const lines = (s: string) => s.split('\n').filter(Boolean);

t.test('a usage error is one `swarm: SWARM_ERR_CONFIG` line and a hint, exit 2, no help dump', async (t) => {
  const r = swarm(['up', '--bogus']);
  t.equal(r.code, 2);
  t.same(lines(r.stderr).length, 2, r.stderr);
  t.match(lines(r.stderr)[0], /^swarm: SWARM_ERR_CONFIG: unknown option '--bogus'$/);
  t.match(lines(r.stderr)[1], /^hint: `swarm up --help`/);
  t.notMatch(r.stderr, /Usage:/);

  const missing = swarm(['deploy', 'render', '--target', 'podman']);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /^swarm: SWARM_ERR_CONFIG: required option '--agents <n>' not specified\nhint: /);

  const unknown = swarm(['staus']);
  t.equal(unknown.code, 2);
  t.same(lines(unknown.stderr).length, 2, unknown.stderr);
  t.match(unknown.stderr, /unknown command 'staus'.*status/);

  const json = swarm(['plan', '--agents', 'x', '--model', 'm.gguf', '--json']);
  t.equal(json.code, 2);
  t.match(JSON.parse(json.stdout), { error: { code: 'SWARM_ERR_CONFIG', msg: /--agents/, hint: /swarm plan --help/ } });
});

t.test('the top-level help lists every exit code, 7 and 130 included', async (t) => {
  const r = swarm(['--help']);
  t.equal(r.code, 0);
  for (const code of ['0 ok', '1 error', '2 usage', '3 no running swarm', '4 tasks failed', '5 timeout', '6 already running', '7 refused', '130 interrupted']) {
    t.match(r.stdout, code);
  }
});

t.test('`swarm --help` loads no command module (the first command answers at once)', async (t) => {
  const dir = tempDir(t);
  const hook = path.join(dir, 'hook.mjs');
  const log = path.join(dir, 'loaded.txt');
  fs.writeFileSync(hook, `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent("import fs from 'node:fs'; export async function load(u, c, n) { fs.appendFileSync(process.env.LOAD_LOG, u + '\\\\n'); return n(u, c); }"));\n`);
  const r = await run([process.execPath, '--import', hook, CLI, '--help'], { LOAD_LOG: log });
  t.equal(r.code, 0);
  const loaded = fs.readFileSync(log, 'utf8').split('\n').filter(Boolean);
  t.same(loaded.filter((u) => u.includes('/cli/commands/')), [], 'no command module');
  t.ok(loaded.length < 40, `${loaded.length} modules loaded`);
});

t.test('a reader that goes away (`| head`) ends the command quietly: no EPIPE stack', async (t) => {
  const dir = tempDir(t);
  for (let i = 0; i < 400; i++) {
    const run = path.join(dir, 'runs', `20261127-1200${String(i).padStart(3, '0')}-ab${i}`);
    fs.mkdirSync(run, { recursive: true });
    fs.writeFileSync(path.join(run, 'passport.json'), JSON.stringify({ run: `r${i}`, created_at: 'x', experiment: 'e', topology: 'star', seed: 1, temperature: 0, models: [] }));
  }
  for (const args of [['--help'], ['runs', 'ls', '--state-dir', dir]]) {
    const r = await run([process.execPath, CLI, ...args], {}, true);
    t.equal(r.code, 0, `swarm ${args.join(' ')}: exit 0`);
    t.notMatch(r.stderr, /EPIPE|Error/, `swarm ${args.join(' ')}: nothing on stderr (${r.stderr.slice(0, 200)})`);
  }
});

t.test('deploy render: --out - is stdout, a relative --model becomes absolute, --json', async (t) => {
  const dir = tempDir(t);
  const r = swarm(['deploy', 'render', '--target', 'podman', '--agents', '2', '--model', 'models/m.gguf', '--out', '-'], { cwd: dir });
  t.equal(r.code, 0, r.stderr);
  t.notOk(fs.existsSync(path.join(dir, '-')), 'no folder named "-"');
  t.match(r.stdout, `path: ${path.join(dir, 'models')}`, 'the model folder as an absolute hostPath');
  const j = swarm(['deploy', 'render', '--target', 'k3s', '--agents', '1', '--model', '/m/m.gguf', '--json']);
  t.equal(j.code, 0, j.stderr);
  t.type(JSON.parse(j.stdout).files, 'object');
  // the engine by default is swarm up's: batched (one worker container, one engine); per-worker on request
  t.match(r.stdout, /--driver\n\s+- batched\n[\s\S]*--count\n\s+- "2"/, 'batched by default, as swarm up');
  const per = swarm(['deploy', 'render', '--target', 'podman', '--agents', '2', '--model', '/m/m.gguf', '--engine', 'per-worker']);
  t.equal(per.code, 0, per.stderr);
  t.match(per.stdout, /--driver\n\s+- embedded\n/);
  t.match(swarm(['deploy', 'render', '--help']).stdout, /--engine <mode>[\s\S]*\(default: "batched"\)/);
});

t.test('plan: defaults in GiB as written, nothing cited from a document the user lacks', async (t) => {
  const help = swarm(['plan', '--help']);
  t.match(help.stdout, /default:\s+16G\)/);
  t.notMatch(help.stdout, /17179869184/);
  const dir = tempDir(t);
  const file = path.join(dir, 'llama3.gguf');
  const s = llama3_8bShape();
  writeGguf(file, s.meta, s.tensors);
  const r = swarm(['plan', '--agents', '25', '--model', file, '--ram', '16G']);
  t.equal(r.code, 0, r.stderr);
  t.notMatch(r.stdout, /spec|11\.2/);
});

t.test('`swarm up --help` lists the --driver-opt keys', async (t) => {
  const r = swarm(['up', '--help']);
  for (const key of ['threads=', 'ctx=', 'seq_wait_ms=', 'prefix_cache=', 'latency_ms=']) t.match(r.stdout, key);
});

t.test('`swarm certs` prints a hub command that serves the control API where the CLI line reaches it', async (t) => {
  const dir = tempDir(t);
  const r = swarm(['certs', '--dir', dir, '--host', 'hub=127.0.0.1']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /swarm hub [^\n]*--control-host ADDR/);
});

t.test('a missing model file and a file that is not GGUF: the same code and exit', async (t) => {
  const dir = tempDir(t);
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'hi\n');
  for (const model of [path.join(dir, 'missing.gguf'), path.join(dir, 'notes.txt')]) {
    const r = swarm(['up', '--agents', '1', '--detach', '--state-dir', path.join(dir, 's'), '--model', model]);
    t.equal(r.code, 2, model);
    t.match(r.stderr, /^swarm: SWARM_ERR_CONFIG: --model /, model);
  }
});

t.test('credential and top take --json', async (t) => {
  const dir = tempDir(t);
  fs.writeFileSync(path.join(dir, 'token'), 'a-token-of-some-length-here\n');
  const r = swarm(['credential', 'w-1', '--state-dir', dir, '--json']);
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), { id: 'w-1', credential: /./ });
  const top = swarm(['top', '--once', '--json', '--state-dir', dir]);
  t.equal(top.code, 3);
  t.match(JSON.parse(top.stdout), { error: { code: 'SWARM_ERR_NO_SWARM' } });
});

/** Run a command; with `closeEarly`, its stdout's reader goes away before it writes. */
function run(cmd: string[], env: NodeJS.ProcessEnv, closeEarly = false): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd[0]!, cmd.slice(1), { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    if (closeEarly) child.stdout.destroy();
    else child.stdout.resume();
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

t.test('a second `swarm up` refuses before saying anything else; a misspelt task field is named', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 's');
  const up = swarm(['up', '--driver', 'echo', '--agents', '1', '--detach', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  t.teardown(() => void swarm(['down', '--state-dir', state]));
  const again = swarm(['up', '--agents', '1', '--state-dir', state]);
  t.equal(again.code, 6);
  t.match(again.stderr, /^swarm: SWARM_ERR_ALREADY_RUNNING: /, 'the refusal is the first thing said');
  t.notMatch(again.stderr, /demo/);
  fs.writeFileSync(path.join(dir, 'tasks.jsonl'), '{"promt":"hi"}\n');
  const sub = swarm(['submit', '--file', path.join(dir, 'tasks.jsonl'), '--state-dir', state, '--retry-for', '0']);
  t.not(sub.code, 0);
  t.match(sub.stderr, /unknown field "promt" \(did you mean "prompt"\?\)/);
});
