#!/usr/bin/env node
// Build-stage helper of the Containerfile: copy the compiled app and only the production
// dependencies into OUT, trimmed of what never runs in a container. Plain Node, no shell, so the
// build stage works on a base image that has nothing but `node`.
//   node deploy/container/slim.mjs SRC OUT
import fs from 'node:fs';
import path from 'node:path';

const [src = '.', out = '/app'] = process.argv.slice(2);
const lock = JSON.parse(fs.readFileSync(path.join(src, 'package-lock.json'), 'utf8'));

// Dependencies that are in package.json for tests or tooling only (schema validation of rendered
// manifests; the type checker npm pulls in as node-llama-cpp's optional peer).
const NOT_AT_RUNTIME = new Set(['node_modules/kubernetes-models', 'node_modules/typescript']);
// Files and folders no running process reads. node-llama-cpp/llama/gitRelease.bundle (34 MB) is the
// llama.cpp source, needed only by the optional llama-server build stage.
const DROP_FILE = /(\.map|\.d\.[cm]?ts|\.md|\.markdown|LICENSE\.txt|CHANGELOG.*|\.tsbuildinfo)$/i;
const DROP_PATH = [
  'node_modules/node-llama-cpp/llama/gitRelease.bundle',
  'node_modules/node-llama-cpp/templates',
];

let bytes = 0;
function copy(from, to) {
  const st = fs.lstatSync(from);
  if (st.isDirectory()) {
    fs.mkdirSync(to, { recursive: true });
    for (const e of fs.readdirSync(from)) copy(path.join(from, e), path.join(to, e));
  } else if (st.isSymbolicLink()) {
    fs.symlinkSync(fs.readlinkSync(from), to);
  } else if (!DROP_FILE.test(from) || from.endsWith('package.json')) {
    fs.copyFileSync(from, to);
    fs.chmodSync(to, st.mode & 0o755);
    // The hub's bundle is used only while it is newer than dist/cli/main.js (cli/main.ts): keep the times.
    fs.utimesSync(to, st.atime, st.mtime);
    bytes += st.size;
  }
}

fs.mkdirSync(out, { recursive: true });
copy(path.join(src, 'dist'), path.join(out, 'dist'));
fs.rmSync(path.join(out, 'dist/bench'), { recursive: true, force: true });
for (const f of ['package.json', 'package-lock.json']) copy(path.join(src, f), path.join(out, f));
// The generated validators (dist imports them as #gen/…, package.json's `imports`).
copy(path.join(src, 'gen'), path.join(out, 'gen'));
fs.mkdirSync(path.join(out, 'deploy'), { recursive: true });
copy(path.join(src, 'deploy/healthcheck.mjs'), path.join(out, 'deploy/healthcheck.mjs'));

const kept = [];
for (const [p, meta] of Object.entries(lock.packages ?? {})) {
  if (!p.startsWith('node_modules/') || meta.dev || meta.devOptional || meta.link) continue;
  if ([...NOT_AT_RUNTIME].some((n) => p === n || p.startsWith(n + '/node_modules/'))) continue;
  // nested packages are copied with their parent; copy each top-level-most path once
  if (kept.some((k) => p.startsWith(k + '/'))) continue;
  if (!fs.existsSync(path.join(src, p))) continue; // optional packages not installed (GPU builds)
  kept.push(p);
}
for (const p of kept) copy(path.join(src, p), path.join(out, p));
// a nested dev-only package inside a kept one goes again
for (const [name, meta] of Object.entries(lock.packages ?? {})) {
  if ((meta.dev || meta.devOptional) && fs.existsSync(path.join(out, name))) fs.rmSync(path.join(out, name), { recursive: true, force: true });
}
for (const p of DROP_PATH) fs.rmSync(path.join(out, p), { recursive: true, force: true });
// The llama.cpp binaries of other CPUs (npm ci on x64 installs linux-arm64 as well): keep the target's.
const arch = { amd64: 'x64', x86_64: 'x64', x64: 'x64', arm64: 'arm64', aarch64: 'arm64' }[process.env.SWARM_TARGETARCH || process.arch];
const binaries = path.join(out, 'node_modules/@node-llama-cpp');
if (arch && fs.existsSync(path.join(binaries, `linux-${arch}`))) {
  for (const d of fs.readdirSync(binaries)) if (d.startsWith('linux-') && d !== `linux-${arch}`) fs.rmSync(path.join(binaries, d), { recursive: true, force: true });
} else if (arch) process.stderr.write(`slim: warning: no @node-llama-cpp/linux-${arch} in node_modules: the embedded engine will not load in this image\n`);
process.stdout.write(`slim: ${kept.length} packages, ${(bytes / 1048576).toFixed(1)} MiB copied to ${out}\n`);
