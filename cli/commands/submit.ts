import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { randomId } from '../../protocol/ids.js';
import { Exit, fail } from '../exit.js';
import { swarmOptions, remoteTarget, type RemoteOptions, type ControlTarget, call, callLines } from '../http.js';
import { int } from '../options.js';
import { Progress } from '../progress.js';
import { stateDir } from '../state.js';
import { runningHub } from '../running.js';
import { withRetry } from '../retry.js';
import { fileSize, taskSlices, type Slice, type TaskInput } from '../task-file.js';

interface Accepted { accepted: { id: string; duplicate: boolean; state: string; conflict?: string[] }[] }
/** Tasks sent under the id of a task already submitted with other fields: not run (the id is an idempotency key). */
type Conflict = { id: string; fields: string[] };
interface Waited {
  complete: boolean;
  /** Each task's line as the hub sent it (a streamed answer), for output without encoding it again. */
  raw?: string[];
  tasks: { id: string; state: string; text?: string; error?: { code: string; msg: string }; receipt?: unknown }[];
}

export function registerSubmit(program: Command): void {
  swarmOptions(program.command('submit')
    .description('submit a task (TEXT) or many (--file tasks.jsonl: one JSON task per line, or plain text lines)')
    .argument('[text]', 'the prompt')
    .option('-f, --file <file>', 'JSONL file of tasks ({"prompt":…, "id":…, "role":…, …}); "-" reads stdin; read as it is sent, in uploads of 5,000 tasks or 16 MiB. A line without an id gets a new id each run: give ids to make a re-run of a file that failed part way submit nothing twice')
    .option('--id <id>', 'idempotency key for a single task')
    .option('--role <role>', 'only workers with this role run it')
    .option('--priority <n>', 'higher runs first', Number)
    .option('--max-tokens <n>', 'generation bound', int('--max-tokens', 1))
    .option('--wait', 'wait until every task is done or failed, and print the results', false)
    .option('--timeout <ms>', 'give up waiting after this long', int('--timeout', 1), 600_000)
    .option('--retry-for <ms>', 'retry a failed upload or wait (hub unreachable or restarting) for this long; every task has an id first, so a retry never submits one twice', int('--retry-for', 0), 120_000)
    .option('--json', 'print JSON', false))
    .action(async (text: string | undefined, o: RemoteOptions & { file?: string; id?: string; role?: string; priority?: number; maxTokens?: number; wait: boolean; timeout: number; retryFor: number; stateDir?: string; json: boolean }) => {
      try {
        // A local hub is looked up again before each retry: a restarted one may listen elsewhere.
        const remote = remoteTarget(o);
        const hub = () => remote ?? runningHub(stateDir(o.stateDir));
        hub();
        // Ids before the first send: the hub keeps the first task of each id, so a batch sent again
        // after a lost acknowledgement (the hub died mid-upload) submits nothing twice. A task without
        // an id gets `<random>-<n>` (n: its place among the file's tasks), new for each run.
        const batchId = randomId();
        const prepare = (t: TaskInput, i: number): void => {
          if (o.role && t.role === undefined) t.role = o.role;
          if (o.priority !== undefined && t.priority === undefined) t.priority = o.priority;
          if (o.maxTokens && t.max_tokens === undefined) t.max_tokens = o.maxTokens;
          if (t.id === undefined) t.id = `${batchId}-${i}`;
        };
        const source: AsyncIterator<Slice> = o.file !== undefined ? taskSlices(o.file, prepare)
          : (async function* () { if (text !== undefined) { const t: TaskInput = { prompt: text, id: o.id }; prepare(t, 0); yield { tasks: [t], firstLine: 1, lastLine: 1, bytesRead: 0 }; } })();
        const ahead = await lookAhead(source);
        if (!ahead) throw new SwarmError('SWARM_ERR_CONFIG', 'give a prompt or --file with at least one task');
        const retried = (what: string) => (err: unknown, n: number) => {
          process.stderr.write(`swarm submit: ${what} failed (${(err as Error).message}); retrying (${n})\n`);
        };
        let waited: Waited;
        let count: number;
        const conflicts: Conflict[] = [];
        if (o.wait && ahead.single) {
          // One request submits and streams the results; once the hub has said "accepted", a retry
          // (a hub restarted under us) asks for the results alone.
          const tasks = ahead.first.tasks;
          const ids = tasks.map((t) => t.id!);
          const quiet = true; // one slice: no progress line
          let accepted = false;
          waited = await withRetry(async () => {
            const r = accepted ? await waitFor(hub(), ids, o.timeout, new Progress(quiet))
              : await waitFor(hub(), ids, o.timeout, new Progress(quiet), { tasks, onAccepted: (c) => { accepted = true; conflicts.push(...c); } });
            if (r) return r;
            accepted = true; // a hub that predates the combined request answered the upload alone
            return (await waitFor(hub(), ids, o.timeout, new Progress(quiet)))!;
          }, o.retryFor, (err, n) => retried(accepted ? 'wait' : 'upload')(err, n));
          count = tasks.length;
        } else {
          // Kept for --json (one object) and --wait (the ids); otherwise each slice's ids are printed as it is accepted.
          const accepted = await uploadAll(hub, ahead.all, { file: o.file, keep: o.json || o.wait, quiet: o.json || ahead.single, retryFor: o.retryFor, onRetry: retried('upload'), conflicts });
          if (!o.wait) {
            if (o.json) process.stdout.write(JSON.stringify({ accepted }) + '\n');
            warnConflicts(conflicts);
            return;
          }
          count = accepted.length;
          waited = (await withRetry(() => waitFor(hub(), accepted.map((a) => a.id), o.timeout, new Progress(o.json)), o.retryFor, retried('wait')))!;
        }
        warnConflicts(conflicts);
        printWaited(waited, count, o.json, conflicts);
      } catch (err) { fail(err, o.json); }
    });
}

