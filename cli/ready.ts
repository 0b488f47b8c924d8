import fs from 'node:fs';
import type { Readable } from 'node:stream';

/** How far a swarm's workers are: joined with their engine started, and the first engine failure. */
export interface Readiness { ready: number; error?: string }

/** Workers as the hub's registry holds them (engine state from their HEARTBEAT). */
interface ReadyWorker { id: string; engineReady: boolean; engineError?: string }

/**
 * A worker is ready once it has joined and its engine has started: a worker whose model does not load
 * joins all the same, and counting it would report a swarm ready that cannot run a task.
 */
export function readiness(workers: Iterable<ReadyWorker>): Readiness {
  let ready = 0;
  let error: string | undefined;
  let failed = 0;
  for (const w of workers) {
    if (w.engineError !== undefined) { failed++; error ??= `${w.id}: ${w.engineError}`; }
    else if (w.engineReady) ready++;
  }
  return error === undefined ? { ready } : { ready, error: failed > 1 ? `engine failed to start on ${failed} workers; ${error}` : `engine failed to start on ${error}` };
}

/**
 * The readiness pipe between `swarm up --detach` and the hub it starts: the hub writes the number of
 * ready workers whenever it changes (and `error <json>` once an engine fails) and closes the pipe once
 * all are in. `up` used to poll GET /status every 20 ms for this, which cost the hub and `up` CPU
 * while 25 workers were starting on the same two cores.
 */
export function reportReady(fd: number, state: () => Readiness, want: number): void {
  let last = -1;
  let told = false;
  // A check of the registry every 10 ms: the hub has no join event, and this costs nothing.
  const timer = setInterval(() => {
    const { ready: n, error } = state();
    try {
      if (error !== undefined && !told) { told = true; fs.writeSync(fd, `error ${JSON.stringify(error)}\n`); }
      if (n === last) return;
      last = n;
      fs.writeSync(fd, `${n}\n`);
    } catch { clearInterval(timer); return; } // `up` is gone: nobody to tell
    if (n >= want) { clearInterval(timer); try { fs.closeSync(fd); } catch { /* already closed */ } }
  }, 10);
  timer.unref();
}

/** The `up` side: the last count the hub reported, its engine error if any, and whether the hub closed the pipe. */
export function readyCounter(pipe: Readable): { count: () => number; error: () => string | undefined; closed: () => boolean } {
  let n = 0;
  let rest = '';
  let closed = false;
  let error: string | undefined;
  pipe.setEncoding('utf8');
  pipe.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    for (const l of lines) {
      if (/^\d+$/.test(l)) n = Number(l);
      else if (l.startsWith('error ')) try { error = String(JSON.parse(l.slice(6))); } catch { error = l.slice(6); }
    }
  });
  pipe.on('close', () => { closed = true; });
  pipe.on('error', () => { closed = true; });
  return { count: () => n, error: () => error, closed: () => closed };
}
