/**
 * The suite's runner (`npm test`, `npm run test:unit`): runs the compiled test files under dist/test
 * with plain node, a few at a time, each in its own process group. tap's own runner loads its
 * TypeScript loader into every file (about 2 s of CPU each), which is most of what a small file costs.
 *
 * No process outlives the suite: every process a test file starts inherits SWARM_TEST_FILE; once the
 * file has exited, whatever still carries its mark is killed and named (a leak), and Ctrl-C or a
 * timeout kills the file's process group, then everything marked by this run.
 *
 *   node dist/test/helpers/suite.js [--unit] [--jobs N] [--timeout S] [test/hub test/cli/bin.test.ts …]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './paths.js';
import { HEAVY, UNIT } from './tiers.js';

type Result = { file: string; ok: boolean; total: number; pass: number; fail: number; skip: number; todo: number; seconds: number; leaked: string[]; why?: string };

const args = process.argv.slice(2);
function option(name: string, fallback: number): number {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(args.splice(i, 2)[1]);
  if (!Number.isFinite(v) || v <= 0) { console.error(`${name} needs a positive number`); process.exit(2); }
  return v;
}
const unitOnly = args.includes('--unit') && args.splice(args.indexOf('--unit'), 1).length > 0;
const jobs = option('--jobs', Number(process.env.SWARM_TEST_JOBS) || 3);
const timeoutS = option('--timeout', Number(process.env.SWARM_TEST_TIMEOUT) || 900);
const filters = args.map((a) => a.replace(/\/+$/, ''));

const RUN_ID = `${process.pid}-${Date.now()}`;
const DIST_TEST = path.join(ROOT, 'dist', 'test');
const DURATIONS = path.join(DIST_TEST, '.durations.json');
const LOGS = path.join(ROOT, '.tap', 'suite');
/** Seconds per file from one whole run (loaded machine: only the order matters), for a fresh clone. */
const SEED_DURATIONS = path.join(ROOT, 'test', 'helpers', 'durations.json');

function readDurations(file: string): Record<string, number> {
  try { return JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, number>; } catch { return {}; }
}

/** Source test files (test/…/x.test.ts) whose compiled copy exists; a stale compiled file of a moved test is not run. */
function testFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) { if (e.name !== 'helpers' && e.name !== 'fixtures') walk(p); } else if (e.name.endsWith('.test.ts')) out.push(path.relative(ROOT, p));
    }
  };
  walk(path.join(ROOT, 'test'));
  return out.filter((f) => fs.existsSync(compiled(f))).sort();
}
const compiled = (rel: string): string => path.join(ROOT, 'dist', rel.replace(/\.ts$/, '.js'));

function selected(all: string[]): string[] {
  let files = unitOnly ? all.filter((f) => UNIT.has(f)) : all;
  if (filters.length > 0) files = files.filter((f) => filters.some((x) => f === x || f.startsWith(`${x}/`) || f === `${x}.test.ts`));
  const missing = [...UNIT].filter((f) => !all.includes(f));
  if (unitOnly && missing.length > 0) console.log(`# unit list names files not found: ${missing.join(', ')}`);
  // Longest first (as last measured here, else as in the checked-in list), so a slow file does not
  // start last; unmeasured ones count as slow.
  const last: Record<string, number> = { ...readDurations(SEED_DURATIONS), ...readDurations(DURATIONS) };
  return files.sort((a, b) => (last[b] ?? 1e9) - (last[a] ?? 1e9) || a.localeCompare(b));
}

/**
 * Pids of live processes started by this run (SWARM_TEST_RUN) whose environment also carries every
 * `key=value` given: another run's processes (a second checkout, a second session) are never matched.
 */
function marked(mark: Record<string, string>): { pid: number; cmd: string }[] {
  const needles = Object.entries({ SWARM_TEST_RUN: RUN_ID, ...mark }).map(([k, v]) => Buffer.from(`\0${k}=${v}\0`));
  const out: { pid: number; cmd: string }[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const env = Buffer.concat([Buffer.from([0]), fs.readFileSync(`/proc/${d}/environ`), Buffer.from([0])]);
      if (!needles.every((n) => env.includes(n))) continue;
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      if (stat[stat.lastIndexOf(')') + 2] === 'Z') continue;
      out.push({ pid: Number(d), cmd: fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 200) });
    } catch { /* gone, or not ours */ }
  }
  return out;
}

