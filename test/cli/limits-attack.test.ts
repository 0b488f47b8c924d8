import fs from 'node:fs';
import t from 'tap';
import { api, pidsMentioning, swarm, tempDir, until } from '../helpers/cli.js';

/**
 * Settings past their bounds, as a careless user types them: each is a usage error (exit 2, the
 * option named) before anything starts, and the state directory is left as it was. Before, a port
 * past 65535, --max-tokens past 1,000,000 or --prefetch-below-ms past 60,000 were refused only by
 * the hub's own check, after `up` had made the state directory with its token, lock and logs; and a
 * --max-line past half the outbound bound was taken, after which every send of a long task cut the
 * worker's link and the acknowledged task failed as leased too often.
 */
t.test('settings past their bounds are refused before anything starts', async (t) => {
  const dir = `${tempDir(t)}/state`;
  for (const [opt, v] of [['--port', '70000'], ['--control-port', '70000'], ['--max-tokens', '2000000'],
    ['--prefetch-below-ms', '100000'], ['--max-line', String(32 * 1024 * 1024)], ['--lease-ahead-ms', '100000'], ['--lease-ahead-ms', 'soon']] as const) {
    const r = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', opt, v, '--state-dir', dir], { timeoutMs: 30_000 });
    t.equal(r.code, 2, `${opt} ${v}: a usage error`);
    t.match(r.stderr, new RegExp(`SWARM_ERR_CONFIG: .*${opt}`), `${opt} ${v}: names the option`);
    t.notOk(fs.existsSync(dir), `${opt} ${v}: no state directory made`);
    t.same(pidsMentioning(dir), [], 'no process left');
  }
});

t.test('swarm up --max-line reaches the workers it starts: a task past 1 MiB runs', async (t) => {
  const dir = tempDir(t);
  const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--max-line', String(4 * 1024 * 1024), '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(up.code, 0, up.stderr);
  t.teardown(() => { swarm(['down', '--state-dir', dir]); });
  const prompt = 'y'.repeat(2 * 1024 * 1024);
  await api(dir, 'POST', '/tasks', { id: 'long', prompt });
  let rec: { state?: string; error?: unknown; text?: string } = {};
  t.ok(await until(async () => ['done', 'failed'].includes((rec = await api(dir, 'GET', '/tasks/long')).state ?? ''), 30_000, 100), 'the task ends');
  t.equal(rec.state, 'done', `it ran (${JSON.stringify(rec.error)})`);
  t.equal(rec.text, `echo: ${prompt}`, 'its whole result is recorded');
});

