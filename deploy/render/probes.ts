/**
 * Health probes of every layout, from one place. k3s probes are exec-free (tcpSocket, httpGet): an
 * exec probe starts a Node process (about 44 MB) inside a worker's memory limit every period. Podman
 * runs a kube probe as a shell command inside the container (`/bin/sh -c "… || exit 1"`; an httpGet
 * or tcpSocket one through curl or nc, which the image has not), so there the probe is
 * deploy/healthcheck.mjs run by the image's node, and the image needs a /bin/sh (node:20-bookworm-slim
 * has one; deploy/container/make-base-image.sh copies the host's).
 */

/** Startup probes poll this often; failureThreshold makes up the budget. */
export const STARTUP_PERIOD_S = 2;

/**
 * How long a worker may take from start to opening its peer port before it is restarted (its engine
 * starts first: a model load).
 */
export const STARTUP_BUDGET_S = 60;

/** The hub's CPU request: all it is sure to get on a node whose workers keep every core busy. */
export const HUB_CPU_REQUEST_M = 100;

/**
 * CPU seconds a hub takes from exec to answering: node's start, then the journal's replay. Measured
 * (docs/journal.md, "Restart"; `cpu_ms` of the hub's `journal replayed`) with 1M tasks of history at
 * the default retention: 0.9-1.2 s after a kill -9 under load, 1.3-1.4 s with a live segment at its
 * bound (half the snapshot).
 */
export const HUB_START_CPU_S = 1.4;

/**
 * How long a hub may take from start to answering /healthz before it is restarted: its start's CPU
 * at its CPU request (14 s), twice over, in whole probe periods.
 */
export const HUB_STARTUP_BUDGET_S = STARTUP_PERIOD_S * Math.ceil((2 * HUB_START_CPU_S * 1000) / HUB_CPU_REQUEST_M / STARTUP_PERIOD_S);

type Obj = Record<string, unknown>;

/** A startupProbe with a budget: liveness starts only once it passed, so a slow replay is not killed. */
export function startupProbe(action: Obj, budgetS = STARTUP_BUDGET_S): Obj {
  return { ...action, periodSeconds: STARTUP_PERIOD_S, failureThreshold: Math.ceil(budgetS / STARTUP_PERIOD_S), timeoutSeconds: 2 };
}

/** k3s hub: GET /healthz on the control API (HTTPS: kubelet does not verify the certificate of a probe). */
export function hubHttpGet(controlPort: number, tls: boolean): Obj {
  return { httpGet: { path: '/healthz', port: controlPort, scheme: tls ? 'HTTPS' : 'HTTP' } };
}

/** k3s worker: its peer port accepts (exec-free; the event loop that accepts is the one that heartbeats). */
export function tcpProbe(port: number | string): Obj {
  return { tcpSocket: { port } };
}

/** Podman: the image's health check script for a role, reading the given state directory. */
export function podmanExec(role: 'hub' | 'worker', stateDir: string): Obj {
  return {
    exec: { command: ['node', '/app/deploy/healthcheck.mjs', role, stateDir] },
    // Podman maps the liveness delay to the health check's start period.
    initialDelaySeconds: role === 'hub' ? HUB_STARTUP_BUDGET_S : STARTUP_BUDGET_S, periodSeconds: 30, timeoutSeconds: 10, failureThreshold: 3,
  };
}