/** Kill every process of this run carrying the mark; their names, for the report. */
function reap(mark: Record<string, string> = {}): string[] {
  const found = marked(mark);
  for (const p of found) { try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ } }
  return found.map((p) => `${p.pid} ${p.cmd}`);
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try { process.kill(-child.pid, signal); } catch { /* gone */ }
}

/** The root test's counts line tap prints last: `# { total: 35, pass: 34, fail: 1, skip: 2 }`. */
function counts(log: string): { total: number; pass: number; fail: number; skip: number; todo: number } | undefined {
  const line = log.split('\n').reverse().find((l) => /^# \{ total: \d+/.test(l));
  if (!line) return undefined;
  const n = (k: string) => Number(new RegExp(`\\b${k}: (\\d+)`).exec(line)?.[1] ?? 0);
  return { total: n('total'), pass: n('pass'), fail: n('fail'), skip: n('skip'), todo: n('todo') };
}

/**
 * CPU seconds used by the test processes and what they waited for (cutime + cstime of this process):
 * unlike wall time, about the same on a loaded machine as on a quiet one.
 */
function childCpuSeconds(): number {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[13]) + Number(f[14])) / 100; // fields 16 and 17 of proc(5), in USER_HZ (100 on Linux)
  } catch { return NaN; }
}

const running = new Map<string, ChildProcess>();
let interrupted = false;

function runFile(file: string): Promise<Result> {
  const started = Date.now();
  const logPath = path.join(LOGS, `${file.replace(/\//g, '__')}.log`);
  const log = fs.createWriteStream(logPath);
  let text = '';
  const child = spawn(process.execPath, ['--enable-source-maps', compiled(file)], {
    cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TAP_TIMEOUT: String(timeoutS), SWARM_TEST_RUN: RUN_ID, SWARM_TEST_FILE: file },
  });
  running.set(file, child);
  const take = (c: Buffer) => { text += c.toString(); log.write(c); };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  let why: string | undefined;
  // tap's own timeout fails the test first (TAP_TIMEOUT); this is for a file that cannot even do that.
  const timer = setTimeout(() => { why = `killed after ${timeoutS + 30} s`; killGroup(child, 'SIGKILL'); }, (timeoutS + 30) * 1000);
  // Whatever the file started and left behind: its group first, then anything else carrying its mark.
  let leaked: string[] | undefined;
  const cleanUp = (): string[] => (leaked ??= (killGroup(child, 'SIGKILL'), reap({ SWARM_TEST_FILE: file })));
  // A leftover that inherited the file's stdout would hold 'close' back: clean up shortly after the
  // exit, and stop reading if the pipes are still held after that.
  child.once('exit', () => {
    setTimeout(() => { cleanUp(); setTimeout(() => { child.stdout!.destroy(); child.stderr!.destroy(); }, 1000).unref(); }, 500).unref();
  });
  return new Promise((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(file);
      log.end();
      const left = cleanUp();
      const c = counts(text);
      const seconds = (Date.now() - started) / 1000;
      if (!why && (code !== 0 || signal)) why = signal ? `ended by ${signal}` : `exit code ${code}`;
      if (!why && !c) why = 'no counts line (did it end early?)';
      const fail = (c?.fail ?? 0) + (why && !(c?.fail) ? 1 : 0);
      resolve({ file, ok: fail === 0, total: (c?.total ?? 0) + (fail > (c?.fail ?? 0) ? 1 : 0), pass: c?.pass ?? 0, fail, skip: c?.skip ?? 0, todo: c?.todo ?? 0, seconds, leaked: left, why: fail > 0 ? why : undefined });
    });
  });
}

