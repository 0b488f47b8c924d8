import fs from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';
import { InvalidArgumentError, type Command } from 'commander';
import { warnIfPid1 } from '../pid1.js';
import { SwarmError } from '../../protocol/errors.js';
import type { HubLocator } from '../../worker/index.js';
import { fail } from '../exit.js';
import { hostPort, int, keyValue } from '../options.js';
import { MAX_ID, MAX_LINE, MAX_QUEUE, MAX_SHORT_TEXT, MAX_SLOTS } from '../../protocol/bounds.js';
import { DEFAULT_MAX_LINE } from '../../protocol/types.js';
import { checkToken, envToken, readHubFile, stateDir } from '../state.js';
import { DEFAULT_DRIVER, chooseModel } from '../model.js';
import { driverOptionsHelp } from '../../drivers/option-summary.js';
import { driverOptions } from '../../drivers/options.js';
import { DRIVER_OPTION_CHECKS } from '#gen/driver-option-checks.js';
import { ORPHAN_EXIT_DEFAULT_MS, ORPHAN_EXIT_MAX_MS } from '../../worker/orphan-bounds.js';
import { pemFile, capsList } from '../file-option.js';

/** The arguments `swarm up` passes to the workers it supervises. */
export function workerArgs(o: { driver: string; driverOpt: Record<string, string>; model?: string; slots: number; failover?: boolean; caps?: string; tlsCert?: string; tlsKey?: string; orphanExitMs?: number; maxLine?: number }): string[] {
  // Checked here: a supervised worker that exits on them at start would be respawned forever.
  if (DRIVER_OPTION_CHECKS[o.driver]) driverOptions(o.driver, o.driverOpt);
  const args = ['--driver', o.driver, '--slots', String(o.slots)];
  if (o.orphanExitMs !== undefined) args.push('--orphan-exit-ms', String(o.orphanExitMs));
  // The hub's line bound: a worker on the default refused every TASK_REQ past 1 MiB the hub accepted.
  if (o.maxLine !== undefined && o.maxLine !== DEFAULT_MAX_LINE) args.push('--max-line', String(o.maxLine));
  if (o.caps) args.push('--caps', o.caps);
  if (o.failover) args.push('--failover');
  // Peer links follow the hub's TLS: the same certificate and key serve the workers' peer ports.
  if (o.failover && o.tlsCert && o.tlsKey) args.push('--peer-tls-cert', o.tlsCert, '--peer-tls-key', o.tlsKey);
  for (const [k, v] of Object.entries(o.driverOpt)) args.push('--driver-opt', `${k}=${v}`);
  if (o.model) args.push('--model', o.model);
  return args;
}

interface WorkerCliOptions {
  hub?: { host: string; port: number }; stateDir?: string; id?: string; ids?: string[]; count: number; driver: string;
  driverOpt: Record<string, string>; model?: string; role?: string; caps?: string; slots: number; queue: number; token?: string;
  peerToken?: string; tls: boolean; tlsCa?: string; tlsPin?: string; tlsCert?: string; tlsKey?: string; msgpack: boolean; logFile?: string; failover: boolean; peerHost?: string; advertise?: string; peerPort: number; peerPorts?: string; peerAdvertise?: string; hubLapseMs?: number; hostId?: string;
  peerTlsCert?: string; peerTlsKey?: string; peerTlsCa?: string; restartKilledMs?: number; orphanExitMs?: number; maxLine?: number;
}

/** `--orphan-exit-ms`, shared by `swarm worker`, `swarm up` and `swarm hub --supervise` (its default is the worker config's). */
export const ORPHAN_EXIT_HELP = `a worker whose parent process is gone, that reaches no hub and sees no failover peer in another process that is not orphaned too, for this long, exits (code 3); 0: never (default ${ORPHAN_EXIT_DEFAULT_MS}: ${ORPHAN_EXIT_DEFAULT_MS / 60_000} min)`;

/**
 * V8's interrupt budget for a one-agent worker process, 8x the default (67,584). A worker's own
 * JavaScript is light per task (its engine does the work), and 25 one-agent processes each ran V8's
 * optimising compiler on the same warm functions, again after each idle spell: 42% of the workers'
 * CPU under `perf`. With this budget warm functions keep baseline code and those that stay hot are
 * still optimised. Not for `--count K`: its K agents share one compiler, and there the later
 * optimisation made the failover bench ~4% slower. Set in the action, before the worker's modules
 * load, so their functions get it however the worker was started.
 */
