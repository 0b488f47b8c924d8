// A real Podman deployment: build the image (base made locally with `podman import`; no registry),
// `podman kube play` a hub pod and a pod of 3 workers with stories260K mounted read-only, run tasks
// through the hub's control API, and check `podman kube down` leaves no pod or container behind.
// Networking: both pods use the host network namespace bound to 127.0.0.1 (no bridge, loopback only).
// Under CI=true a missing podman FAILS (CI installs it with deploy/ci-install.sh); otherwise it skips.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { renderDeployment } from '../deploy/render/index.js';
import { STORIES } from './helpers/llama.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const IMAGE = 'localhost/swarm:podman-test';
const BASE = 'localhost/swarm-node-base:20';
const TOKEN = 'podman-test-token-0123456789';

function podman(args: string[], timeoutMs = 120_000) {
  const r = spawnSync('podman', args, { encoding: 'utf8', timeout: timeoutMs, cwd: ROOT });
  return { code: r.status, out: (r.stdout ?? '') + (r.stderr ?? '') };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    }).on('error', reject);
  });
}

async function api(port: number, method: string, p: string, body?: unknown): Promise<any> {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return r.json();
}

async function until<T>(what: string, f: () => Promise<T | undefined> | T | undefined, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try { const v = await f(); if (v !== undefined) return v; } catch { /* not yet */ }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const hasPodman = spawnSync('podman', ['--version']).status === 0;

t.test('podman: build, kube play hub + 3 workers, tasks, kube down', { timeout: 900_000 }, async (t) => {
  if (!hasPodman) {
    if (process.env.CI === 'true') t.fail('podman not found (CI runs deploy/ci-install.sh)'); else t.skip('podman not installed');
    return;
  }
  if (!fs.existsSync(STORIES)) {
    if (process.env.CI === 'true') t.fail(`test model ${STORIES} missing`); else t.skip(`no ${STORIES}`);
    return;
  }
  const base = execFileSync(path.join(ROOT, 'deploy/container/make-base-image.sh'), [BASE], { encoding: 'utf8' }).trim();
  t.equal(base, BASE);
  const build = podman(['build', '--format', 'docker', '--network', 'none', '--build-arg', `BASE_IMAGE=${BASE}`, '-t', IMAGE, '.'], 900_000);
  t.equal(build.code, 0, 'image builds');
  if (build.code !== 0) { t.comment(build.out.slice(-3000)); return; }
  const size = Number(podman(['image', 'inspect', IMAGE, '--format', '{{.Size}}']).out.trim());
  t.ok(size > 0 && size < 150e6, `image ${(size / 1e6).toFixed(1)} MB < 150 MB`);

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-podman-'));
  const state = path.join(dir, 'state');
  fs.mkdirSync(state);
  fs.chownSync(state, 10001, 10001); // the image runs as uid 10001
  const [hubPort, controlPort] = [await freePort(), await freePort()];
  const files = renderDeployment({
    target: 'podman', agents: 3, model: STORIES, image: IMAGE, driver: 'echo', token: TOKEN,
    hostNetwork: true, hubPort, controlPort, stateDir: state,
  });
  const yaml = path.join(dir, 'swarm-podman.yaml');
  fs.writeFileSync(yaml, files['swarm-podman.yaml']!);
  t.teardown(() => {
    podman(['kube', 'down', yaml]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const play = podman(['kube', 'play', yaml]);
  t.equal(play.code, 0, 'kube play');
  if (play.code !== 0) { t.comment(play.out); return; }

  await until('3 workers connected', async () => {
    const s = await api(controlPort, 'GET', '/status');
    return Array.isArray(s.workers) && s.workers.length === 3 ? s : undefined;
  });
  const ids = Array.from({ length: 6 }, (_, i) => `podman-${i}`);
  const sub = await api(controlPort, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: `hello ${id}` })) });
  t.ok(sub, 'submitted');
  const done = await api(controlPort, 'POST', '/wait', { ids, timeout_ms: 60_000 });
  t.equal(done.complete, true, 'all tasks final');
  t.ok(done.tasks.every((x: any) => x.state === 'done'), 'all tasks done');
  t.ok(done.tasks.every((x: any, i: number) => String(x.text).includes(`hello ${ids[i]}`)), 'echo text came back');
  t.same(new Set(done.tasks.map((x: any) => x.worker)).size > 0, true);

  // the model is mounted read-only, and is readable (plan reads its GGUF header inside a worker)
  const plan = podman(['exec', 'swarm-workers-worker-1', 'node', '/app/dist/cli/main.js', 'plan', '--agents', '3', '--model', '/models/stories260K.gguf', '--json']);
  t.equal(plan.code, 0, 'plan inside the container');
  t.equal(JSON.parse(plan.out.trim().split('\n').pop()!).kvBytesPerToken, 640);
  const write = podman(['exec', 'swarm-workers-worker-1', 'node', '-e', "require('fs').writeFileSync('/models/x', 'y')"]);
  t.not(write.code, 0, 'writing to /models fails');
  const whoami = podman(['exec', 'swarm-hub-hub', 'node', '-e', 'process.stdout.write(String(process.getuid()))']);
  t.equal(whoami.out.trim(), '10001', 'non-root');
  // the image's HEALTHCHECK command (podman's own timers need systemd, absent here, so run it directly)
  t.equal(podman(['exec', 'swarm-hub-hub', 'node', '/app/deploy/healthcheck.mjs']).code, 0, 'hub healthcheck passes');
  t.equal(podman(['exec', 'swarm-workers-worker-2', 'node', '/app/deploy/healthcheck.mjs']).code, 0, 'worker healthcheck passes');

  // clean SIGTERM: stopping the hub container exits 0 well before the 30 s kill
  const stop = podman(['stop', '-t', '20', 'swarm-hub-hub']);
  t.equal(stop.code, 0, 'hub stops');
  const exit = podman(['inspect', 'swarm-hub-hub', '--format', '{{.State.ExitCode}}']).out.trim();
  t.equal(exit, '0', 'hub exited 0 on SIGTERM');

  const down = podman(['kube', 'down', yaml]);
  t.equal(down.code, 0, 'kube down');
  t.equal(podman(['pod', 'ps', '-q', '--filter', 'name=swarm-']).out.trim(), '', 'no pods left');
  t.equal(podman(['ps', '-aq', '--filter', 'label=app.kubernetes.io/name=swarm']).out.trim(), '', 'no containers left');
});
