import path from 'node:path';
import t from 'tap';
import { api, pidsMentioning, swarm, tempDir, until } from '../helpers/cli.js';
import { llamaPrereqs, missingPrereq } from '../helpers/llama.js';
import fs from 'node:fs';

t.test('swarm up --engine shared: one llama-server serves every worker, and down stops it', async (t) => {
  const p = llamaPrereqs('llama-server');
  if (missingPrereq(t, p)) return;
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const model = path.join(dir, 'm.gguf');
  fs.copyFileSync(p.model, model); // a private path: "which processes mention it" is then ours alone
  const up = swarm(['up', '--agents', '4', '--engine', 'shared', '--model', model, '--detach', '--json', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  t.match(JSON.parse(up.stdout), { engine: 'shared', driver: 'llama-server' });
  const s = await api<{ engine: { mode: string; pid: number }; workers: { driver: string }[] }>(state, 'GET', '/status');
  t.equal(s.engine.mode, 'shared');
  t.ok(s.workers.every((w) => w.driver === 'llama-server'), 'workers use the shared engine');
  const engines = pidsMentioning(model).filter((pid) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'llama-server'; } catch { return false; } });
  t.equal(engines.length, 1, 'exactly one llama-server runs the model');
  const sub = swarm(['submit', '--file', '-', '--wait', '--json', '--state-dir', state], { input: Array.from({ length: 8 }, (_, i) => JSON.stringify({ prompt: 'Once upon a time', max_tokens: 12, temperature: 0, id: `q${i}` })).join('\n') });
  t.equal(sub.code, 0, sub.stderr);
  const res = JSON.parse(sub.stdout) as { tasks: { state: string; text: string }[] };
  t.equal(res.tasks.filter((x) => x.state === 'done').length, 8);
  t.equal(new Set(res.tasks.map((x) => x.text)).size, 1, 'temperature 0: the same answer from every slot');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  t.ok(await until(() => pidsMentioning(dir).length === 0, 60_000), 'engine, workers and hub are gone');
});

t.test('--engine rejects an unknown mode as a usage error', async (t) => {
  const r = swarm(['up', '--engine', 'both', '--state-dir', tempDir(t)]);
  t.equal(r.code, 2);
  t.match(r.stderr, /batched, per-worker or llama-server/);
});
