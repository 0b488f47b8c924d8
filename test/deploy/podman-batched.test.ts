// The default render (the batched engine) for real: `podman kube play` a hub and the one worker
// container of 3 agents on stories260K (read-only root, model read-only), tasks answered by the one
// engine that worker process starts beside it, its socket in the state folder; then kube down.
// Under CI=true a missing podman FAILS (CI installs it with deploy/ci-install.sh); otherwise it skips.
// Everything it makes (images, pods) is removed, pass or fail.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { renderDeployment } from '../../deploy/render/index.js';
import { api, until } from '../helpers/cli.js';
import { freePorts } from '../helpers/failover.js';
import { STORIES } from '../helpers/llama.js';
import { podScratch, podman, podmanMissing, testImage } from '../helpers/podman.js';

const NAME = `swarm-b${process.pid}`;
const TOKEN = 'batched-test-token-0123456789';
const AGENTS = 3;

t.test('podman: the default render runs 3 agents in one worker container on one batched engine', { timeout: 1_200_000 }, async (t) => {
  if (podmanMissing(t, STORIES)) return;
  const { dir, yaml } = podScratch(t, NAME, 'swarm-podman-batched-');
  const IMAGE = await testImage(t);
  if (!IMAGE) return;

  const state = path.join(dir, 'state');
  const workerState = path.join(dir, 'workers');
  const certs = path.join(dir, 'certs');
  for (const d of [state, workerState, certs]) { fs.mkdirSync(d); fs.chownSync(d, 10001, 10001); } // the image runs as uid 10001
  fs.writeFileSync(path.join(certs, 'token'), TOKEN + '\n', { mode: 0o600 });
  fs.chownSync(path.join(certs, 'token'), 10001, 10001);
  const [hubPort, controlPort, peerPort] = await freePorts(3);
  const files = renderDeployment({
    target: 'podman', agents: AGENTS, model: STORIES, image: IMAGE, driverOpts: { ctx: '256' },
    certsDir: certs, hostNetwork: true, hubPort, controlPort, stateDir: state, peerPort: peerPort!, workerStateDir: workerState, name: NAME,
  });
  fs.writeFileSync(yaml, files['swarm-podman.yaml']!);
  const play = podman(['kube', 'play', yaml]);
  t.equal(play.code, 0, 'kube play');
  if (play.code !== 0) { t.comment(play.out); return; }
  const worker = `${NAME}-workers-worker`;

  const status = async () => { try { return await api<any>(state, 'GET', '/status'); } catch { return undefined; } };
  t.ok(await until(async () => (await status())?.workers?.length === AGENTS, 120_000, 500), '3 agents joined from one container');
  t.same(((await status())?.workers ?? []).map((w: any) => w.id).sort(), ['worker-1', 'worker-2', 'worker-3']);
  const ids = ['b-0', 'b-1', 'b-2'];
  const sub = await api<any>(state, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: 'Once upon a time', max_tokens: 16 })) });
  t.equal(sub.accepted?.length, AGENTS, 'submitted');
  const done = await api<any>(state, 'POST', '/wait', { ids, timeout_ms: 180_000 });
  t.equal(done.complete, true, 'tasks final');
  t.ok(done.tasks.every((x: any) => x.state === 'done' && typeof x.text === 'string' && x.text.length > 0), 'the batched engine generated text for each task');
  if (!done.tasks.every((x: any) => x.state === 'done')) t.comment(JSON.stringify(done.tasks).slice(0, 1500));

  // One engine process (drivers/batched/host.js) in the container, its socket in the writable state
  // folder. The probe skips itself: its own command line holds the name it looks for.
  const engines = podman(['exec', worker, 'node', '-e',
    "const fs=require('fs');console.log(fs.readdirSync('/proc').filter(p=>/^\\d+$/.test(p)&&p!==String(process.pid)).filter(p=>{try{return fs.readFileSync('/proc/'+p+'/cmdline','utf8').includes('batched/host.js')}catch{return false}}).length)"]);
  t.equal(engines.out.trim(), '1', 'one batched engine in the worker container');
  const sockets = fs.readdirSync(path.join(workerState, 'worker', 'engines')).filter((f) => f.endsWith('.sock'));
  t.equal(sockets.length, 1, 'its socket in the state folder');

  t.equal(podman(['kube', 'down', yaml]).code, 0, 'kube down');
  t.equal(podman(['pod', 'ps', '-q', '--filter', `name=${NAME}`]).out.trim(), '', 'no pods left');
});
