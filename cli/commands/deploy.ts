import fs from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { plan, readModelShape, type Plan } from '../../deploy/plan/index.js';
import { parseHosts, renderDeployment, type DeployHost } from '../../deploy/render/index.js';
import { SwarmError } from '../../protocol/errors.js';
import { fail } from '../exit.js';
import { parseRetain, type RetainOptions } from '../../hub/retention.js';
import { parseArchiveMax, type ArchiveBound } from '../../hub/archive-bound.js';
import { int, keyValue, oneOf } from '../options.js';

interface RenderFlags {
  target: 'podman' | 'k3s'; agents: number; model: string; out?: string; image?: string; driver: string;
  driverOpt: Record<string, string>; workers: 'deployment' | 'daemonset'; hostNetwork: boolean;
  hubPort: number; controlPort: number; ctx: number; ubatch: number; cpus: number; engine: 'batched' | 'per-worker'; perPod?: number; repack: boolean;
  failover: boolean; peerPort: number; name: string; stateSize?: string; storageClass?: string; hosts?: DeployHost[]; certsDir: string;
  stateDir?: string; workerStateDir?: string; json: boolean; modelImage?: string; modelSize: string; retain?: RetainOptions;
  archiveMax?: ArchiveBound;
}

function retainOption(v: string): RetainOptions {
  try { return parseRetain(v); } catch (err) { throw new InvalidArgumentError((err as Error).message); }
}

function archiveMaxOption(v: string): ArchiveBound {
  try { return parseArchiveMax(v); } catch (err) { throw new InvalidArgumentError((err as Error).message); }
}

function hostsOption(v: string): DeployHost[] {
  try { return parseHosts(v); } catch (err) { throw new InvalidArgumentError((err as Error).message); }
}

