// What a careless user passes where a file or an id goes, for the commands other than submit: a
// device or a huge file as the experiment, something not a GGUF to deploy render, a 300-character
// worker id; and `top --once` against a hub that is not there or refuses the token. Before: run and
// sweep read /dev/zero whole until the process died (std::bad_alloc), deploy render said
// SWARM_ERR_INTERNAL ("a bug"), credential printed a credential no hub accepts, top --once retried forever.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { swarm, tempDir } from '../helpers/cli.js';

t.test('run and sweep: an experiment file past 16 MiB (a device, a model by mistake) is a usage error, read no further', async (t) => {
  const root = tempDir(t);
  const big = path.join(root, 'big.yaml');
  fs.writeFileSync(big, Buffer.alloc(20 * 1024 * 1024, ' '));
  for (const cmd of ['run', 'sweep']) {
    const r = swarm([cmd, big, '--state-dir', path.join(root, 'state')], { timeoutMs: 60_000 });
    t.equal(r.code, 2, `${cmd}: exit 2 (${r.stderr.slice(0, 300)})`);
    t.match(r.stderr, new RegExp(`SWARM_ERR_CONFIG: cannot read experiment ${big}: larger than 16 MiB`), `${cmd}: says why`);
  }
  const dev = swarm(['run', '/dev/zero', '--state-dir', path.join(root, 'state')], { timeoutMs: 60_000 });
  t.equal(dev.code, 2, `run /dev/zero: exit 2 (${dev.stderr.slice(0, 300)})`);
});

t.test('deploy render --model of a file that is not a GGUF, and a credential for an id past 128 characters: usage errors', async (t) => {
  const root = tempDir(t);
  const notGguf = path.join(root, 'notes.txt');
  fs.writeFileSync(notGguf, 'not a model\n');
  const r = swarm(['deploy', 'render', '--target', 'podman', '--agents', '2', '--model', notGguf, '--out', path.join(root, 'out')], { timeoutMs: 30_000 });
  t.equal(r.code, 2, `deploy render: exit 2 (${r.stderr.trim()})`);
  t.match(r.stderr, /SWARM_ERR_CONFIG: cannot read GGUF .*notes\.txt/, 'says the model is not a GGUF');
  fs.mkdirSync(path.join(root, 'state'));
  fs.writeFileSync(path.join(root, 'state', 'token'), 'a-token-for-the-credential-0123\n');
  const c = swarm(['credential', 'w'.repeat(300), '--state-dir', path.join(root, 'state')], { timeoutMs: 30_000 });
  t.equal(c.code, 2, 'credential for a 300-character id: exit 2');
  t.match(c.stderr, /a worker id has at most 128 characters \(this one has 300\)/);
  t.equal(c.stdout, '', 'no credential printed');
  t.equal(swarm(['credential', 'w'.repeat(128), '--state-dir', path.join(root, 'state')]).code, 0, '128 characters: fine');
});

t.test('top --once against a hub that is not there exits 3, one that refuses the token exits 7, at once', async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, 'state');
  const gone = swarm(['top', '--once', '--hub-url', 'http://127.0.0.1:1'], { timeoutMs: 20_000 });
  t.equal(gone.code, 3, `no hub: exit 3 (${gone.stderr.trim()})`);
  t.match(gone.stderr, /SWARM_ERR_NO_SWARM: the hub at 127\.0\.0\.1:1 cannot be reached/);
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, 'a swarm runs');
  const control = (JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { control: { port: number } }).control.port;
  const wrong = swarm(['top', '--once', '--hub-url', `http://127.0.0.1:${control}`, '--token', 'not-the-token-0123456789'], { timeoutMs: 20_000 });
  t.equal(wrong.code, 7, `a wrong token: exit 7 (${wrong.stderr.trim()})`);
  t.match(wrong.stderr, /SWARM_ERR_AUTH/);
  const ok = swarm(['top', '--once', '--state-dir', dir], { timeoutMs: 20_000 });
  t.equal(ok.code, 0, 'the swarm itself: exit 0');
  t.match(ok.stdout, /workers 1 connected/);
});
