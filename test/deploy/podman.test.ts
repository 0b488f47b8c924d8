// A real Podman deployment: build the image (base made locally with `podman import`; no registry),
// `podman kube play` a hub pod and a pod of 3 workers with stories260K mounted read-only and failover on,
// run tasks through the hub's control API, kill the hub's container mid-run and see the workers finish
// by gossip, start the hub's container again and see every result handed back once, and check that
// `podman kube down` and the teardown leave no pod or container behind (the image is shared by the
// podman tests, one per content: test/helpers/podman.ts `sharedImage`).
// Networking: both pods use the host network namespace bound to 127.0.0.1 (no bridge, loopback only);
// the workers' peer ports are loopback ports too (as in a pod of its own, where they share the pod's).
// Under CI=true a missing podman FAILS (CI installs it with deploy/ci-install.sh); otherwise it skips.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { renderDeployment } from '../../deploy/render/index.js';
import { api, until } from '../helpers/cli.js';
import { agents, freePorts, submit, tally, type AgentView } from '../helpers/failover.js';
import { STORIES } from '../helpers/llama.js';
import { podScratch, podman, podmanMissing, testImage } from '../helpers/podman.js';

// Pod names carry the pid: a second run of this file on the same host (another checkout) does not collide.
const NAME = `swarm-t${process.pid}`;
const TOKEN = 'podman-test-token-0123456789';
const WORKERS = 3;
const TASKS = 60;

