import { spawnSync } from 'node:child_process';
import path from 'node:path';

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