const ONE_AGENT_JIT_BUDGET = 8 * 67_584;

export function registerWorker(program: Command): void {
  program.command('worker')
    .description('run one or more workers that join a hub')
    .option('--hub <host:port>', 'hub address (default: read from the state directory)', hostPort)
    .option('--state-dir <dir>', 'find the hub through this state directory (env SWARM_STATE_DIR)')
    .option('--id <id>', 'worker id (with --count K: id-1 … id-K)')
    .option('--count <k>', 'run K worker connections in this one process', int('--count', 1), 1)
    .option('--ids <list>', 'run these workers (comma-separated ids) in this one process; credentials per id in env SWARM_CREDENTIALS (a JSON object, id to credential)', idList)
    .option('--driver <name>', 'engine driver: embedded, llama-server, llama-cli, echo, exec, …', DEFAULT_DRIVER)
    .option('--driver-opt <key=value>', 'driver option (repeatable), e.g. latency_ms=50', keyValue, {})
    .option('--model <path>', 'GGUF model file or hf: URI (env SWARM_MODEL; default: the random-weight demo model)')
    .option('--role <role>', 'role this worker takes tasks for')
    .option('--caps <list>', 'comma-separated capabilities', capsList)
    .option('--slots <n>', 'tasks in flight at once', int('--slots', 1, MAX_SLOTS), 1)
    .option('--queue <n>', 'tasks held queued beyond the slots; the hub fills them only while tasks are short (under its prefetch bound, 5 ms)', int('--queue', 0, MAX_QUEUE), 8)
    .option('--max-line <bytes>', `longest protocol line to and from the hub; give the hub's --max-line (default ${DEFAULT_MAX_LINE})`, int('--max-line', 1024, MAX_LINE))
    .option('--token <secret>', 'hub token, or this worker\'s own credential (`swarm credential <id>`) (env SWARM_TOKEN, or the state directory)')
    .option('--peer-token <secret>', 'failover: secret of the peer links when --token is a worker credential (env SWARM_PEER_TOKEN; `swarm credential --peers`)')
    .option('--tls', 'connect with TLS')
    .option('--tls-ca <file>', 'CA certificate that signed the hub certificate', pemFile)
    .option('--tls-pin <sha256>', 'the hub certificate\'s SHA-256 fingerprint (AB:CD:…; `openssl x509 -noout -fingerprint -sha256`); --tls needs this or --tls-ca')
    .option('--tls-cert <file>', 'this worker\'s certificate, for a hub that asks for one (default: --peer-tls-cert)', pemFile)
    .option('--tls-key <file>', 'its key (default: --peer-tls-key)', pemFile)
    .option('--no-msgpack', 'speak NDJSON only')
    .option('--log-file <file>', 'write logs here instead of stderr')
    .option('--failover', 'hybrid star-gossip failover: each worker opens a peer port and the run goes on if the hub dies', false)
    .option('--peer-host <addr>', 'bind address of the peer ports (off loopback needs a token; default: loopback for a local hub, else the local address that reaches the hub)')
    .option('--advertise <host>', 'the address other hosts reach this one at (default: the peer host, or for a wildcard bind the local address that reaches the hub)')
    .option('--peer-port <n>', 'first peer port (0 = any free port; with --count K, K ports from here)', int('--peer-port'), 0)
    .option('--peer-ports <list>', 'comma-separated peer ports, one per worker (overrides --peer-port)')
    .option('--peer-advertise <list>', 'comma-separated host:port peers should dial, one per worker (a proxy, a port forward)')
    .option('--peer-tls-cert <file>', 'failover: TLS certificate for the peer ports (with --peer-tls-key; then every peer must use TLS)', pemFile)
    .option('--peer-tls-key <file>', 'failover: TLS key for the peer ports', pemFile)
    .option('--peer-tls-ca <file>', 'failover: verify peers\' certificates against this CA (without it, peer links are encrypted, not verified)', pemFile)
    .option('--restart-killed-ms <ms>', 'start a worker the hub sends KILL again after this long (a supervised process of several)', int('--restart-killed-ms'))
    .option('--host-id <id>', 'failover: the host this worker runs on, as the hub spreads replica holders over hosts (env SWARM_HOST_ID; default: the hostname with its machine, boot and namespace ids)')
    .option('--orphan-exit-ms <ms>', ORPHAN_EXIT_HELP, int('--orphan-exit-ms', 0, ORPHAN_EXIT_MAX_MS))
    .option('--hub-lapse-ms <ms>', 'failover: hub silence before peers are asked (default 3000, the spec\'s); peers that heard the hub within half of it veto', int('--hub-lapse-ms', 200))
    .addHelpText('after', driverOptionsHelp())
    .action(async (o: WorkerCliOptions) => {
      if (o.ids && (o.id !== undefined || o.count !== 1)) fail(new SwarmError('SWARM_ERR_CONFIG', '--ids names every worker: not with --id or --count'));
      if (o.ids) o.count = o.ids.length;
      if (o.hostId) process.env.SWARM_HOST_ID = o.hostId;
      if (o.count === 1) v8.setFlagsFromString(`--interrupt-budget=${ONE_AGENT_JIT_BUDGET}`);
      try {
        // Loaded here, not at the top: `swarm up` and `swarm hub` import this file for workerArgs() only.
        const [{ deferredLogger }, { WorkerPool, OrphanGuard, orphanCheckMs, poolOrphanSignals, failoverStatusPath, workerConfig }, { killAllChildren, loadDriver }] = await Promise.all([
          import('../deferred-log.js'), import('../../worker/index.js'), import('../../drivers/index.js')]);
        // pino loads once this worker has joined (or failed to): see cli/deferred-log.ts.
        const { log, load: loadLogger } = deferredLogger('worker', o.logFile);
        setTimeout(() => void loadLogger(), 3000).unref();
        warnIfPid1(log);
        const dir = stateDir(o.stateDir);
        // The batched engine's socket and files live in the swarm's state dir: one engine per swarm and model.
        process.env.SWARM_ENGINE_DIR ??= dir;
        const fixed = o.hub;
        if (!fixed && !readHubFile(dir)) throw new SwarmError('SWARM_ERR_NO_SWARM', `no --hub given and no hub in ${dir}`);
        const ca = o.tlsCa ? fs.readFileSync(o.tlsCa, 'utf8') : undefined;
        const certFile = o.tlsCert ?? o.peerTlsCert, keyFile = o.tlsKey ?? o.peerTlsKey;
        const own = certFile && keyFile ? { cert: fs.readFileSync(certFile, 'utf8'), key: fs.readFileSync(keyFile, 'utf8') } : {};
        const pin = o.tlsPin;
        // A TLS link is always verified: an unverified one hands the token to whoever answers.
        if (fixed && o.tls && !ca && !pin) throw new SwarmError('SWARM_ERR_CONFIG', '--tls needs --tls-ca (the CA that signed the hub\'s certificate, `swarm certs`: ca.crt) or --tls-pin (its SHA-256 fingerprint): without either the token would go to any hub that answers');
        const locate: HubLocator = async () => {
          if (fixed) return { ...fixed, tls: o.tls || ca !== undefined || pin !== undefined, ca, pin, ...own };
          const h = readHubFile(dir);
          if (!h) throw new SwarmError('SWARM_ERR_NO_SWARM', `no hub in ${dir}`);
          // A hub on this state dir pins its own certificate in hub.json, which only this user reads.
          return { host: h.host === '0.0.0.0' || h.host === '::' ? '127.0.0.1' : h.host, port: h.port, tls: h.tls || o.tls, ca, pin: pin ?? h.tls_fingerprint, ...own };
        };
        const model = await chooseModel(o.driver, o.model);
        await loadDriver(o.driver); // only this worker's driver: its options are checked before we connect
        const token = o.token ?? envToken() ?? (fixed ? undefined : readHubFile(dir)?.token);
        // Past the HANDSHAKE's bound the hub refuses every join (BAD_PAYLOAD), and the worker retried forever.
        if (token !== undefined) checkToken(token, 'the token given (--token, SWARM_TOKEN, SWARM_TOKEN_FILE)');
        const base = o.id ?? `w-${os.hostname().split('.')[0]}-${process.pid}`;
        const ids = o.ids ?? (o.count === 1 ? [base] : Array.from({ length: o.count }, (_, i) => `${base}-${i + 1}`));
        // What a HANDSHAKE carries (PROTOCOL.md): past it the hub refuses it, and the worker retried forever.
        const longId = ids.find((id) => id.length > MAX_ID);
        if (longId) throw new SwarmError('SWARM_ERR_CONFIG', `a worker id has at most ${MAX_ID} characters (${longId.length > 40 ? `${longId.slice(0, 40)}…` : longId} has ${longId.length}${o.count > 1 && !o.ids ? ', with its -N' : ''})`);
        if (o.role !== undefined && o.role.length > MAX_SHORT_TEXT) throw new SwarmError('SWARM_ERR_CONFIG', `--role has at most ${MAX_SHORT_TEXT} characters (this one has ${o.role.length})`);
        const config = workerConfig({ agent: { slots: o.slots, queue: o.queue, ...(o.maxLine !== undefined ? { maxLine: o.maxLine } : {}) }, ...(o.orphanExitMs !== undefined ? { client: { orphanExitMs: o.orphanExitMs } } : {}),
          ...(o.hubLapseMs !== undefined ? { hubMonitor: { lapseMs: o.hubLapseMs } } : {}) });
        const pool = new WorkerPool({
          ids, locate, token, tokens: credentials(process.env.SWARM_CREDENTIALS), role: o.role, slots: o.slots, msgpack: o.msgpack, restartKilledMs: o.restartKilledMs,
          // The veto window and the handback frame bound are derived there (from the lapse, the line limit).
          config,
          ...(o.failover ? { failover: { ...failoverOptions(o), ...(await peerAddress(o, fixed)) }, statusFile: failoverStatusPath(dir) } : {}),
          caps: o.caps ? o.caps.split(',').map((c) => c.trim()).filter(Boolean) : [],
          driver: { name: o.driver, ...(model.path ? { model: model.path } : {}), options: o.driverOpt },
        }, log);
        // Read once: the commands, engines and servers the drivers start inherit this environment,
        // and none of them needs a worker's secrets.
        for (const k of ['SWARM_TOKEN', 'SWARM_TOKEN_FILE', 'SWARM_CREDENTIALS', 'SWARM_PEER_TOKEN']) delete process.env[k];
        for (const a of pool.agents) a.client.onStatus((s) => {
          void loadLogger();
          // A refused join says why, once and then now and then (the loop retries: a hub may be restarting).
          if (s.type === 'reconnecting' && (s.attempt === 1 || s.attempt % 30 === 0)) log.warn({ attempt: s.attempt, error: joinError(s.error) }, 'cannot join the hub');
        });
        let orphaned: string | undefined;
        // No parent, no hub, no peer for the bound: this worker outlived its swarm (a leak); it goes.
        // Peers say whether they are orphaned too: an announcement stands for three checks.
        const orphan = new OrphanGuard(poolOrphanSignals(pool, 3 * orphanCheckMs(config.client.orphanExitMs) + 2000), {
          afterMs: config.client.orphanExitMs,
          onOrphaned: (why) => { orphaned = why; void pool.stop('orphaned'); },
        });
        orphan.start();
        const onSignal = () => void pool.stop('signal').then(() => process.exit(0));
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        process.once('exit', () => killAllChildren());
        await pool.run();
        await loadLogger();
        if (orphaned !== undefined) {
          log.error({ code: 'SWARM_ERR_NO_SWARM', orphanExitMs: config.client.orphanExitMs }, `orphaned worker exiting: ${orphaned}`);
          log.flush?.();
          fail(new SwarmError('SWARM_ERR_NO_SWARM', `orphaned worker exiting: ${orphaned}`));
        }
        // Refused (wrong token or certificate): retrying would present the same credentials again.
        const refused = pool.agents.find((a) => a.refused)?.refused;
        if (refused) log.error({ code: refused.code, error: refused.message }, 'the hub refused this worker; exiting');
        log.flush?.();
        if (refused) fail(refused);
        process.exit(0);
      } catch (err) { fail(err); }
    });
}

