import fs from 'node:fs';

/**
 * The package's version (package.json), which tags the image a render names: a rollout changes the
 * tag, never a `latest` that means a different build on each node. Read from the file so the tag
 * never drifts from the release; dist/deploy/render/ and deploy/render/ both sit three levels down.
 */
export function packageVersion(): string {
  for (const rel of ['../../../package.json', '../../package.json']) {
    try {
      const v = (JSON.parse(fs.readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string });
      if (v.name === 'mittelo-swarm' && v.version) return v.version;
    } catch { /* try the next */ }
  }
  throw new Error('package.json of mittelo-swarm not found beside the render');
}
