#!/usr/bin/env node
// Container health check (Containerfile HEALTHCHECK, Kubernetes exec probes).
// Hub: GET /healthz on the control API, which listens on loopback inside the container; its port is
// read from <SWARM_STATE_DIR>/hub.json, which the hub writes when it is up. Worker: the process is
// alive (a worker that loses its hub keeps retrying by design, so "connected" is not health).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const dir = process.env.SWARM_STATE_DIR ?? '.swarm';
const cmdline = (() => { try { return fs.readFileSync('/proc/1/cmdline', 'utf8').split('\0'); } catch { return []; } })();
const isWorker = process.argv[2] === 'worker' || (process.argv[2] !== 'hub' && cmdline.includes('worker'));
if (isWorker) process.exit(cmdline.length > 0 ? 0 : 1);

let hub;
try { hub = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')); } catch {
  process.stderr.write(`healthcheck: no ${path.join(dir, 'hub.json')} yet\n`);
  process.exit(1);
}
const req = http.get({ host: '127.0.0.1', port: hub.control.port, path: '/healthz', timeout: 2000 }, (res) => {
  res.resume();
  process.exit(res.statusCode === 200 ? 0 : 1);
});
req.on('timeout', () => { req.destroy(); process.exit(1); });
req.on('error', () => process.exit(1));