function idList(v: string): string[] {
  const ids = v.split(',').map((x) => x.trim());
  if (ids.some((id) => id === '')) throw new InvalidArgumentError(`--ids: an empty id in "${v}"`);
  if (new Set(ids).size !== ids.length) throw new InvalidArgumentError(`--ids: an id given twice in "${v}"`);
  return ids;
}

/** SWARM_CREDENTIALS: a JSON object of worker id to credential, for a process of several workers. */
function credentials(env: string | undefined): Record<string, string> | undefined {
  if (env === undefined || env === '') return undefined;
  let v: unknown;
  try { v = JSON.parse(env); } catch { v = undefined; }
  if (!v || typeof v !== 'object' || Array.isArray(v) || Object.values(v).some((c) => typeof c !== 'string')) {
    throw new SwarmError('SWARM_ERR_CONFIG', 'SWARM_CREDENTIALS must be a JSON object of worker id to credential');
  }
  return v as Record<string, string>;
}

/** Peer port settings from the command line; a list must name one entry per worker. */
function failoverOptions(o: WorkerCliOptions): { host: string; port: number; ports?: number[]; advertise?: string[]; tls?: { cert: string; key: string; ca?: string }; peerToken?: string } {
  const list = (v: string | undefined, what: string) => {
    if (v === undefined) return undefined;
    const items = v.split(',').map((x) => x.trim()).filter(Boolean);
    if (items.length !== o.count) throw new SwarmError('SWARM_ERR_CONFIG', `${what} names ${items.length} entries for ${o.count} workers`);
    return items;
  };
  const ports = list(o.peerPorts, '--peer-ports')?.map((p) => {
    const n = Number(p);
    if (!Number.isInteger(n) || n < 0 || n > 65535) throw new SwarmError('SWARM_ERR_CONFIG', `--peer-ports: bad port ${p}`);
    return n;
  });
  if (!o.peerTlsCert !== !o.peerTlsKey) throw new SwarmError('SWARM_ERR_CONFIG', '--peer-tls-cert and --peer-tls-key go together');
  const tls = o.peerTlsCert && o.peerTlsKey
    ? { cert: fs.readFileSync(o.peerTlsCert, 'utf8'), key: fs.readFileSync(o.peerTlsKey, 'utf8'), ...(o.peerTlsCa ? { ca: fs.readFileSync(o.peerTlsCa, 'utf8') } : {}) }
    : undefined;
  const peerToken = o.peerToken ?? process.env.SWARM_PEER_TOKEN;
  return { host: o.peerHost ?? '127.0.0.1', port: o.peerPort, ports, advertise: list(o.peerAdvertise, '--peer-advertise'), ...(tls ? { tls } : {}), ...(peerToken ? { peerToken: checkToken(peerToken, 'the peer token (--peer-token, SWARM_PEER_TOKEN)') } : {}) };
}

