#!/usr/bin/env node
// Make an engine build image without a registry: the host's node and its installed Debian packages for
// building llama.cpp (cmake, g++, make, git, a shell and coreutils, with everything they depend on),
// imported with `podman import`. Use it as ENGINE_BUILD_IMAGE for the Containerfile's with-llama-server
// target when docker.io is not reachable:
//   node deploy/container/make-build-image.mjs [IMAGE_NAME]     (default localhost/swarm-engine-build:20)
// Needs: podman, dpkg, and the packages installed on the host (apt-get install cmake g++ make git).
// About 500 MB; only the build stage uses it, so remove it after the build. Prints the image name.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const IMAGE = process.argv[2] ?? 'localhost/swarm-engine-build:20';
const WANTED = ['cmake', 'g++', 'make', 'git', 'dash', 'coreutils', 'sed', 'grep', 'findutils', 'diffutils', 'tar', 'gzip'];

const sh = (cmd, args) => execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20 });

// installed packages, and which installed package provides each virtual name
const installed = new Set();
const provides = new Map();
for (const line of sh('dpkg-query', ['-W', '-f', '${Package}\t${Provides}\t${Status}\n']).split('\n')) {
  const [pkg, prov, status] = line.split('\t');
  if (!pkg || !status?.endsWith(' installed')) continue;
  installed.add(pkg);
  for (const v of (prov ?? '').split(',')) { const n = v.replace(/\(.*\)/, '').trim(); if (n && !provides.has(n)) provides.set(n, pkg); }
}
const resolve = (name) => { const n = name.split(':')[0]; return installed.has(n) ? n : provides.get(n); };
const missing = WANTED.filter((p) => !resolve(p));
if (missing.length) {
  process.stderr.write(`make-build-image: not installed on this host: ${missing.join(' ')} (apt-get install ${missing.join(' ')})\n`);
  process.exit(1);
}

// the dependency closure (Pre-Depends and Depends; the first installed alternative of each)
const seen = new Set();
const todo = WANTED.map(resolve);
while (todo.length) {
  const p = todo.pop();
  if (!p || seen.has(p)) continue;
  seen.add(p);
  for (const alt of sh('dpkg-query', ['-W', '-f', '${Pre-Depends}, ${Depends}', p]).split(',')) {
    const first = alt.split('|').map((a) => a.replace(/\(.*\)/, '').trim()).filter(Boolean).map(resolve).find(Boolean);
    if (first) todo.push(first);
  }
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-build-image-'));
try {
  // merged /usr as on the host
  for (const d of ['bin', 'lib', 'lib64', 'sbin']) {
    fs.mkdirSync(path.join(root, 'usr', d), { recursive: true });
    fs.symlinkSync(`usr/${d}`, path.join(root, d));
  }
  const copy = (file, follow = false) => {
    let st;
    try { st = fs.lstatSync(file); } catch { return; }
    if (st.isDirectory()) return;
    const dest = path.join(root, fs.realpathSync(path.dirname(file)), path.basename(file));
    if (fs.existsSync(dest) || isLink(dest)) return;
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    if (st.isSymbolicLink() && !follow) fs.symlinkSync(fs.readlinkSync(file), dest);
    else fs.copyFileSync(file, dest);
    if (!st.isSymbolicLink() || follow) fs.chmodSync(dest, fs.statSync(file).mode & 0o7777);
  };
  const isLink = (p) => { try { return fs.lstatSync(p).isSymbolicLink(); } catch { return false; } };
  let files = 0;
  for (const p of seen) {
    for (const f of sh('dpkg', ['-L', p]).split('\n')) if (f.startsWith('/')) { copy(f); files++; }
  }
  // node and its libraries; cc and c++ (Debian's alternatives, not in any package's file list)
  const node = fs.realpathSync(process.execPath);
  fs.mkdirSync(path.join(root, 'usr/local/bin'), { recursive: true });
  fs.copyFileSync(node, path.join(root, 'usr/local/bin/node'));
  fs.chmodSync(path.join(root, 'usr/local/bin/node'), 0o755);
  for (const m of sh('ldd', [node]).matchAll(/(\/\S+\.so[^\s]*)/g)) copy(m[1], true);
  for (const [alias, target] of [['cc', 'gcc'], ['c++', 'g++']]) {
    const dest = path.join(root, 'usr/bin', alias);
    if (isLink(dest)) fs.rmSync(dest);
    fs.symlinkSync(target, dest);
  }
  // links that point outside what was copied (e.g. /etc/alternatives): replace with the file itself
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isSymbolicLink() && !fs.existsSync(p)) {
        const host = p.slice(root.length);
        fs.rmSync(p);
        try { fs.copyFileSync(host, p); fs.chmodSync(p, fs.statSync(host).mode & 0o7777); } catch { /* dangling on the host too */ }
      }
    }
  };
  walk(path.join(root, 'usr'));
  for (const d of ['tmp', 'root', 'etc']) fs.mkdirSync(path.join(root, d), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  fs.writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\n');
  for (const f of ['/etc/ld.so.cache', '/etc/ld.so.conf']) if (fs.existsSync(f)) fs.copyFileSync(f, path.join(root, f));

  const changes = ['ENV PATH=/usr/local/bin:/usr/bin:/bin', 'ENV CC=gcc', 'ENV CXX=g++', 'ENV HOME=/root', 'CMD ["/bin/sh"]'];
  await new Promise((resolveP, reject) => {
    const tar = spawn('tar', ['-C', root, '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const imp = spawn('podman', ['import', '-q', ...changes.flatMap((c) => ['--change', c]), '-', IMAGE], { stdio: [tar.stdout, 'ignore', 'inherit'] });
    imp.on('exit', (code) => (code === 0 ? resolveP() : reject(new Error(`podman import exited ${code}`))));
    tar.on('error', reject);
    imp.on('error', reject);
  });
  process.stderr.write(`make-build-image: ${seen.size} packages, ${files} paths\n`);
  process.stdout.write(`${IMAGE}\n`);
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