/** `swarm deploy render`: Podman kube YAML + systemd units, or k3s manifests, from one spec. */
export function registerDeploy(program: Command): void {
  const deploy = program.command('deploy').description('deployment files for Podman and k3s');
  deploy.command('render')
    .description('render Podman (kube YAML, quadlet/systemd units) or k3s manifests; memory from `swarm plan` when the model is readable here')
    .requiredOption('--target <t>', 'podman or k3s', oneOf('--target', ['podman', 'k3s'] as const))
    .requiredOption('--agents <n>', 'workers, one agent each (required)', int('--agents', 1))
    .requiredOption('--model <file>', 'GGUF path on the host, made absolute; its folder is mounted read-only at /models (required)')
    .option('--out <dir>', 'write the files into this folder; - (the default) prints them to stdout')
    .option('--json', 'print {"files": {name: text}} (or, with --out DIR, {"written": [paths]})', false)
    .option('--image <ref>', 'container image (default localhost/swarm:VERSION, this package\'s version: pinned, never latest)')
    .option('--driver <name>', 'worker engine driver', 'embedded')
    .option('--driver-opt <key=value>', 'driver option (repeatable)', keyValue, {})
    .option('--workers <kind>', 'k3s workers: deployment or daemonset', oneOf('--workers', ['deployment', 'daemonset'] as const), 'deployment')
    .option('--host-network', 'podman: pods share the host network, bound to 127.0.0.1 (single host)', false)
    .option('--hub-port <n>', 'hub worker port', int('--hub-port', 1), 7070)
    .option('--control-port <n>', 'hub control API port (loopback inside the hub)', int('--control-port', 1), 7071)
    .option('--ctx <n>', 'context per agent for the plan', int('--ctx', 16), 2048)
    .option('--ubatch <n>', 'llama.cpp micro-batch for the plan', int('--ubatch', 1), 512)
    .option('--cpus <n>', 'vCPUs of the host for the plan', int('--cpus', 1), 4)
    .option('--engine <mode>', 'the embedded (llama.cpp) driver\'s engine, as `swarm up`: batched = a pod\'s agents in one worker container, one engine and a sequence each; per-worker = a container and an engine per agent', oneOf('--engine', ['batched', 'per-worker'] as const), 'batched')
    .option('--per-pod <k>', 'k3s with the batched engine: agents per worker pod, one engine each (default: all in one pod; a DaemonSet runs this many on every node)', int('--per-pod', 1))
    .option('--no-repack', 'plan for --no-repack engines')
    .option('--no-failover', 'workers without --failover (by default each has a peer port and the run goes on by gossip if the hub dies)')
    .option('--peer-port <n>', 'failover: first peer port (podman: one per worker from here, on loopback; k3s: each pod\'s)', int('--peer-port', 1), 7100)
    .option('--name <name>', 'podman: pod names <name>-hub and <name>-workers', 'swarm')
    .option('--hosts <list>', 'podman across machines: hub=ADDR,w1=ADDR,… (the hub\'s host first): one pod per host in the host\'s network, peers on host addresses, mutual TLS', hostsOption)
    .option('--certs-dir <dir>', 'podman: where `swarm certs` output (the token; with --hosts the certificates too) is on every host, mounted at /certs', '/etc/swarm/certs')
    .option('--model-image <ref>', 'k3s: the model from this OCI image as an image volume (Kubernetes >= 1.31) instead of the read-only claim swarm-models')
    .option('--model-size <size>', 'k3s: size of the read-only model claim', '10Gi')
    .option('--state-dir <dir>', 'podman: host folder of the hub\'s journal, owned by uid 10001 (default /var/lib/swarm/hub)')
    .option('--worker-state-dir <dir>', 'podman with failover: host folder of the workers\' status files, owned by uid 10001 (default /var/lib/swarm/workers)')
    .option('--state-size <size>', 'k3s: the hub\'s state PersistentVolumeClaim size (journal and results archive; default 1Gi, or what --archive-max needs)')
    .option('--storage-class <name>', 'k3s: storage class of that claim (default: the cluster\'s; local-path on k3s)')
    .option('--retain <age>,<count>,<bytes>', 'the hub\'s retention horizon, as `swarm hub --retain`; the hub\'s memory request and limit follow it (default: the hub\'s default horizon)', retainOption)
    .option('--archive-max <bytes>[,<age>]', 'the hub\'s results archive bound, as `swarm hub --archive-max` (k3s default: what the state volume leaves after the journal, 640 MiB of 1Gi; a bound the volume cannot hold is refused)', archiveMaxOption)
    .action(async (o: RenderFlags) => {
      try {
        // The rendered hostPath must not depend on the folder the files are later used from.
        o.model = path.resolve(o.model);
        let p: Plan | undefined;
        if (fs.existsSync(o.model)) {
          // The batched engine applies to the llama.cpp driver only; any other holds its engine per container.
          const engine = o.driver === 'batched' || o.driver === 'embedded' ? o.engine : 'per-worker';
          // A file that is not a GGUF (a typo, /dev/null) is the user's to fix, said as `swarm plan` says it.
          const shape = await readModelShape(o.model).catch((err: unknown) => {
            throw new SwarmError('SWARM_ERR_CONFIG', `cannot read GGUF ${o.model}: ${err instanceof Error ? err.message : String(err)}`);
          });
          p = plan(shape, { agents: o.agents, ctx: o.ctx, ubatch: o.ubatch, cpus: o.cpus, engine: o.driver === 'batched' ? 'batched' : engine, repack: o.repack });
        }
        const files = renderDeployment({
          target: o.target, agents: o.agents, model: o.model, image: o.image, driver: o.driver, driverOpts: o.driverOpt, engine: o.engine,
          ...(o.perPod !== undefined ? { perPod: o.perPod } : {}),
          workers: o.workers, hostNetwork: o.hostNetwork,
          hubPort: o.hubPort, controlPort: o.controlPort, plan: p, failover: o.failover, peerPort: o.peerPort, name: o.name,
          ...(o.stateSize ? { stateSize: o.stateSize } : {}), ...(o.archiveMax ? { archiveMax: o.archiveMax } : {}), ...(o.stateDir ? { stateDir: o.stateDir } : {}), ...(o.workerStateDir ? { workerStateDir: o.workerStateDir } : {}),
          ...(o.storageClass ? { storageClass: o.storageClass } : {}),
          certsDir: o.certsDir, modelSize: o.modelSize, ...(o.modelImage ? { modelImage: o.modelImage } : {}),
          ...(o.hosts ? { hosts: o.hosts } : {}), ...(o.retain ? { retain: o.retain } : {}),
        });
        if (!o.out || o.out === '-') {
          if (o.json) { process.stdout.write(JSON.stringify({ files }) + '\n'); return; }
          for (const [name, text] of Object.entries(files)) process.stdout.write(`# ==> ${name} <==\n${text}\n`);
          return;
        }
        fs.mkdirSync(o.out, { recursive: true });
        const written: string[] = [];
        for (const [name, text] of Object.entries(files)) {
          // no secret is rendered (the token and keys are files of `swarm certs`): plain files
          fs.writeFileSync(path.join(o.out, name), text, { mode: 0o644 });
          written.push(path.join(o.out, name));
        }
        process.stdout.write(o.json ? JSON.stringify({ written }) + '\n' : written.map((f) => `${f}\n`).join(''));
      } catch (err) { fail(err, o.json); }
    });
}
