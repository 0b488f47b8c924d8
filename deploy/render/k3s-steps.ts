/** The steps before `kubectl apply` of a k3s render: the Secrets it refers to, from `swarm certs`. */
export function K3S_STEPS(ns: string, controlPort: number): string {
  const hub = `swarm-hub,swarm-hub.${ns},swarm-hub.${ns}.svc,swarm-hub.${ns}.svc.cluster.local,127.0.0.1`;
  return [
    'Secrets you create first (docs/deploy.md):',
    `  swarm certs --dir certs --host hub=${hub} --host worker=swarm-worker`,
    `  kubectl create namespace ${ns}`,
    `  kubectl -n ${ns} create secret generic swarm-token --from-file=token=certs/token`,
    `  kubectl -n ${ns} create secret generic swarm-tls --from-file=certs/ca.crt --from-file=certs/hub.crt --from-file=certs/hub.key --from-file=certs/worker.crt --from-file=certs/worker.key`,
    `Control API: kubectl -n ${ns} port-forward svc/swarm-hub ${controlPort}, then`,
    `  SWARM_TOKEN_FILE=certs/token swarm status --hub-url https://127.0.0.1:${controlPort} --tls-ca certs/ca.crt`,
  ].join('\n');
}
