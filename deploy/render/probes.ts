/**
 * Health probes of every layout, from one place. k3s probes are exec-free (tcpSocket, httpGet): an
 * exec probe starts a Node process (about 44 MB) inside a worker's memory limit every period. Podman
 * runs a kube probe as a shell command inside the container (`/bin/sh -c "… || exit 1"`; an httpGet
 * or tcpSocket one through curl or nc, which the image has not), so there the probe is
 * deploy/healthcheck.mjs run by the image's node, and the image needs a /bin/sh (node:20-bookworm-slim
 * has one; deploy/container/make-base-image.sh copies the host's).
 */

/**
 * How long a hub may take from start to answering /healthz before it is restarted: journal replay
 * and snapshot load. Measured: ready 4.3 s after kill -9 with 1M tasks of history at the default retention
 * (docs/performance.md); on a shared 2-core VM wall time ran 2-6x the CPU time, hence a 60 s budget.
 */
export const STARTUP_BUDGET_S = 60;
/** Startup probes poll this often; failureThreshold makes up the budget. */
export const STARTUP_PERIOD_S = 2;

type Obj = Record<string, unknown>;

/** A startupProbe with the budget: liveness starts only once it passed, so a slow replay is not killed. */
export function startupProbe(action: Obj): Obj {
  return { ...action, periodSeconds: STARTUP_PERIOD_S, failureThreshold: Math.ceil(STARTUP_BUDGET_S / STARTUP_PERIOD_S), timeoutSeconds: 2 };
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
    initialDelaySeconds: STARTUP_BUDGET_S, periodSeconds: 30, timeoutSeconds: 10, failureThreshold: 3,
  };
}
