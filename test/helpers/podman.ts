import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';

/** Podman for the container tests (test/podman*.test.ts): run from the repo root, bounded in time. */

import { ROOT } from './paths.js';
export { ROOT };

/** Run `podman ARGS` (with `input` on its stdin); output is stdout and stderr together. Never throws. */
export function podman(args: string[], timeoutMs = 120_000, input?: string): { code: number | null; out: string } {
  const r = spawnSync('podman', args, { encoding: 'utf8', timeout: timeoutMs, cwd: ROOT, maxBuffer: 64 << 20, input });
  return { code: r.status, out: (r.stdout ?? '') + (r.stderr ?? '') };
}

export const hasPodman = spawnSync('podman', ['--version']).status === 0;

/**
 * Remove what a test made: pods (by name), images (by name), and stage images a build may have left
 * (only those with the Containerfile's stage label, so nobody else's images are touched).
 */
export function removeAll(o: { pods?: string[]; images?: string[] }): void {
  for (const pod of o.pods ?? []) podman(['pod', 'rm', '-f', '--ignore', pod]);
  if (o.images?.length) podman(['rmi', '-f', ...o.images]);
  podman(['image', 'prune', '-f', '--filter', 'label=io.swarm.stage']);
}

/**
 * Build the swarm image from this checkout without a registry: a base image made from the host's
 * node (`podman import`), then the Containerfile with `--layers=false` (nothing untagged left) and
 * no network. Returns the build's exit code and output.
 */
export function buildImage(image: string, base: string): { code: number | null; out: string } {
  const made = spawnSync(path.join(ROOT, 'deploy/container/make-base-image.sh'), [base], { encoding: 'utf8', timeout: 120_000 });
  if (made.status !== 0) return { code: made.status, out: `make-base-image.sh: ${made.stderr}` };
  return podman(['build', '--layers=false', '--format', 'docker', '--network', 'none', '--build-arg', `BASE_IMAGE=${base}`, '-t', image, '.'], 900_000);
}

/** What the Containerfile copies from the checkout (node_modules stands in as package-lock.json). */
const CONTEXT = ['Containerfile', 'package.json', 'package-lock.json', '.npmrc', 'tsconfig.json', 'protocol', 'sched', 'hub', 'worker', 'drivers', 'topologies', 'cli', 'bench', 'deploy', 'gen'];

/** A digest of the image's inputs: the files the build copies, the host's node (the base image), the base script. */
export function contextDigest(root = ROOT): string {
  const h = crypto.createHash('sha256').update(`${process.version} ${process.execPath}\0`);
  const add = (rel: string): void => {
    const p = path.join(root, rel);
    let st: fs.Stats;
    try { st = fs.statSync(p); } catch { return; }
    if (st.isDirectory()) { for (const n of fs.readdirSync(p).sort()) add(path.join(rel, n)); return; }
    h.update(`${rel}\0${st.size}\0`).update(fs.readFileSync(p)).update('\0');
  };
  for (const rel of CONTEXT) add(rel);
  return h.digest('hex').slice(0, 16);
}

/** The shared image of this checkout's content: `localhost/swarm:test-<digest>` and its base. */
export interface SharedImage { image: string; base: string; code: number | null; out: string; built: boolean }

/**
 * The swarm image for the podman tests, built once per content and reused: the tag names a digest of
 * the build's inputs, so any test that finds it present uses it, and a test that finds it absent builds it
 * under a lock file in the OS temp folder while any other waits (a lock whose process is gone is taken
 * over). No test depends on another having run first. Building a new content removes the tags of older
 * ones, so one shared image (and its base) stays between runs, not one per test and commit.
 */
export async function sharedImage(waitMs = 1_800_000): Promise<SharedImage> {
  const tag = `test-${contextDigest()}`;
  const image = `localhost/swarm:${tag}`, base = `localhost/swarm-node-base:${tag}`;
  const lock = path.join(os.tmpdir(), `swarm-podman-${tag}.lock`);
  const exists = () => podman(['image', 'exists', image]).code === 0 && podman(['image', 'exists', base]).code === 0;
  for (const end = Date.now() + waitMs; Date.now() < end;) {
    if (exists()) return { image, base, code: 0, out: '', built: false };
    let fd: number | undefined;
    try { fd = fs.openSync(lock, 'wx'); } catch { /* someone builds it */ }
    if (fd !== undefined) {
      try {
        fs.writeSync(fd, String(process.pid));
        if (exists()) return { image, base, code: 0, out: '', built: false };
        const r = buildImage(image, base);
        if (r.code === 0) pruneOlder(tag);
        return { image, base, ...r, built: true };
      } finally { fs.closeSync(fd); fs.rmSync(lock, { force: true }); }
    }
    const holder = Number(fs.existsSync(lock) ? fs.readFileSync(lock, 'utf8') : NaN);
    if (holder > 0 && !pidAlive(holder)) { fs.rmSync(lock, { force: true }); continue; }
    await new Promise((r) => setTimeout(r, 2000));
  }
  return { image, base, code: null, out: `the shared image ${image} was not built within ${waitMs} ms (lock ${lock})`, built: false };
}

/** Remove the shared images of other contents (an image a running container uses stays: rmi refuses it). */
function pruneOlder(tag: string): void {
  for (const repo of ['localhost/swarm', 'localhost/swarm-node-base']) {
    const old = podman(['images', '--format', '{{.Repository}}:{{.Tag}}', '--filter', `reference=${repo}:test-*`]).out.split('\n').map((s) => s.trim())
      .filter((s) => s.startsWith(`${repo}:test-`) && s !== `${repo}:${tag}`);
    if (old.length) podman(['rmi', ...old]);
  }
}

function pidAlive(pid: number): boolean { try { process.kill(pid, 0); return true; } catch { return false; } }

/**
 * The podman tests' common guard: true (the caller returns) when podman, or the model file a test
 * names, is missing. Under CI=true that FAILS (CI installs podman with deploy/ci-install.sh); otherwise it skips.
 */
export function podmanMissing(t: { fail(msg: string): void; skip(msg: string, fn: () => void): void }, model?: string): boolean {
  const why = !hasPodman ? (process.env.CI === 'true' ? 'podman not found (CI runs deploy/ci-install.sh)' : 'podman not installed')
    : model && !fs.existsSync(model) ? (process.env.CI === 'true' ? `test model ${model} missing` : `no ${model}`) : undefined;
  if (!why) return false;
  if (process.env.CI === 'true') t.fail(why); else t.skip(why, () => {});
  return true;
}

/** The shared image's tag for a test, its build checked (`undefined`: it did not build; the failure and its output are recorded). */
export async function testImage(t: Test): Promise<string | undefined> {
  const build = await sharedImage();
  t.equal(build.code, 0, `image ${build.built ? 'builds (base from the host\'s node, no registry)' : 'shared'} (${build.image})`);
  if (build.code !== 0) { t.comment(build.out.slice(-3000)); return undefined; }
  return build.image;
}

/**
 * A single-host pod test's scratch folder and the yaml it renders there; the pods (`<name>-hub`,
 * `<name>-workers`, kube down first) and the folder go at the test's end, pass or fail.
 */
export function podScratch(t: Test, name: string, prefix: string): { dir: string; yaml: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const yaml = path.join(dir, 'swarm-podman.yaml');
  t.teardown(() => {
    if (fs.existsSync(yaml)) podman(['kube', 'down', yaml]);
    removeAll({ pods: [`${name}-hub`, `${name}-workers`] });
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir, yaml };
}
