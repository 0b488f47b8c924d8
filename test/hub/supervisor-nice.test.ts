import t from 'tap';
import os from 'node:os';
import pino from 'pino';
import { DEFAULT_WORKER_NICE, Supervisor, workerNice } from '../../hub/index.js';
import { until } from '../helpers/cli.js';

t.test('supervised worker processes run below the hub in CPU priority', async (t) => {
  const base = os.getPriority();
  const sup = new Supervisor({
    groups: [['w-1']], nice: 3,
    command: () => ({ file: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] }),
  }, pino({ level: 'silent' }));
  sup.start();
  t.teardown(() => sup.stop());
  await until(() => sup.pids().length === 1, 10_000);
  const pid = sup.pids()[0]!;
  t.equal(os.getPriority(pid), Math.min(19, base + 3), 'its niceness is the hub\'s plus 3');
  t.equal(os.getPriority(), base, 'the hub keeps its own');
});

t.test('SWARM_WORKER_NICE: a default, 0 turns it off, a bad value is a config error', async (t) => {
  t.equal(workerNice({}), DEFAULT_WORKER_NICE);
  t.equal(workerNice({ SWARM_WORKER_NICE: '0' }), 0);
  t.equal(workerNice({ SWARM_WORKER_NICE: '19' }), 19);
  for (const bad of ['-1', '20', '2.5', 'high']) t.throws(() => workerNice({ SWARM_WORKER_NICE: bad }), { code: 'SWARM_ERR_CONFIG' }, bad);
});