async function main(): Promise<number> {
  const t0 = Date.now();
  const files = selected(testFiles());
  if (files.length === 0) { console.log('# no compiled test files matched (npm run pretest builds them)'); return 1; }
  fs.mkdirSync(LOGS, { recursive: true });
  console.log(`TAP version 14\n# ${files.length} files, ${jobs} at a time (one of them heavy at most), ${timeoutS} s each at most; logs in ${path.relative(ROOT, LOGS)}/`);
  const results: Result[] = [];
  const queue = [...files];
  let n = 0;
  let heavyRunning = 0;
  const wake = new Set<() => void>();
  /** The next file this slot may start: the first in line, passing over heavy ones while one runs. */
  const next = async (): Promise<string | undefined> => {
    for (;;) {
      if (queue.length === 0 || interrupted) return undefined;
      const i = queue.findIndex((f) => !HEAVY.has(f) || heavyRunning === 0);
      if (i >= 0) { const f = queue.splice(i, 1)[0]!; if (HEAVY.has(f)) heavyRunning++; return f; }
      await new Promise<void>((r) => wake.add(r)); // only heavy files left: wait for the running one
    }
  };
  const worker = async (): Promise<void> => {
    for (let file = await next(); file !== undefined; file = await next()) {
      const r = await runFile(file);
      if (HEAVY.has(file)) { heavyRunning--; for (const w of [...wake]) { wake.delete(w); w(); } }
      results.push(r);
      n += 1;
      const extra = [`${r.seconds.toFixed(1)} s`, `${r.pass}/${r.total}`, r.skip ? `${r.skip} skipped` : '', r.why ?? ''].filter(Boolean).join(', ');
      console.log(`${r.ok ? 'ok' : 'not ok'} ${n} - ${file} # ${extra}`);
      if (!r.ok) {
        const log = fs.readFileSync(path.join(LOGS, `${file.replace(/\//g, '__')}.log`), 'utf8');
        console.log(log.split('\n').map((l) => `    ${l}`).join('\n'));
      }
      for (const l of r.leaked) console.log(`# left running by ${file}, killed: ${l}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, files.length) }, worker));
  const leftover = reap();
  for (const l of leftover) console.log(`# left running at the end, killed: ${l}`);

  const last = readDurations(DURATIONS);
  for (const r of results) last[r.file] = Math.round(r.seconds * 10) / 10;
  fs.writeFileSync(DURATIONS, JSON.stringify(last, null, 1));

  const sum = (k: 'total' | 'pass' | 'fail' | 'skip' | 'todo') => results.reduce((a, r) => a + r[k], 0);
  const failed = results.filter((r) => !r.ok);
  const notRun = files.length - results.length;
  const wall = (Date.now() - t0) / 1000;
  console.log(`1..${results.length}`);
  console.log('# slowest: ' + [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 8).map((r) => `${r.file} ${r.seconds.toFixed(0)} s`).join(', '));
  if (failed.length > 0) console.log(`# failed files: ${failed.map((r) => r.file).join(', ')}`);
  if (notRun > 0) console.log(`# not run (interrupted): ${notRun} files`);
  const leaks = results.reduce((a, r) => a + r.leaked.length, 0) + leftover.length;
  console.log(`# processes left running and killed: ${leaks}`);
  console.log(`# { total: ${sum('total')}, pass: ${sum('pass')}, fail: ${sum('fail') + notRun}, skip: ${sum('skip')}, todo: ${sum('todo')} }`);
  console.log(`# CPU time of the test processes: ${Math.round(childCpuSeconds())} s`);
  console.log(`# suite wall time: ${Math.floor(wall / 60)} min ${Math.round(wall % 60)} s (${results.length} files, ${jobs} at a time)`);
  return failed.length > 0 || notRun > 0 ? 1 : 0;
}

function onSignal(signal: NodeJS.Signals): void {
  if (interrupted) return;
  interrupted = true;
  console.log(`# ${signal}: stopping ${running.size} running files and everything they started`);
  for (const c of running.values()) killGroup(c, 'SIGTERM');
  setTimeout(() => {
    for (const c of running.values()) killGroup(c, 'SIGKILL');
    for (const l of reap()) console.log(`# killed: ${l}`);
    process.exit(130);
  }, 3000).unref();
}
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
process.on('SIGHUP', onSignal);

process.exitCode = await main();
