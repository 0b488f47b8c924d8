// Strict validation of rendered Kubernetes objects: the kubernetes-models schemas (offline), and no
// field they do not know. The compiled validators ignore unknown fields, as the API server's lenient
// decoding would (a `periodSecond` typo is dropped, silently). Every known property is read by the
// validator, so a field it never read is unknown: the objects are walked through a Proxy that notes reads.
import { validate as configMap } from 'kubernetes-models/_schemas/IoK8sApiCoreV1ConfigMap';
import { validate as daemonSet } from 'kubernetes-models/_schemas/IoK8sApiAppsV1DaemonSet';
import { validate as deployment } from 'kubernetes-models/_schemas/IoK8sApiAppsV1Deployment';
import { validate as namespace } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Namespace';
import { validate as networkPolicy } from 'kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicy';
import { validate as pdb } from 'kubernetes-models/_schemas/IoK8sApiPolicyV1PodDisruptionBudget';
import { validate as pod } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Pod';
import { validate as pvc } from 'kubernetes-models/_schemas/IoK8sApiCoreV1PersistentVolumeClaim';
import { validate as secret } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Secret';
import { validate as service } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Service';

type Validator = ((data: unknown) => boolean) & { errors?: { instancePath: string; message?: string; keyword: string; params?: unknown }[] | null };

const BY_KIND: Record<string, Validator> = {
  ConfigMap: configMap, DaemonSet: daemonSet, Deployment: deployment, Namespace: namespace, NetworkPolicy: networkPolicy,
  PodDisruptionBudget: pdb, Pod: pod, PersistentVolumeClaim: pvc, Secret: secret, Service: service,
} as Record<string, Validator>;

/** Every problem of one object: schema errors and unknown fields (as JSON pointers); empty when valid. */
export function k8sProblems(doc: Record<string, unknown>): string[] {
  const validate = BY_KIND[String(doc.kind)];
  if (!validate) return [`unknown kind ${String(doc.kind)}`];
  const read = new Map<object, { path: string; keys: Set<string> }>();
  const wrap = (v: unknown, path: string): unknown => {
    if (v === null || typeof v !== 'object') return v;
    const keys = new Set<string>();
    read.set(v, { path, keys });
    return new Proxy(v, {
      get(t, k, r) {
        const x = Reflect.get(t, k, r);
        if (typeof k !== 'string') return x;
        keys.add(k);
        return Object.prototype.hasOwnProperty.call(t, k) ? wrap(x, `${path}/${k}`) : x;
      },
      has(t, k) { if (typeof k === 'string') keys.add(k); return Reflect.has(t, k); },
      // A map (labels, annotations) is walked key by key: all its keys are allowed.
      ownKeys(t) { for (const k of Reflect.ownKeys(t)) if (typeof k === 'string') keys.add(k); return Reflect.ownKeys(t); },
    });
  };
  const ok = validate(wrap(doc, ''));
  const out = ok ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'}: ${e.message ?? e.keyword} ${JSON.stringify(e.params ?? {})}`);
  for (const [obj, { path, keys }] of read) {
    if (Array.isArray(obj)) continue;
    for (const k of Object.keys(obj)) if (!keys.has(k)) out.push(`${path}/${k}: unknown field`);
  }
  return out;
}
