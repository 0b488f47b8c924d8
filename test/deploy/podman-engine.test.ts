// The Containerfile's optional with-llama-server target, for real and offline: a build base made from
// the host's packages (deploy/container/make-build-image.mjs), llama.cpp compiled inside the build from
// the source node-llama-cpp ships, then a hub and a worker of that image (`podman kube play`, host
// network on 127.0.0.1) answer tasks with the llama-server driver on stories260K.
// Opt-in (SWARM_TEST_ENGINE_IMAGE=1): the cold llama.cpp build alone is ~8 min on 2 idle cores (39 min
// measured at load average 25-35), too much for CI's budget next to the rest.
// SWARM_TEST_ENGINE_IMAGE_REF=IMAGE tests an image already built with --target with-llama-server.
// Everything it makes (images, pods) is removed, pass or fail.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { renderDeployment } from '../../deploy/render/index.js';
import { api, until } from '../helpers/cli.js';
import { freePorts } from '../helpers/failover.js';
import { STORIES } from '../helpers/llama.js';
import { ROOT, hasPodman, podman, removeAll } from '../helpers/podman.js';

const TAG = `engine-test-${process.pid}`;
const IMAGE = `localhost/swarm:${TAG}`;
const BASE = `localhost/swarm-node-base:${TAG}`;
const BUILD_BASE = `localhost/swarm-engine-build:${TAG}`;
const NAME = `swarm-e${process.pid}`;
const TOKEN = 'engine-test-token-0123456789';

const optIn = process.env.SWARM_TEST_ENGINE_IMAGE === '1';
/** An image already built with --target with-llama-server: test it without building (and keep it). */
const PREBUILT = process.env.SWARM_TEST_ENGINE_IMAGE_REF;
const IMG = PREBUILT ?? IMAGE;

t.test('podman: with-llama-server image built offline, a worker answers through llama-server', {
  timeout: 7_200_000,
  skip: !optIn ? 'set SWARM_TEST_ENGINE_IMAGE=1 to build the llama-server image (8-40 min of compiling on 2 cores)' : !hasPodman ? 'podman not installed' : false,
}, async (t) => {
  if (!fs.existsSync(STORIES)) { t.fail(`test model ${STORIES} missing`); return; }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-podman-engine-'));
  const yaml = path.join(dir, 'swarm-podman.yaml');
  t.teardown(() => {
    if (fs.existsSync(yaml)) podman(['kube', 'down', yaml]);
    removeAll({ pods: [`${NAME}-hub`, `${NAME}-workers`], images: PREBUILT ? [] : [IMAGE, BASE, BUILD_BASE] });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  if (PREBUILT) {
    t.comment(`using the prebuilt image ${PREBUILT} (SWARM_TEST_ENGINE_IMAGE_REF): no build`);
  } else {
    t.equal(execFileSync(path.join(ROOT, 'deploy/container/make-base-image.sh'), [BASE], { encoding: 'utf8' }).trim(), BASE);
    t.equal(execFileSync('node', [path.join(ROOT, 'deploy/container/make-build-image.mjs'), BUILD_BASE], { encoding: 'utf8' }).trim(), BUILD_BASE);
    const started = Date.now();
    const build = podman(['build', '--layers=false', '--format', 'docker', '--network', 'none', '--target', 'with-llama-server',
      '--build-arg', `BASE_IMAGE=${BASE}`, '--build-arg', `ENGINE_BUILD_IMAGE=${BUILD_BASE}`, '-t', IMAGE, '.'], 5_400_000);
    t.equal(build.code, 0, 'with-llama-server image builds with no network');
    if (build.code !== 0) { t.comment(build.out.slice(-4000)); return; }
    podman(['rmi', '-f', BUILD_BASE]); // ~600 MB, needed only by the build
    const size = Number(podman(['image', 'inspect', IMAGE, '--format', '{{.Size}}']).out.trim());
    t.comment(`build ${((Date.now() - started) / 1000).toFixed(0)} s (load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}); image ${(size / 1e6).toFixed(1)} MB`);
    t.ok(size > 0 && size < 250e6, `image ${(size / 1e6).toFixed(1)} MB < 250 MB`);
    t.equal(podman(['images', '-a', '-q', '--filter', 'label=io.swarm.stage']).out.trim(), '', 'no stage image left behind');
  }
  const state = path.join(dir, 'state');
  fs.mkdirSync(state);
  fs.chownSync(state, 10001, 10001);
  const certs = path.join(dir, 'certs'); // the token file the pods read (SWARM_TOKEN_FILE)
  fs.mkdirSync(certs);
  fs.writeFileSync(path.join(certs, 'token'), TOKEN + '\n', { mode: 0o600 });
  for (const f of [certs, path.join(certs, 'token')]) fs.chownSync(f, 10001, 10001);
  const [hubPort, controlPort] = await freePorts(2);
  const files = renderDeployment({
    target: 'podman', agents: 1, model: STORIES, image: IMG, driver: 'llama-server', driverOpts: { ctx: '256' },
    certsDir: certs, hostNetwork: true, hubPort, controlPort, stateDir: state, name: NAME,
  });
  fs.writeFileSync(yaml, files['swarm-podman.yaml']!);
  const play = podman(['kube', 'play', yaml]);
  t.equal(play.code, 0, 'kube play');
  if (play.code !== 0) { t.comment(play.out); return; }
  const worker = `${NAME}-workers-worker-1`;
  const version = podman(['exec', worker, '/opt/llama/bin/llama-server', '--version']);
  t.equal(version.code, 0, 'llama-server runs in the image (its libraries are there)');
  t.comment(version.out.trim().split('\n').slice(-2).join(' | '));

  t.ok(await until(async () => {
    try { return (await api<any>(state, 'GET', '/status')).workers?.length === 1; } catch { return false; }
  }, 120_000, 500), 'the worker joined');
  const ids = ['eng-0', 'eng-1'];
  const sub = await api<any>(state, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: 'Once upon a time', max_tokens: 16 })) });
  t.equal(sub.accepted?.length, 2, 'submitted');
  const done = await api<any>(state, 'POST', '/wait', { ids, timeout_ms: 180_000 });
  t.equal(done.complete, true, 'tasks final');
  t.ok(done.tasks.every((x: any) => x.state === 'done' && typeof x.text === 'string' && x.text.length > 0), 'llama-server generated text for each task');
  t.comment(`text: ${JSON.stringify(done.tasks[0]?.text ?? done.tasks[0]).slice(0, 200)}`);
  const engines = podman(['exec', worker, 'node', '-e',
    "const fs=require('fs');console.log(fs.readdirSync('/proc').filter(p=>/^\\d+$/.test(p)).map(p=>{try{return fs.readFileSync('/proc/'+p+'/cmdline','utf8').split('\\0')[0]}catch{return ''}}).filter(c=>c.includes('llama-server')).length)"]);
  t.ok(Number(engines.out.trim()) >= 1, 'an engine process runs in the worker container');

  t.equal(podman(['kube', 'down', yaml]).code, 0, 'kube down');
  t.equal(podman(['pod', 'ps', '-q', '--filter', `name=${NAME}`]).out.trim(), '', 'no pods left');
});
