/**
 * The unit tier (`npm run test:unit`): pure and in-process files. A file belongs here when it starts
 * no process (no swarm CLI, no engine, no exec driver, no browser) and ends in seconds; the full suite
 * (`npm test`) runs these and everything else.
 */
export const UNIT: ReadonlySet<string> = new Set([
  'test/protocol/codec.test.ts',
  'test/protocol/connection-flush.test.ts',
  'test/protocol/protocol-entries.test.ts',
  'test/protocol/protocol-schemas.test.ts',
  'test/sched/sched.test.ts',
  'test/sched/affinity.test.ts',
  'test/sched/sched-gossip.test.ts',
  'test/hub/core.test.ts',
  'test/hub/dashboard-auth.test.ts',
  'test/hub/duplicate-worker.test.ts',
  'test/hub/hub-frames.test.ts',
  'test/hub/prefetch.test.ts',
  'test/hub/replicate-events.test.ts',
  'test/hub/runs-api.test.ts',
  'test/hub/store.test.ts',
  'test/hub/store-durable.test.ts',
  'test/hub/task-bounds.test.ts',
  'test/hub/task-check.test.ts',
  'test/hub/wait-stream.test.ts',
  'test/worker/lazy-abort.test.ts',
  'test/worker/worker-config.test.ts',
  'test/worker/gossip-replica.test.ts',
  'test/worker/gossip-membership.test.ts',
  'test/worker/gossip-relaxed.test.ts',
  'test/worker/gossip-runs.test.ts',
  'test/failover/failover-stream.test.ts',
  'test/drivers/ollama.test.ts',
  'test/drivers/engine-build.test.ts',
  'test/drivers/addon-paths.test.ts',
  'test/drivers/one-spawn.test.ts',
  'test/topologies/experiment-stats.test.ts',
  'test/topologies/experiment.test.ts',
  'test/topologies/run-report.test.ts',
  'test/topologies/report-drilldown.test.ts',
  'test/topologies/topologies.test.ts',
  'test/cli/cli-kappa.test.ts',
  'test/cli/progress.test.ts',
  'test/drivers/thread-tuner.test.ts',
  'test/hub/control-keepalive.test.ts',
  'test/hub/handback-holds.test.ts',
  'test/hub/handback-identity.test.ts',
  'test/hub/journal-replay.test.ts',
  'test/topologies/experiment-run.test.ts',
  'test/topologies/topologies-hub.test.ts',
  'test/worker/failover-identity.test.ts',
]);

/**
 * Files that load every core on their own (llama.cpp engines, a browser, image builds): the runner
 * runs at most one of them at a time, beside lighter files, so their time bounds hold on two cores.
 * Echo-driven swarms of 25 agents are not heavy in this sense: they wait more than they compute.
 */
export const HEAVY: ReadonlySet<string> = new Set([
  'test/cli/cli-batched.test.ts',
  'test/cli/cli-embedded.test.ts',
  'test/cli/cli-embedded-25.test.ts',
  'test/cli/engine-failures.test.ts',
  'test/cli/run-engine.test.ts',
  'test/cli/run-pools.test.ts',
  'test/cli/shared-engine.test.ts',
  'test/deploy/podman.test.ts',
  'test/deploy/podman-engine.test.ts',
  'test/deploy/podman-hosts.test.ts',
  'test/drivers/batched.test.ts',
  'test/drivers/embedded.test.ts',
  'test/drivers/llama-cli.test.ts',
  'test/drivers/llama-server.test.ts',
  'test/drivers/sharing.test.ts',
  'test/hub/dashboard-browser.test.ts',
  'test/topologies/examples-fresh.test.ts',
  'test/topologies/topologies-e2e.test.ts',
  'test/worker/engine-kill.test.ts',
]);