t.test('a token an HTTP header cannot carry is refused before anything starts, wherever it comes from', async (t) => {
  const dir = `${tempDir(t)}/state`;
  // Before, the swarm started, and then every submit was refused (wrong token) or failed as a bug,
  // and `swarm down` had to kill the hub it could not ask to stop.
  for (const token of ['pässwort-long-enough', 'with space-long-enough', 'tab\there-long-enough']) {
    const r = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--token', token, '--state-dir', dir], { timeoutMs: 30_000 });
    t.equal(r.code, 2, `${JSON.stringify(token)}: a usage error`);
    t.match(r.stderr, /SWARM_ERR_CONFIG: the token given .*visible ASCII/, 'says what a token may hold');
    t.notOk(fs.existsSync(dir), 'no state directory made');
    const env = swarm(['hub', '--state-dir', dir], { env: { SWARM_TOKEN: token }, timeoutMs: 30_000 });
    t.equal(env.code, 2, `SWARM_TOKEN ${JSON.stringify(token)}: a usage error for swarm hub too`);
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(`${dir}/token`, Buffer.from([0x11, 0xfe, 0x13, 0x34, 0x4e, 0xff, 0x19, 0x5b, 0x1b, 0x07, 0x2f]));
  const r = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(r.code, 2, 'a damaged token file: a usage error');
  t.match(r.stderr, new RegExp(`SWARM_ERR_CONFIG: the token in ${dir}/token has characters`), 'naming the file');
  t.notOk(fs.existsSync(`${dir}/hub.json`), 'no hub was started');
  t.same(pidsMentioning(dir), [], 'no process left');
});

t.test('a token too long for a header or an argument, and a token file that is a folder: refused before anything starts, naming the cause', async (t) => {
  const dir = `${tempDir(t)}/state`;
  // Before, a 20,000-character token started a swarm whose hub then answered every submit, status
  // and down 431 (submit said SWARM_ERR_INTERNAL with no message); 130,000 failed `up` as a bug (E2BIG).
  const long = 'x'.repeat(20_000);
  const r = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--token', long, '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(r.code, 2, `--token of 20,000 characters: a usage error (${r.stderr.trim()})`);
  t.match(r.stderr, /SWARM_ERR_CONFIG: the token given .* is 20000 characters long; a token has at most 4096/, 'says the bound');
  t.notOk(fs.existsSync(dir), 'no state directory made');
  fs.mkdirSync(dir, { recursive: true });
  for (const n of [20_000, 130_000]) {
    fs.writeFileSync(`${dir}/token`, 'y'.repeat(n) + '\n');
    const f = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 30_000 });
    t.equal(f.code, 2, `a token file of ${n} characters: a usage error (${f.stderr.trim()})`);
    t.match(f.stderr, new RegExp(`SWARM_ERR_CONFIG: the token in ${dir}/token is ${n} characters long`), 'naming the file and the bound');
    t.notOk(fs.existsSync(`${dir}/hub.json`), 'no hub was started');
  }
  const ok = 'z'.repeat(4096);
  fs.writeFileSync(`${dir}/token`, ok + '\n');
  const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(up.code, 0, `a token of 4,096 characters runs (${up.stderr.trim()})`);
  const sub = swarm(['submit', 'long token', '--wait', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(sub.code, 0, `and takes tasks (${sub.stderr.trim()})`);
  t.match(sub.stdout, /echo: long token/);
  t.equal(swarm(['down', '--state-dir', dir], { timeoutMs: 30_000 }).code, 0, 'and stops');
  fs.rmSync(`${dir}/token`);
  fs.mkdirSync(`${dir}/token`);
  const d = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(d.code, 2, `a folder where the token file goes: refused (${d.stderr.trim()})`);
  t.match(d.stderr, new RegExp(`SWARM_ERR_STATE_ACCESS: the token file ${dir}/token cannot be read \\(EISDIR\\)`), 'naming the file');
  t.notMatch(d.stderr, /SWARM_ERR_INTERNAL/, 'not as a bug');
  t.same(pidsMentioning(dir), [], 'no process left');
});

t.test('a client token too long for a header, and a run id past the request line: usage errors naming the cause, not bugs with no message', async (t) => {
  const dir = `${tempDir(t)}/state`;
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, 'a swarm runs');
  const control = JSON.parse(fs.readFileSync(`${dir}/hub.json`, 'utf8')).control as { port: number };
  // Before, both were sent, the hub's HTTP layer answered 431 with no body, and the CLI said
  // "SWARM_ERR_INTERNAL: " (nothing more) and "this is a bug".
  const st = swarm(['status', '--hub-url', `http://127.0.0.1:${control.port}`, '--token', 'x'.repeat(20_000)], { timeoutMs: 30_000 });
  t.equal(st.code, 2, `status --token of 20,000 characters: a usage error (${st.stderr.slice(0, 300)})`);
  t.match(st.stderr, /SWARM_ERR_CONFIG: the token given .* is 20000 characters long/, 'says the bound');
  const rc = swarm(['runs', 'cancel', 'r'.repeat(20_000), '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(rc.code, 2, `runs cancel of a 20,000-character run id: a usage error (${rc.stderr.slice(0, 300)})`);
  t.match(rc.stderr, /SWARM_ERR_CONFIG: the control API answered POST \/runs\/r+… \(20013 characters\) with 431/, 'names the answer, the path cut short');
  t.notMatch(rc.stderr, /SWARM_ERR_INTERNAL|a bug/, 'not as a bug');
  const sub = swarm(['submit', 'still here', '--wait', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(sub.code, 0, 'the swarm still takes tasks');
});

t.test('a count is decimal digits: 1e3, 0x10 and 4.5 are usage errors, not 1000 or 16 agents', async (t) => {
  const dir = `${tempDir(t)}/state`;
  for (const v of ['1e3', '0x10', '4.5', '1_000']) {
    const r = swarm(['up', '--agents', v, '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 30_000 });
    t.equal(r.code, 2, `--agents ${v}: a usage error`);
    t.match(r.stderr, /SWARM_ERR_CONFIG: .*--agents must be an integer/, 'says what it takes');
    t.notOk(fs.existsSync(dir), 'nothing started');
  }
});
