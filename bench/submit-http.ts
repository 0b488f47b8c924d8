/**
 * Submit tasks and wait for them through the control API from inside the bench, as the bare
 * `llama-server` rows are driven from inside it: a `swarm submit` command would add its own process
 * start (0.3-0.7 s on a loaded 2-core machine) to every swarm row and to none of the bare ones.
 */
import { callLines } from '../cli/http.js';
import { readHubFile } from '../cli/state.js';

export interface TaskView { id: string; state: string; receipt?: { tokens_out?: number; ttft_ms?: number; started_at?: number; finished_at?: number; worker?: string } }

/** POST /tasks with `wait`: resolves with every task's final view, in the order given. */
export async function submitAndWait(stateDir: string, tasks: Record<string, unknown>[], timeoutMs = 600_000): Promise<{ tasks: TaskView[] }> {
  const hub = readHubFile(stateDir);
  if (!hub) throw new Error(`no hub in ${stateDir}`);
  const views = new Map<string, TaskView>();
  const whole = await callLines<{ tasks: TaskView[] }>({ control: hub.control, token: hub.token }, 'POST', '/tasks', { tasks, wait: { timeout_ms: timeoutMs } }, (v) => {
    const x = v as TaskView;
    if (x && typeof x.id === 'string') views.set(x.id, x);
  }, timeoutMs + 10_000);
  if (whole && 'tasks' in whole) return whole;
  return { tasks: tasks.map((t) => views.get(String(t.id)) ?? { id: String(t.id), state: 'missing' }) };
}
