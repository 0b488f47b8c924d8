import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { CLI, ROOT, alive, swarm, tempDir, until } from '../helpers/cli.js';

/**
 * `swarm hub` loads its code from the bundle the build writes (dist/hub-bundle, cli/bundle.ts), not
 * as ~110 modules: a restarted hub on a busy host spent most of its time to listening loading them.
 * In the bundle every module keeps its own file's `import.meta.url`, so what the hub finds from it
 * (the CLI its supervisor starts workers with) is where it was.
 */

const BUNDLE = path.join(ROOT, 'dist/hub-bundle/hub-main.js');

t.test('the build wrote the hub bundle after the modules it holds, and their list', async (t) => {
  t.ok(fs.existsSync(BUNDLE), `${BUNDLE} exists (written by \`npm run build\`)`);
  const inputs = JSON.parse(fs.readFileSync(path.join(path.dirname(BUNDLE), 'inputs.json'), 'utf8')) as string[];
  t.ok(inputs.includes('../cli/commands/hub.js') && inputs.includes('../hub/hub.js'), `inputs.json lists the modules it holds (${inputs.length})`);
  const built = fs.statSync(BUNDLE).mtimeMs;
  const newer = inputs.filter((f) => fs.statSync(path.join(path.dirname(BUNDLE), f)).mtimeMs > built);
  t.same(newer, [], 'none of them is newer than the bundle (a `tsc` alone since leaves it stale: run `npm run build`)');
});

t.test('a module newer than the bundle (a `tsc` since that left main.js alone): swarm hub runs the current code and says why', async (t) => {
  // A copy of the build, so that the suite's other hubs keep the real bundle.
  const root = tempDir(t);
  fs.cpSync(path.join(ROOT, 'dist'), path.join(root, 'dist'), { recursive: true, preserveTimestamps: true });
  for (const f of ['package.json', 'gen', 'node_modules']) fs.symlinkSync(path.join(ROOT, f), path.join(root, f));
  const mod = path.join(root, 'dist/cli/commands/hub.js');
  const was = fs.statSync(mod);
  const said = "description('run the hub alone";
  t.ok(fs.readFileSync(mod, 'utf8').includes(said), 'the hub command\'s description is in its module');
  fs.writeFileSync(mod, fs.readFileSync(mod, 'utf8').replace(said, "description('CURRENT CODE run the hub alone"));
  const help = () => spawnSync(process.execPath, [path.join(root, 'dist/cli/main.js'), 'hub', '--help'], { encoding: 'utf8', timeout: 60_000 });
  // Its old time back: the check goes by time, so the bundle is taken, and it holds the old text.
  fs.utimesSync(mod, was.atime, was.mtime);
  let r = help();
  t.equal(r.status, 0, 'swarm hub --help runs');
  t.ok(r.stdout.includes('Usage: swarm hub') && !r.stdout.includes('CURRENT CODE'), 'with the module as old as before: from the bundle (the old text)');
  t.notMatch(r.stderr, /stale/, 'and nothing said');
  // As a `tsc` leaves it: the module newer than the bundle, main.js as it was.
  const later = new Date(fs.statSync(BUNDLE).mtimeMs + 5000);
  fs.utimesSync(mod, later, later);
  t.ok(fs.statSync(path.join(root, 'dist/cli/main.js')).mtimeMs <= fs.statSync(path.join(root, 'dist/hub-bundle/hub-main.js')).mtimeMs, 'main.js is not newer than the bundle (what the old check looked at)');
  r = help();
  t.equal(r.status, 0, 'swarm hub --help runs');
  t.match(r.stdout, /CURRENT CODE run the hub alone/, 'from its modules: the current code');
  t.match(r.stderr, /its bundle in .* is stale \(\.\.\/cli\/commands\/hub\.js is newer\)/, 'and says the bundle is stale, naming the module');
  // A bundle from before the list: not taken either.
  fs.utimesSync(mod, was.atime, was.mtime);
  fs.rmSync(path.join(root, 'dist/hub-bundle/inputs.json'));
  r = help();
  t.match(r.stdout, /CURRENT CODE/, 'with no inputs.json: the modules');
  t.match(r.stderr, /no readable inputs\.json/, 'said');
});

