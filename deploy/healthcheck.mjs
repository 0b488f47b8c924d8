#!/usr/bin/env node
// Container health check (Containerfile HEALTHCHECK, Podman kube probes; k3s uses exec-free probes).
// Hub: GET /healthz on the control API as the hub serves it, read from <state dir>/hub.json (written
// once the hub is up): plain HTTP on loopback, or HTTPS on the host's address (the --hosts layout,
// and any control API off loopback). /healthz needs no token, so nothing secret is sent and the
// certificate is not judged: a liveness check asks whether the hub answers, not whom to trust.
// Worker: with failover its status file (<state dir>/failover/<pid>.json, rewritten at least every
// 3 s) is a heartbeat: older than 15 s means a hung event loop. Without failover: the process is
// alive (a worker that loses its hub keeps retrying by design, so "connected" is not health).
// Usage: healthcheck.mjs [hub|worker] [state dir]   (state dir default: SWARM_STATE_DIR, else .swarm)
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';

const HEARTBEAT_STALE_MS = 15_000;
const dir = process.argv[3] ?? process.env.SWARM_STATE_DIR ?? '.swarm';
// The role is the command word of the container's first swarm process: PID 1 where node is the
// entrypoint, a child of the init where the pod shares one pid namespace (catatonit, tini, pause).
const cmdline = (() => {
  const pids = (() => { try { return fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).sort((a, b) => a - b); } catch { return []; } })();
  for (const pid of pids) {
    try {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => a.endsWith('/cli/main.js'))) return argv;
    } catch { /* gone */ }
  }
  return [];
})();
const isWorker = process.argv[2] === 'worker' || (process.argv[2] !== 'hub' && cmdline.includes('worker'));
if (isWorker) process.exit(workerHealthy() ? 0 : 1);

let hub;
try { hub = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')); } catch {
  process.stderr.write(`healthcheck: no ${path.join(dir, 'hub.json')} yet\n`);
  process.exit(1);
}
const c = hub.control ?? {};
// A wildcard bind answers on loopback too.
const host = !c.host || c.host === '0.0.0.0' || c.host === '::' ? '127.0.0.1' : c.host;
const get = c.tls ? https.get : http.get;
const req = get({ host, port: c.port, path: '/healthz', timeout: 2000, ...(c.tls ? { rejectUnauthorized: false } : {}) }, (res) => {
  res.resume();
  if (res.statusCode !== 200) process.stderr.write(`healthcheck: ${c.tls ? 'https' : 'http'}://${host}:${c.port}/healthz answered ${res.statusCode}\n`);
  process.exit(res.statusCode === 200 ? 0 : 1);
});
req.on('timeout', () => { req.destroy(); process.stderr.write(`healthcheck: ${host}:${c.port} did not answer in 2 s\n`); process.exit(1); });
req.on('error', (err) => { process.stderr.write(`healthcheck: ${c.tls ? 'https' : 'http'}://${host}:${c.port}/healthz: ${err.message}\n`); process.exit(1); });

/** A fresh failover status file, or (no failover: none was ever written) a live process. */
function workerHealthy() {
  let names = [];
  try { names = fs.readdirSync(path.join(dir, 'failover')).filter((n) => n.endsWith('.json')); } catch { /* no failover */ }
  if (names.length === 0) return cmdline.length > 0;
  const now = Date.now();
  return names.some((n) => {
    try { return now - fs.statSync(path.join(dir, 'failover', n)).mtimeMs < HEARTBEAT_STALE_MS; } catch { return false; }
  });
}
