// The hub's results archive bound in a rendered deployment fits the state volume it is rendered with.
import t from 'tap';
import YAML from 'yaml';
import { renderDeployment, type DeployOptions } from '../../deploy/render/index.js';
import { parseArchiveMax } from '../../hub/archive-bound.js';
import { parseRetain } from '../../hub/retention.js';
import { parseSize } from '../../protocol/bytes.js';
import { swarm } from '../helpers/cli.js';

const MODEL = '/mnt/models/m.gguf';
const MiB = 2 ** 20;

/** A k3s render's state claim size and the hub's --archive-max, read back. */
function k3s(o: Partial<DeployOptions> = {}): { storage: string; archive?: { bytes: number; ageMs: number } } {
  const files = renderDeployment({ target: 'k3s', agents: 2, model: MODEL, ...o });
  const docs = YAML.parseAllDocuments(files['swarm-k3s.yaml']!).map((d) => d.toJSON() as any);
  const pvc = docs.find((d) => d.kind === 'PersistentVolumeClaim' && d.metadata.name === 'swarm-hub-state');
  const args: string[] = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'swarm-hub').spec.template.spec.containers[0].args;
  const at = args.indexOf('--archive-max');
  return { storage: pvc.spec.resources.requests.storage, ...(at >= 0 ? { archive: parseArchiveMax(args[at + 1]!) } : {}) };
}

t.test('k3s: the archive gets what the state volume leaves after the journal, and a bound gets a volume that holds it', async (t) => {
  const d = k3s();
  t.equal(d.storage, '1Gi', 'the default volume');
  t.same(d.archive, { bytes: 640 * MiB, ageMs: 0 }, 'the default: 640 MiB of 1Gi (the journal up to 5 x 64 MiB, a 64 MiB file being written)');
  t.same(k3s({ stateSize: '4Gi' }).archive, { bytes: (4096 - 384) * MiB, ageMs: 0 }, 'a larger volume: a larger archive');
  const b = k3s({ archiveMax: parseArchiveMax('2GiB,30d') });
  t.equal(b.storage, '3Gi', '2 GiB of archive: a 3Gi volume');
  t.same(b.archive, { bytes: 2 * 2 ** 30, ageMs: 30 * 86_400_000 }, 'the bound as given');
  t.ok(parseSize(b.storage) >= 2 * 2 ** 30 + 5 * 64 * MiB + 64 * MiB);
  const big = k3s({ retain: parseRetain('12h,50000,1GiB') });
  t.ok(parseSize(big.storage) >= 640 * MiB + 5 * 2 ** 30, `a horizon of 1 GiB hot: ${big.storage} for its journal and the archive`);
  t.throws(() => k3s({ archiveMax: parseArchiveMax('2GiB'), stateSize: '1Gi' }), { code: 'SWARM_ERR_CONFIG', message: /does not fit --state-size 1Gi.*--state-size 3Gi/ });
  t.throws(() => k3s({ archiveMax: parseArchiveMax('off') }), { code: 'SWARM_ERR_CONFIG', message: /no byte bound/ });
  t.throws(() => k3s({ stateSize: '256Mi' }), { code: 'SWARM_ERR_CONFIG', message: /leaves no room/ });
});

t.test('podman: --archive-max only when given (a host folder has no size; the hub\'s default applies)', async (t) => {
  const hubArgs = (o: Partial<DeployOptions>) => YAML.parseAllDocuments(renderDeployment({ target: 'podman', agents: 2, model: MODEL, ...o })['swarm-podman.yaml']!)
    .map((d) => d.toJSON() as any).find((d) => d.metadata?.name === 'swarm-hub').spec.containers[0].args as string[];
  t.notOk(hubArgs({}).includes('--archive-max'));
  const a = hubArgs({ archiveMax: parseArchiveMax('5GiB') });
  t.same(parseArchiveMax(a[a.indexOf('--archive-max') + 1]!), { bytes: 5 * 2 ** 30, ageMs: 0 });
});

t.test('swarm deploy render --archive-max: bad values and a bound the volume cannot hold are usage errors', async (t) => {
  for (const args of [['--archive-max', '10'], ['--archive-max', '2GiB', '--state-size', '1Gi'], ['--archive-max', 'off'], ['--state-size', 'big']]) {
    const r = swarm(['deploy', 'render', '--target', 'k3s', '--agents', '2', '--model', MODEL, ...args]);
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`);
    t.match(r.stderr, /SWARM_ERR_CONFIG/, args.join(' '));
  }
  const ok = swarm(['deploy', 'render', '--target', 'k3s', '--agents', '2', '--model', MODEL, '--archive-max', '2GiB', '--json']);
  t.equal(ok.code, 0, ok.stderr);
  t.match((JSON.parse(ok.stdout) as { files: Record<string, string> }).files['swarm-k3s.yaml']!, /storage: 3Gi/);
});
