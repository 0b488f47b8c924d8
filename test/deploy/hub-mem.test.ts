// The hub's memory in a rendered deployment follows the retention horizon it is rendered with.
import t from 'tap';
import YAML from 'yaml';
import { renderDeployment } from '../../deploy/render/index.js';
import { HUB_FIXED_BYTES, HUB_RSS_PER_HOT_BYTE, hubMem } from '../../deploy/render/hub-mem.js';
import { DEFAULT_RETAIN, hotCeiling, parseRetain } from '../../hub/retention.js';
import { swarm } from '../helpers/cli.js';

const MODEL = '/mnt/models/m.gguf';
const MiB = 2 ** 20;

/** The hub container of a k3s render: its args, its memory and its environment. */
function k3sHub(retain?: string): { args: string[]; request: string; limit: string; env: { name: string; value: string }[] } {
  const files = renderDeployment({ target: 'k3s', agents: 2, model: MODEL, ...(retain ? { retain: parseRetain(retain) } : {}) });
  const docs = YAML.parseAllDocuments(files['swarm-k3s.yaml']!).map((d) => d.toJSON() as any);
  const c = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'swarm-hub').spec.template.spec.containers[0];
  return { args: c.args, request: c.resources.requests.memory, limit: c.resources.limits.memory, env: c.env };
}

t.test('the default horizon renders the default limit, and the hub runs with its own default', async (t) => {
  const m = hubMem();
  const h = k3sHub();
  t.equal(h.limit, `${m.limit}Mi`);
  t.equal(h.request, `${m.request}Mi`);
  t.notOk(h.args.includes('--retain'), 'no --retain: the hub\'s default is the one the limit assumes');
  // V8's heap bounded inside the limit, whatever node would pick (hub/heap-limit.ts).
  const heap = h.env.find((e) => e.name === 'NODE_OPTIONS')?.value;
  t.equal(heap, `--max-old-space-size=${m.oldSpace}`, 'V8\'s old space bounded inside the limit');
  t.ok(m.oldSpace < m.limit && m.oldSpace >= m.limit / 4, `${m.oldSpace} of ${m.limit} Mi`);
  t.ok(h.env.some((e) => e.name === 'SWARM_TOKEN_FILE'), 'the token\'s file as before');
  t.ok(m.limit * MiB >= HUB_FIXED_BYTES + HUB_RSS_PER_HOT_BYTE * DEFAULT_RETAIN.bytes, 'the limit holds the steady state the default bytes bound allows');
  // The soak's hub peaked at 492 MB at the default horizon, 451-502 MB over 1,000,000 tasks inside this limit (docs/journal.md, "The bytes bound").
  t.ok(m.limit >= 492 * 1.2, `the default's limit leaves 20% above the soak's peak (${m.limit} Mi)`);
});

t.test('a larger horizon raises the limit, and the hub is rendered with that horizon', async (t) => {
  const h = k3sHub('24h,100000,512MiB');
  const m = hubMem(parseRetain('24h,100000,512MiB'));
  t.equal(h.limit, `${m.limit}Mi`);
  t.ok(m.limit * MiB >= HUB_FIXED_BYTES + HUB_RSS_PER_HOT_BYTE * 512 * MiB, `${m.limit} Mi holds 512 MiB hot`);
  // While the archive catches up the hot state may pass its bound, up to the ceiling where new work is refused.
  for (const b of ['64MiB', '256MiB', '512MiB', '4GiB']) {
    const x = hubMem(parseRetain(`,,${b}`));
    t.ok(x.limit * MiB >= HUB_FIXED_BYTES + HUB_RSS_PER_HOT_BYTE * hotCeiling(parseRetain(`,,${b}`).bytes), `${b}: ${x.limit} Mi holds the hot state at its ceiling`);
  }
  t.ok(m.limit > hubMem().limit);
  const at = h.args.indexOf('--retain');
  t.ok(at >= 0, 'the hub gets --retain');
  t.same(parseRetain(h.args[at + 1]!), parseRetain('24h,100000,512MiB'), 'the same horizon, read back');
  // A bigger count alone: the duplicate window's ids grow with it.
  t.ok(hubMem({ ageMs: 1, count: 5_000_000 }).limit > hubMem().limit, 'a count past the default grows the window');
  // podman renders the same limit.
  const files = renderDeployment({ target: 'podman', agents: 2, model: MODEL, retain: parseRetain(',,512MiB') });
  const pod = YAML.parseAllDocuments(files['swarm-podman.yaml']!).map((d) => d.toJSON() as any).find((d) => d.metadata?.name === 'swarm-hub');
  t.equal(pod.spec.containers[0].resources.limits.memory, `${m.limit}Mi`, 'podman: the same limit');
  t.ok(pod.spec.containers[0].env.some((e: { name: string; value: string }) => e.name === 'NODE_OPTIONS' && e.value === `--max-old-space-size=${m.oldSpace}`), 'and the same old space');
  t.equal(k3sHub('24h,100000,512MiB').env.find((e) => e.name === 'NODE_OPTIONS')?.value, `--max-old-space-size=${m.oldSpace}`, 'k3s: the old space for the larger limit');
  t.ok(pod.spec.containers[0].args.includes('--retain'));
});

t.test('swarm deploy render --retain: a bad horizon is a usage error', async (t) => {
  const r = swarm(['deploy', 'render', '--target', 'k3s', '--agents', '2', '--model', MODEL, '--retain', ',,0B']);
  t.equal(r.code, 2, r.stderr);
  t.match(r.stderr, /SWARM_ERR_CONFIG: .*bytes "0B" is not a positive size/);
  const ok = swarm(['deploy', 'render', '--target', 'k3s', '--agents', '2', '--model', MODEL, '--retain', '12h,50000,1GiB', '--json']);
  t.equal(ok.code, 0, ok.stderr);
  const yaml = (JSON.parse(ok.stdout) as { files: Record<string, string> }).files['swarm-k3s.yaml']!;
  t.match(yaml, new RegExp(`memory: ${hubMem(parseRetain('12h,50000,1GiB')).limit}Mi`), 'the limit for 1 GiB hot');
});