/**
 * One slice ahead: a file of one slice is submitted and waited for in one request. The first slice,
 * whether it is the only one, and all of them in order; a bad line in the second slice is raised after
 * the first is yielded, as any later one is. Undefined: no task at all.
 */
async function lookAhead(source: AsyncIterator<Slice>): Promise<{ first: Slice; single: boolean; all: AsyncIterable<Slice> } | undefined> {
  const first = await source.next();
  if (first.done) return undefined;
  let second: IteratorResult<Slice> | undefined;
  let readError: unknown;
  try { second = await source.next(); } catch (err) { readError = err; }
  const all = async function* (): AsyncGenerator<Slice> {
    yield first.value;
    if (readError) throw readError;
    if (second && !second.done) {
      yield second.value;
      for (let r = await source.next(); !r.done; r = await source.next()) yield r.value;
    }
  };
  return { first: first.value, single: second?.done === true, all: all() };
}

/**
 * Send each slice as it is read (each upload retried for `retryFor`), printing each slice's ids as it is
 * accepted, or keeping them (`keep`) for the caller. An error after some uploads were accepted says
 * which lines went in (see `partly`).
 */
async function uploadAll(hub: () => ControlTarget, slices: AsyncIterable<Slice>, o: { file?: string; keep: boolean; quiet: boolean; retryFor: number; onRetry(err: unknown, n: number): void; conflicts: Conflict[] }): Promise<Accepted['accepted']> {
  const progress = new Progress(o.quiet);
  const size = o.file !== undefined ? fileSize(o.file) : undefined;
  const mb = (n: number) => (n / 1048576).toFixed(0);
  const accepted: Accepted['accepted'] = [];
  const done = { slices: 0, tasks: 0, lastLine: 0 };
  try {
    for await (const slice of slices) {
      let sent = 0;
      const r = await withRetry(() => { sent++; return call<Accepted>(hub(), 'POST', '/tasks', { tasks: slice.tasks }); }, o.retryFor, o.onRetry);
      // After a retry, "duplicate" may be this command's own earlier attempt: not the user's resubmission.
      const acks = sent > 1 ? r.accepted.map((a) => ({ ...a, duplicate: false })) : r.accepted;
      for (const a of acks) if (a.conflict) o.conflicts.push({ id: a.id, fields: a.conflict });
      if (o.keep) accepted.push(...acks);
      else process.stdout.write(acks.map((a) => `${a.id}${a.conflict ? ` (duplicate: already submitted with another ${a.conflict.join(', ')}; not run)` : a.duplicate ? ' (duplicate: already submitted)' : ''}\n`).join(''));
      done.slices++; done.tasks += acks.length; done.lastLine = slice.lastLine;
      progress.update(`submitted ${done.tasks} task(s) in ${done.slices} upload(s)${size ? `, ${mb(slice.bytesRead)}/${mb(size)} MB of the file` : ''}`);
    }
  } catch (err) {
    throw partly(err, done, o.file);
  } finally {
    progress.done();
  }
  return accepted;
}

