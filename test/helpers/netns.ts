import type { Test } from 'tap';
import { namespacesUnavailable } from '../../bench/netns.js';

// The test bed lives in bench/ (the cross-host bench uses it too); tests import it from here.
export { makeHosts, namespacesUnavailable, type Host, type HostBed, type HostProc } from '../../bench/netns.js';

/**
 * The tap way to gate a test on namespaces: skip with the reason, except under CI=true where CI
 * runs as root and a missing test bed is a failure.
 */
export function requireNamespaces(t: Pick<Test, 'plan' | 'fail'>): boolean {
  const why = namespacesUnavailable();
  if (!why) return true;
  if (process.env.CI === 'true') t.fail(`CI=true but the hosts test bed cannot be made: ${why}`);
  else t.plan(0, `hosts test bed unavailable: ${why}`); // tap reports a plan of 0 with a reason as a skip
  return false;
}
