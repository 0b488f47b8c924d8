import t from 'tap';
import { SwarmError } from '../../protocol/index.js';
import { StopFilter } from '../../drivers/index.js';
import { TurnReader, encodePrompt, llamaCliFactory, INPUT_MARK, RESET_MARK } from '../../drivers/llama-cli/index.js';
import { collect, drainError, engineOutlivesOwner, llamaPrereqs, missingPrereq } from '../helpers/llama.js';


t.test('turn reader: text between the input reset and the next input prompt, markers split across chunks', async (t) => {
  const r = new TurnReader();
  t.equal(r.push(`logs ${INPUT_MARK.slice(0, 3)}`).ready, false);
  t.equal(r.push(INPUT_MARK.slice(3)).ready, true);
  r.beginTurn();
  const stream = `Once upon\r\n${RESET_MARK}, there was\r\na cat\n${INPUT_MARK}`;
  let text = '';
  let ready = false;
  for (const ch of stream) { const s = r.push(ch); text += s.text; ready ||= s.ready; }
  t.equal(text, ', there was\na cat', 'echo skipped, CRLF normalised, the CLI\'s own final newline dropped');
  t.ok(ready);
});

t.test('prompt encoding survives the line editor', async (t) => {
  t.equal(encodePrompt('a\nb\\c/'), 'a\\nb\\x5cc\\x2f');
  t.equal(encodePrompt('h\u00e9'), 'h\\xc3\\xa9');
});

t.test('stop filter across chunks', async (t) => {
  const f = new StopFilter(['###END###', 'STOP']);
  let out = '';
  for (const c of ['hello ST', 'OP world']) out += f.push(c);
  out += f.end();
  t.equal(out, 'hello ');
  t.ok(f.stopped);
});

t.test('llama-cli driver on stories260K', async (t) => {
  const p = llamaPrereqs('llama-completion');
  if (missingPrereq(t, p)) return;
  const d = llamaCliFactory({ name: 'llama-cli', model: p.model, options: { threads: '1' } });
  t.teardown(() => d.stop());
  const opts = { maxTokens: 48, temperature: 0, seed: 1 };
  const full = await collect(d.chat('Once upon a time', opts));
  t.ok(full.text.trim().length > 0, `generates text: ${JSON.stringify(full.text)}`);
  t.equal(d.pids().length, 1, 'one long-lived CLI');
  const [pid] = d.pids();

  await t.test('multi-line prompts with special characters are one turn', async (t) => {
    const r = await collect(d.chat('Tom said "hi/"\nand the dog\\cat ran/', opts));
    t.ok(r.text.length > 0);
    t.same(d.pids(), [pid], 'same process: the session continues');
  });

  await t.test('stop strings end the answer and are not included', async (t) => {
    const r = await collect(d.chat('Lily', { ...opts, stop: ['.'] }));
    t.notOk(r.text.includes('.'), `no stop string in ${JSON.stringify(r.text)}`);
    const next = await collect(d.chat('Tom', opts));
    t.ok(next.text.length > 0, 'the CLI takes the next prompt after the interjection');
  });

  await t.test('JSON schema output parses', async (t) => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } }, required: ['name', 'age'], additionalProperties: false };
    const r = await collect(d.chat('{', { maxTokens: 120, seed: 3, jsonSchema: schema }));
    const obj = JSON.parse(r.text) as { name: unknown; age: unknown };
    t.type(obj.name, 'string');
    t.ok(Number.isInteger(obj.age), 'age is an integer');
  });

  await t.test('engine killed mid-generation: ENGINE_DIED, then the next chat restarts it', async (t) => {
    const g = d.chat('Once upon a time', { maxTokens: 100000, seed: 1 });
    const first = await g.next();
    t.equal(first.done, false, 'generation started');
    const [victim] = d.pids();
    process.kill(victim!, 'SIGKILL');
    const err = await drainError(g);
    t.ok(err instanceof SwarmError, 'a SwarmError');
    t.equal((err as SwarmError).code, 'SWARM_ERR_ENGINE_DIED');
    const r = await collect(d.chat('Once upon a time', opts));
    t.equal(r.text, full.text, 'a fresh CLI answers as the first one did');
    t.not(d.pids()[0], victim, 'a new process');
  });

  await d.stop();
  t.same(d.pids(), [], 'stopped');
});

t.test('no orphan CLI after its worker is killed with SIGKILL', async (t) => {
  const p = llamaPrereqs('llama-completion');
  if (missingPrereq(t, p)) return;
  const r = await engineOutlivesOwner('llama-cli', p.model);
  t.ok(r.running, 'CLI running');
  t.notOk(r.orphaned, 'the CLI exits after its worker died');
});