/** The results: the hub's lines as one JSON object (--json), else a line a task (a single task's text alone). */
function printWaited(waited: Waited, count: number, json: boolean, conflicts: Conflict[]): void {
  const failed = waited.tasks.filter((t) => t.state === 'failed').length;
  // The lines as the hub sent them, not parsed and encoded again: the same JSON, 10-20 ms sooner.
  if (json) process.stdout.write(`{"complete":${waited.complete},"failed":${failed},${conflicts.length ? `"conflicts":${JSON.stringify(conflicts)},` : ''}"tasks":[${(waited.raw ?? waited.tasks.map((t) => JSON.stringify(t))).join(',')}]}\n`);
  else for (const t of waited.tasks) {
    if (t.state === 'done') process.stdout.write(count === 1 ? `${t.text}\n` : `${t.id}\t${JSON.stringify(t.text)}\n`);
    else process.stdout.write(`${t.id}\t${t.state}${t.error ? `\t${t.error.code}: ${t.error.msg}` : ''}\n`);
  }
  if (!waited.complete) process.exit(Exit.TIMEOUT);
  if (failed) process.exit(Exit.TASKS_FAILED);
}

type TaskView = Waited['tasks'][number];

/**
 * Tasks sent under an id already submitted with other fields were not run, and what is shown for
 * them is the earlier task's: said on stderr (the results alone read as this prompt's answers).
 */
function warnConflicts(conflicts: Conflict[]): void {
  if (!conflicts.length) return;
  const shown = conflicts.slice(0, 5).map((c) => `${c.id} (${c.fields.join(', ')})`).join(', ');
  process.stderr.write(`swarm submit: warning: ${conflicts.length} task(s) reuse the id of a task already submitted with other fields: ${shown}${conflicts.length > 5 ? ', …' : ''}. An id is an idempotency key: they were not run, and the results shown for them are the earlier tasks'. Give each task an id of its own\n`);
}

/**
 * The results of `ids`, streamed as tasks finish (progress shows them) and put together here in the
 * order of `ids`, as the one-piece answer of a hub that predates streaming is. With `upload`, the
 * tasks go in the same request (POST /tasks with `wait`); undefined then means the hub answered the
 * upload alone (it predates that form) and the results are still to be asked for.
 */
async function waitFor(hub: ControlTarget, ids: string[], timeoutMs: number, progress: Progress, upload?: { tasks: TaskInput[]; onAccepted(conflicts: Conflict[]): void }): Promise<Waited | undefined> {
  const views = new Map<string, { view: TaskView; raw: string }>();
  let end: { complete?: unknown } | undefined;
  let final = 0;
  let shownAt = 0;
  const body = upload ? { tasks: upload.tasks, wait: { timeout_ms: timeoutMs } } : { ids, timeout_ms: timeoutMs, stream: true };
  const whole = await callLines<Waited | Accepted>(hub, 'POST', upload ? '/tasks' : '/wait', body, (v, raw) => {
    if (!v || typeof v !== 'object') return;
    const x = v as TaskView & { complete?: unknown; accepted?: unknown; conflicts?: unknown };
    if (typeof x.id !== 'string') {
      if ('complete' in x) end = x;
      else if (typeof x.accepted === 'number') upload?.onAccepted(Array.isArray(x.conflicts) ? x.conflicts as Conflict[] : []);
      return;
    }
    if ((x.state === 'done' || x.state === 'failed') && !views.has(x.id)) final++;
    views.set(x.id, { view: x, raw: raw ?? JSON.stringify(x) });
    const now = Date.now();
    if (now - shownAt >= 250) { shownAt = now; progress.update(`finished ${final}/${ids.length}`); }
  }, timeoutMs + 10_000);
  progress.done();
  if (whole) {
    if ('tasks' in whole) return whole;
    if (upload) return undefined;
    throw new SwarmError('SWARM_ERR_INTERNAL', 'the hub answered /wait without tasks');
  }
  const got = ids.map((id) => views.get(id));
  if (!end || got.some((t) => t === undefined)) throw new SwarmError('SWARM_ERR_NO_SWARM', 'the hub ended its answer before every task was in it');
  const all = got as { view: TaskView; raw: string }[];
  return { complete: end.complete === true, tasks: all.map((t) => t.view), raw: all.map((t) => t.raw) };
}

/**
 * An error after some uploads were accepted says which: the tasks of lines 1..N are in the hub (their
 * ids were printed), nothing after was sent. A re-run of the whole file submits no task with its own
 * id twice (the hub reports it duplicate), but lines without an id get new ids each run.
 */
function partly(err: unknown, done: { slices: number; tasks: number; lastLine: number }, file?: string): unknown {
  if (!done.slices || !(err instanceof Error)) return err;
  const rest = `lines 1-${done.lastLine} of ${file ?? 'the input'} (${done.tasks} task(s) in ${done.slices} upload(s)) were accepted, nothing after them was sent; `
    + `to go on, submit from line ${done.lastLine + 1} (\`tail -n +${done.lastLine + 1}\`): a re-run of the whole file submits no task with its own id twice, but lines without an id would be submitted again`;
  const code = err instanceof SwarmError ? err.code : 'SWARM_ERR_INTERNAL';
  return new SwarmError(code, `${err.message}\n${rest}`, { cause: err });
}