const WILDCARD = new Set(['0.0.0.0', '::']);
const isLocal = (h: string) => h === 'localhost' || h === '::1' || h.startsWith('127.');

/**
 * Where the peer ports bind and what they advertise. Peers on other machines must be able to dial
 * the advertised address, so for a hub on another machine neither is loopback: by default the
 * ports bind the local address that reaches the hub (the route's source address), and a wildcard
 * bind advertises that address.
 */
async function peerAddress(o: WorkerCliOptions, hub?: { host: string; port: number }): Promise<{ host: string; advertiseHost?: string }> {
  const remote = hub !== undefined && !isLocal(hub.host);
  const toward = remote ? await localAddressToward(hub.host, hub.port) : undefined;
  const host = o.peerHost ?? toward ?? '127.0.0.1';
  const advertiseHost = o.advertise ?? (WILDCARD.has(host) ? toward : undefined);
  if (remote && WILDCARD.has(host) && !advertiseHost) throw new SwarmError('SWARM_ERR_CONFIG', `--peer-host ${host}: give --advertise, the address other hosts reach this one at`);
  return { host, ...(advertiseHost ? { advertiseHost } : {}) };
}

/** The local address the kernel would send from to reach host:port (a UDP connect sends nothing). */
export async function localAddressToward(host: string, port: number): Promise<string> {
  const dgram = await import('node:dgram');
  const { isIPv6 } = await import('node:net');
  const s = dgram.createSocket(isIPv6(host) ? 'udp6' : 'udp4');
  try {
    return await new Promise<string>((resolve, reject) => {
      s.once('error', reject);
      s.connect(port, host, () => resolve(s.address().address));
    });
  } catch (err) {
    throw new SwarmError('SWARM_ERR_CONFIG', `no route to the hub at ${host}:${port}: ${(err as Error).message}`);
  } finally { s.close(); }
}

/** A join error in the operator's words: a TLS refusal names the option that fixes it. */
function joinError(msg: string): string {
  if (/certificate|self.signed|altnames|unable to verify/i.test(msg)) return `${msg} (TLS: the hub's certificate is not trusted; --tls-ca names the CA that signed it)`;
  if (/alert|handshake failure|peer did not return a certificate/i.test(msg)) return `${msg} (TLS: the hub refused this worker's certificate; --tls-cert/--tls-key, signed by the hub's --tls-ca)`;
  return msg;
}
