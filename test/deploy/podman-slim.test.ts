// The Containerfile's slim step (deploy/container/slim.mjs) on a small made-up tree, without Podman:
// per target architecture it keeps only that CPU's llama.cpp binary package (an x64 `npm ci`
// installs the ARM64 one too), drops dev-only packages and the benches. This is the part of an ARM64
// image build that can run here (no ARM64 machine or emulator).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, tempDir } from '../helpers/cli.js';

function tree(dir: string): string {
  const src = path.join(dir, 'src');
  const put = (p: string, text = '{}') => { fs.mkdirSync(path.dirname(path.join(src, p)), { recursive: true }); fs.writeFileSync(path.join(src, p), text); };
  const pkgs: Record<string, object> = {
    '': { name: 'x' },
    'node_modules/pino': { version: '9.0.0' },
    'node_modules/@node-llama-cpp/linux-x64': { version: '3.22.1', optional: true, cpu: ['x64'] },
    'node_modules/@node-llama-cpp/linux-arm64': { version: '3.22.1', optional: true, cpu: ['arm64', 'x64'] },
    'node_modules/@node-llama-cpp/linux-x64-cuda': { version: '1.0.0', optional: true },
    'node_modules/tap': { version: '21.0.0', dev: true },
    'node_modules/typescript': { version: '5.9.3', devOptional: true },
  };
  put('package-lock.json', JSON.stringify({ lockfileVersion: 3, packages: pkgs }));
  put('package.json');
  for (const p of Object.keys(pkgs).filter((p) => p && !p.endsWith('-cuda'))) put(`${p}/package.json`);
  put('node_modules/@node-llama-cpp/linux-arm64/bins/llama-addon.node', 'arm64');
  put('node_modules/@node-llama-cpp/linux-x64/bins/llama-addon.node', 'x64');
  put('dist/cli/main.js', '');
  put('dist/bench/core.js', '');
  put('gen/protocol-validators.js', '');
  put('deploy/healthcheck.mjs', '');
  return src;
}

t.test('slim step: the target\'s llama.cpp binary only, no dev packages, no benches', async (t) => {
  const dir = tempDir(t);
  const src = tree(dir);
  for (const [targetarch, keep] of [['arm64', 'linux-arm64'], ['amd64', 'linux-x64']] as const) {
    const out = path.join(dir, `app-${targetarch}`);
    const r = spawnSync(process.execPath, [path.join(ROOT, 'deploy/container/slim.mjs'), src, out], { encoding: 'utf8', env: { ...process.env, SWARM_TARGETARCH: targetarch } });
    t.equal(r.status, 0, `slim for ${targetarch}: ${r.stdout.trim()} ${r.stderr.trim()}`);
    t.same(fs.readdirSync(path.join(out, 'node_modules/@node-llama-cpp')), [keep], `${targetarch}: only @node-llama-cpp/${keep}`);
    t.notOk(fs.existsSync(path.join(out, 'node_modules/tap')) || fs.existsSync(path.join(out, 'node_modules/typescript')), `${targetarch}: no dev packages`);
    t.ok(fs.existsSync(path.join(out, 'node_modules/pino/package.json')) && fs.existsSync(path.join(out, 'dist/cli/main.js')), `${targetarch}: runtime packages and the app`);
    t.ok(fs.existsSync(path.join(out, 'gen/protocol-validators.js')), `${targetarch}: the generated validators dist imports`);
    t.notOk(fs.existsSync(path.join(out, 'dist/bench')), `${targetarch}: no benches`);
  }
  // A target whose binary was not installed: the image would build without a working embedded engine; say so.
  fs.rmSync(path.join(src, 'node_modules/@node-llama-cpp/linux-arm64'), { recursive: true });
  const r = spawnSync(process.execPath, [path.join(ROOT, 'deploy/container/slim.mjs'), src, path.join(dir, 'app-missing')], { encoding: 'utf8', env: { ...process.env, SWARM_TARGETARCH: 'arm64' } });
  t.match(r.stderr, /no @node-llama-cpp\/linux-arm64 in node_modules/, 'a missing target binary is warned about');
});