t.test('swarm hub runs from the bundle: none of the hub\'s modules is loaded on its own', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const seen = path.join(dir, 'loaded.txt');
  // A module hook that writes down every file the hub process loads as an ES module.
  fs.writeFileSync(path.join(dir, 'hooks.mjs'), `import fs from 'node:fs';\nexport async function load(url, ctx, next) { if (url.startsWith('file:')) fs.appendFileSync(${JSON.stringify(seen)}, url + '\\n'); return next(url, ctx); }\n`);
  fs.writeFileSync(path.join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister(${JSON.stringify(new URL('hooks.mjs', `file://${dir}/`).href)});\n`);
  const hub = spawn(process.execPath, ['--import', path.join(dir, 'register.mjs'), CLI, 'hub', '--state-dir', state, '--port', '0'], { stdio: 'ignore', detached: true });
  t.teardown(() => { try { process.kill(-hub.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(() => fs.existsSync(path.join(state, 'hub.json')), 30_000), 'the hub started');
  const loaded = fs.readFileSync(seen, 'utf8').split('\n').filter(Boolean).map((u) => new URL(u).pathname);
  t.ok(loaded.includes(BUNDLE), 'it loaded the bundle');
  const own = loaded.filter((f) => f.startsWith(path.join(ROOT, 'dist') + path.sep) && !f.startsWith(path.dirname(BUNDLE) + path.sep) && f !== CLI);
  t.same(own, [], 'and no module of dist/ beside it');
  t.equal(swarm(['down', '--state-dir', state]).code, 0, 'down stops it');
  t.ok(await until(() => !alive(hub.pid!), 10_000), 'the hub is gone');
});

t.test('a hub from the bundle starts its supervised workers and runs a task', async (t) => {
  const state = path.join(tempDir(t), 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover']);
  t.equal(up.code, 0, `up -d (${up.stderr.trim()})`);
  const sub = swarm(['submit', '--state-dir', state, '--id', 'b-1', '--wait', 'through the bundle']);
  t.equal(sub.code, 0, `a task runs (${sub.stderr.trim()})`);
  t.match(sub.stdout, /through the bundle/, 'and its echo comes back');
  t.equal(swarm(['down', '--state-dir', state]).code, 0, 'down');
});

t.test('a damaged bundle (a chunk missing, a chunk truncated): swarm hub says so and loads its modules', async (t) => {
  // A copy of the build, so that the suite's other hubs keep the real bundle.
  const root = tempDir(t);
  fs.cpSync(path.join(ROOT, 'dist'), path.join(root, 'dist'), { recursive: true, preserveTimestamps: true });
  for (const f of ['package.json', 'gen', 'node_modules']) fs.symlinkSync(path.join(ROOT, f), path.join(root, f));
  const out = path.join(root, 'dist/hub-bundle');
  const chunk = /from "\.\/(chunk-[A-Z0-9]+\.js)"/.exec(fs.readFileSync(path.join(out, 'hub-main.js'), 'utf8'))?.[1];
  t.ok(chunk, 'the bundle\'s entry imports a chunk');
  const copy = fs.readFileSync(path.join(out, chunk!), 'utf8');
  for (const [what, damage] of [['missing', () => fs.rmSync(path.join(out, chunk!))], ['truncated', () => fs.writeFileSync(path.join(out, chunk!), copy.slice(0, copy.length >> 1))]] as const) {
    damage();
    fs.utimesSync(path.join(out, 'hub-main.js'), new Date(), new Date());
    const r = spawnSync(process.execPath, [path.join(root, 'dist/cli/main.js'), 'hub', '--help'], { encoding: 'utf8', timeout: 60_000 });
    const code = r.status;
    t.equal(code, 0, `a chunk ${what}: swarm hub still runs (${r.stderr.trim().slice(0, 200)})`);
    t.match(r.stderr, /its bundle in .* is damaged/, 'and says the bundle is damaged');
    t.match(r.stdout, /Usage: swarm hub/, 'from its modules');
  }
});
