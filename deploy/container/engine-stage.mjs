#!/usr/bin/env node
// The Containerfile's engine stage: build llama-server & co. from the llama.cpp source node-llama-cpp
// ships, into /opt/llama, with what the runtime image needs to run them:
//   /opt/llama/bin   the programs, stripped
//   /opt/llama/lib   their shared libraries beyond glibc (libgomp, libstdc++, libgcc_s)
//   /opt/llama/sh    /bin/sh and sleep: the engine is started through a small sh watchdog
//                    (drivers/llama-server/engine-process.ts), and the slim base may have no shell
// Installs the build tools with apt-get only when they are missing (an image made by
// make-build-image.mjs has them, so that build needs no network). Run from the build's /src.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const OUT = '/opt/llama';
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit' });
const which = (name) => (process.env.PATH ?? '').split(':').map((d) => path.join(d, name)).find((p) => fs.existsSync(p));

const tools = ['cmake', 'g++', 'make', 'git', 'strip'];
if (tools.some((t) => !which(t))) {
  run('apt-get', ['update']);
  run('apt-get', ['install', '-y', '--no-install-recommends', 'cmake', 'g++', 'make', 'git', 'binutils']);
  fs.rmSync('/var/lib/apt/lists', { recursive: true, force: true });
}
const jobs = String(os.availableParallelism?.() ?? os.cpus().length);
run('node', ['dist/cli/main.js', 'engine', 'build', '--out', `${OUT}/bin`, '--jobs', jobs, '--quiet']);

const bins = fs.readdirSync(`${OUT}/bin`).filter((n) => n.startsWith('llama-')).map((n) => `${OUT}/bin/${n}`);
run('strip', bins);

// shared libraries the programs load, except glibc's own (every base image has those)
const GLIBC = /^(libc|libm|libpthread|libdl|librt|ld-linux[^.]*)\.so/;
fs.mkdirSync(`${OUT}/lib`, { recursive: true });
// the dynamic loader's --list, which ldd (a bash script, absent from make-build-image.mjs's base) wraps
const loader = ['/lib64/ld-linux-x86-64.so.2', '/lib/ld-linux-aarch64.so.1'].find((p) => fs.existsSync(p));
const libsOf = (bin) => execFileSync(loader ?? 'ldd', loader ? ['--list', bin] : [bin], { encoding: 'utf8' });
for (const b of bins) {
  for (const m of libsOf(b).matchAll(/(\S+\.so\S*) => (\/\S+)/g)) {
    if (GLIBC.test(m[1]) || fs.existsSync(`${OUT}/lib/${m[1]}`)) continue;
    fs.copyFileSync(m[2], `${OUT}/lib/${m[1]}`);
  }
}
fs.mkdirSync(`${OUT}/sh`, { recursive: true });
fs.copyFileSync(fs.realpathSync(which('dash') ?? '/bin/sh'), `${OUT}/sh/sh`);
fs.copyFileSync(fs.realpathSync(which('sleep')), `${OUT}/sh/sleep`);
for (const f of fs.readdirSync(`${OUT}/sh`)) fs.chmodSync(`${OUT}/sh/${f}`, 0o755);
process.stdout.write(`engine stage: ${bins.length} programs, libraries: ${fs.readdirSync(`${OUT}/lib`).join(' ')}\n`);
