import fs from 'node:fs';
import type { Readable } from 'node:stream';

/**
 * The readiness pipe between `swarm up --detach` and the hub it starts: the hub writes the number of
 * connected workers whenever it changes and closes the pipe once all are in. `up` used to poll
 * GET /status every 20 ms for this, which cost the hub and `up` CPU while 25 workers were starting
 * on the same two cores.
 */
export function reportReady(fd: number, count: () => number, want: number): void {
  let last = -1;
  // A check of the registry's size every 10 ms: the hub has no join event, and this costs nothing.
  const timer = setInterval(() => {
    const n = count();
    if (n === last) return;
    last = n;
    try { fs.writeSync(fd, `${n}\n`); } catch { clearInterval(timer); return; } // `up` is gone: nobody to tell
    if (n >= want) { clearInterval(timer); try { fs.closeSync(fd); } catch { /* already closed */ } }
  }, 10);
  timer.unref();
}

/** The `up` side: the last count the hub reported, and whether the hub closed the pipe. */
export function readyCounter(pipe: Readable): { count: () => number; closed: () => boolean } {
  let n = 0;
  let rest = '';
  let closed = false;
  pipe.setEncoding('utf8');
  pipe.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    for (const l of lines) if (/^\d+$/.test(l)) n = Number(l);
  });
  pipe.on('close', () => { closed = true; });
  pipe.on('error', () => { closed = true; });
  return { count: () => n, closed: () => closed };
}