t.test('podman: build, kube play hub + 3 workers, tasks, hub killed -> gossip -> handback, kube down', { timeout: 1_200_000 }, async (t) => {
  if (podmanMissing(t, STORIES)) return;
  // Everything this test creates goes, pass or fail: pods and containers (kube down, then by name),
  // and any stage image a build left (scoped to the Containerfile's stage label).
  const { dir, yaml } = podScratch(t, NAME, 'swarm-podman-');

  // The image of this checkout's content, built by the first podman test that needs it (base from the
  // host's node with `podman import`; --layers=false, so a build leaves no stage image or layer cache).
  const IMAGE = await testImage(t);
  if (!IMAGE) return;
  const size = Number(podman(['image', 'inspect', IMAGE, '--format', '{{.Size}}']).out.trim());
  t.ok(size > 0 && size < 150e6, `image ${(size / 1e6).toFixed(1)} MB < 150 MB`);
  t.equal(podman(['images', '-a', '-q', '--filter', 'label=io.swarm.stage']).out.trim(), '', 'no build-stage image left behind');

  const state = path.join(dir, 'state');
  const workerState = path.join(dir, 'workers');
  const certs = path.join(dir, 'certs'); // the token file the pods read (SWARM_TOKEN_FILE), as `swarm certs` makes it
  for (const d of [state, workerState, certs]) { fs.mkdirSync(d); fs.chownSync(d, 10001, 10001); } // the image runs as uid 10001
  fs.writeFileSync(path.join(certs, 'token'), TOKEN + '\n', { mode: 0o600 });
  fs.chownSync(path.join(certs, 'token'), 10001, 10001);
  const [hubPort, controlPort, peerPort] = await freePorts(3);
  const files = renderDeployment({
    target: 'podman', agents: WORKERS, model: STORIES, image: IMAGE, driver: 'echo', driverOpts: { latency_ms: '200' },
    certsDir: certs, hostNetwork: true, hubPort, controlPort, stateDir: state,
    failover: true, peerPort: peerPort!, workerStateDir: workerState, name: NAME,
  });
  fs.writeFileSync(yaml, files['swarm-podman.yaml']!);
  const hubC = `${NAME}-hub-hub`;
  const worker = (i: number) => `${NAME}-workers-worker-${i}`;
  const views = (): AgentView[] => Array.from({ length: WORKERS }, (_, i) => agents(path.join(workerState, `worker-${i + 1}`))).flat();
  const status = async () => { try { return await api<any>(state, 'GET', '/status'); } catch { return undefined; } };
  // fetch reuses a kept-alive connection the hub may be closing after a long pause (podman exec steps):
  // a submit is idempotent by task id, so it is retried
  const submitOnce = async (n: number, prefix?: string) => {
    for (let i = 0; ; i++) {
      try { return await submit(state, n, prefix); } catch (err) { if (i === 2) throw err; }
    }
  };

  const play = podman(['kube', 'play', yaml]);
  t.equal(play.code, 0, 'kube play');
  if (play.code !== 0) { t.comment(play.out); return; }

  t.ok(await until(async () => (await status())?.failover?.workers?.length === WORKERS, 90_000, 250), '3 workers joined, each with a peer port');
  const peers = (await status())?.failover?.workers.map((w: any) => w.peerAddr).sort();
  t.same(peers, [0, 1, 2].map((i) => `127.0.0.1:${peerPort! + i}`), 'peer ports on loopback, one per worker container');

  // a first batch in star mode: echo text back through the hub
  const first = await submitOnce(6, 'first');
  const done = await api<any>(state, 'POST', '/wait', { ids: first, timeout_ms: 60_000 });
  t.equal(done.complete, true, 'all tasks final');
  t.ok(done.tasks.every((x: any) => x.state === 'done' && x.text === `echo: task ${x.id}`), 'echo text came back');

  // the model is mounted read-only, and is readable (plan reads its GGUF header inside a worker)
  const plan = podman(['exec', worker(1), 'node', '/app/dist/cli/main.js', 'plan', '--agents', '3', '--model', '/models/stories260K.gguf', '--json']);
  t.equal(plan.code, 0, 'plan inside the container');
  t.equal(JSON.parse(plan.out.trim().split('\n').pop()!).kvBytesPerToken, 640);
  const write = podman(['exec', worker(1), 'node', '-e', "require('fs').writeFileSync('/models/x', 'y')"]);
  t.not(write.code, 0, 'writing to /models fails');
  const whoami = podman(['exec', hubC, 'node', '-e', 'process.stdout.write(String(process.getuid()))']);
  t.equal(whoami.out.trim(), '10001', 'non-root');
  // the image's HEALTHCHECK command (podman's own timers need systemd, absent here, so run it directly)
  t.equal(podman(['exec', hubC, 'node', '/app/deploy/healthcheck.mjs']).code, 0, 'hub healthcheck passes');
  t.equal(podman(['exec', worker(2), 'node', '/app/deploy/healthcheck.mjs']).code, 0, 'worker healthcheck passes');
  // kube play drops the image's HEALTHCHECK: the rendered probes stand in.
  for (const c of [hubC, worker(2)]) {
    t.match(podman(['inspect', c, '--format', '{{json .Config.Healthcheck}}']).out, /healthcheck\.mjs/, `${c}: kube play gave it the rendered probe`);
    t.equal(podman(['healthcheck', 'run', c]).code, 0, `${c}: the probe passes`);
  }

  // failover: 60 tasks of 200 ms on 3 workers; the hub's container is killed (SIGKILL) once the run is under way
  const ids = await submitOnce(TASKS);
  t.ok(await until(async () => ((await status())?.tasks.done ?? 0) >= first.length + 3, 60_000, 50), 'the run is under way');
  const kill = podman(['kill', hubC]);
  t.equal(kill.code, 0, 'hub container killed');
  t.ok(await until(() => { const v = views(); return v.length === WORKERS && v.every((a) => a.mode === 'gossip'); }, 60_000, 200),
    'every worker went to gossip mode');
  const coord = new Set(views().map((a) => a.coordinator));
  t.same([...coord], ['worker-1'], 'one acting coordinator, the lowest id');
  // The members that hold the state (the others keep their own tasks only; a status without the field: every member).
  t.ok(await until(() => { const hs = views().filter((a) => (a as { holds_state?: boolean }).holds_state ?? true); return hs.length > 0 && hs.every((a) => a.replica.done === TASKS + first.length); }, 120_000, 250), 'the workers finished every accepted task without the hub');

  // the hub's container comes back on the same state: it replays its journal and the workers hand back
  if (podman(['inspect', hubC, '--format', '{{.State.Running}}']).out.trim() !== 'true') {
    t.equal(podman(['start', hubC]).code, 0, 'hub container started again');
  }
  t.ok(await until(async () => { const s = await status(); return !!s && s.tasks.done >= TASKS + first.length; }, 90_000, 250), 'the restarted hub has every task done');
  t.ok(await until(() => views().every((a) => a.mode === 'star'), 60_000, 200), 'every worker is back in star mode');
  const s = await status();
  const r = tally(state, ids);
  t.comment(`lost=${r.lost} duplicated=${r.duplicated} wrong=${r.wrong} (handback: ${s?.failover?.recorded} recorded, ${s?.failover?.duplicate} duplicate)`);
  t.equal(r.lost, 0, 'no result lost');
  t.equal(r.duplicated, 0, 'no result recorded twice');
  t.equal(r.wrong, 0, 'every answer is the fault-free one');

  // clean SIGTERM: stopping the hub container exits 0 well before the 30 s kill
  const stop = podman(['stop', '-t', '20', hubC]);
  t.equal(stop.code, 0, 'hub stops');
  t.equal(podman(['inspect', hubC, '--format', '{{.State.ExitCode}}']).out.trim(), '0', 'hub exited 0 on SIGTERM');

  const down = podman(['kube', 'down', yaml]);
  t.equal(down.code, 0, 'kube down');
  t.equal(podman(['pod', 'ps', '-q', '--filter', `name=${NAME}`]).out.trim(), '', 'no pods left');
  t.equal(podman(['ps', '-aq', '--filter', `name=${NAME}`]).out.trim(), '', 'no containers left');
});
