import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import crypto from 'node:crypto';
import { InvalidArgumentError, type Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { describeEnd, runCommand } from '../../drivers/run-command.js';
import { fail } from '../exit.js';
import { int } from '../options.js';

/** One host to certify: its file name and the addresses and names others reach it by. */
export interface CertHost { name: string; sans: string[] }

/** `name=addr[,addr…]` (IPs or DNS names); the name doubles as a DNS name. */
export function parseCertHost(v: string, prev: CertHost[] = []): CertHost[] {
  const i = v.indexOf('=');
  const name = i < 0 ? v : v.slice(0, i);
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(name)) throw new InvalidArgumentError(`--host: bad name "${name}" (letters, digits, . _ -)`);
  const sans = i < 0 ? [] : v.slice(i + 1).split(',').map((s) => s.trim()).filter(Boolean);
  return [...prev, { name, sans }];
}

/** The subjectAltName value for a host: its IPs, its DNS names and its own name. */
export function subjectAltName(h: CertHost): string {
  const names = new Set([h.name, ...h.sans]);
  return [...names].map((s) => (net.isIP(s) ? `IP:${s}` : `DNS:${s}`)).join(',');
}

async function openssl(args: string[], cwd: string): Promise<void> {
  const r = await runCommand('openssl', args, { cwd });
  if (r.error?.code === 'ENOENT') throw new SwarmError('SWARM_ERR_CONFIG', 'openssl is not installed (Debian: apt-get install openssl)');
  if (r.exitCode !== 0) {
    const why = r.stderr.trim() || describeEnd(r);
    throw new SwarmError('SWARM_ERR_CONFIG', `openssl ${args[0]} failed: ${why.split('\n').slice(-2).join(' ')}`);
  }
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/**
 * Make (or reuse) a CA in `dir` and one certificate per host signed by it, plus a token file: what a
 * hub and workers on several machines need to trust each other. Keys are written 0600.
 */
export async function makeCerts(dir: string, hosts: CertHost[], o: { days: number; force?: boolean }): Promise<{ made: string[]; kept: string[] }> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const made: string[] = [], kept: string[] = [];
  const exists = (f: string) => fs.existsSync(path.join(dir, f));
  if (!exists('ca.crt') || !exists('ca.key')) {
    await openssl(['req', '-x509', ...EC, '-days', String(o.days), '-subj', '/CN=swarm CA', '-keyout', 'ca.key', '-out', 'ca.crt',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
    made.push('ca.crt', 'ca.key');
  } else kept.push('ca.crt');
  for (const h of hosts) {
    if (!o.force && exists(`${h.name}.crt`) && exists(`${h.name}.key`)) { kept.push(`${h.name}.crt`); continue; }
    const ext = `${h.name}.ext`, csr = `${h.name}.csr`;
    // Server and client use: a host's certificate serves its hub or peer port and dials the others.
    fs.writeFileSync(path.join(dir, ext), `subjectAltName=${subjectAltName(h)}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n`);
    try {
      await openssl(['req', '-new', ...EC, '-subj', `/CN=${h.name}`, '-keyout', `${h.name}.key`, '-out', csr], dir);
      await openssl(['x509', '-req', '-in', csr, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', `0x${crypto.randomBytes(12).toString('hex')}`,
        '-days', String(o.days), '-extfile', ext, '-out', `${h.name}.crt`], dir);
    } finally {
      fs.rmSync(path.join(dir, ext), { force: true });
      fs.rmSync(path.join(dir, csr), { force: true });
    }
    made.push(`${h.name}.crt`, `${h.name}.key`);
  }
  if (!exists('token')) {
    fs.writeFileSync(path.join(dir, 'token'), crypto.randomBytes(24).toString('base64url') + '\n', { mode: 0o600 });
    made.push('token');
  } else kept.push('token');
  for (const f of fs.readdirSync(dir)) if (f.endsWith('.key')) fs.chmodSync(path.join(dir, f), 0o600);
  return { made, kept };
}

export function registerCerts(program: Command): void {
  program.command('certs')
    .description('make a CA, a certificate per host (signed by it) and a token, for a swarm across machines')
    .requiredOption('--dir <dir>', 'where to write ca.crt, ca.key, <name>.crt, <name>.key and token (an existing CA is reused)')
    .option('--host <name=addr,…>', 'a host and the addresses/DNS names others reach it by (repeatable), e.g. hub=10.0.0.1,hub.lan', parseCertHost, [])
    .option('--days <n>', 'validity in days', int('--days', 1), 825)
    .option('--force', 'remake host certificates that exist already', false)
    .option('--json', 'print JSON', false)
    .action(async (o: { dir: string; host: CertHost[]; days: number; force: boolean; json: boolean }) => {
      try {
        const dir = path.resolve(o.dir);
        const r = await makeCerts(dir, o.host, { days: o.days, force: o.force });
        if (o.json) { process.stdout.write(JSON.stringify({ dir, ...r }) + '\n'); return; }
        process.stdout.write([
          `swarm certs: ${dir}: made ${r.made.join(' ') || 'nothing'}${r.kept.length ? `; kept ${r.kept.join(' ')}` : ''}`,
          `the token: export SWARM_TOKEN_FILE=${path.join(dir, 'token')}   (a file, never argv)`,
          // The CLI line below reaches the control API on ADDR: the hub must serve it there.
          'hub:    swarm hub --host ADDR --control-host ADDR --control-port CONTROL_PORT --tls-cert NAME.crt --tls-key NAME.key --tls-ca ca.crt …',
          'worker: swarm worker --hub ADDR:PORT --tls-ca ca.crt --failover --peer-tls-cert NAME.crt --peer-tls-key NAME.key --peer-tls-ca ca.crt …',
          'CLI:    swarm status --hub-url https://ADDR:CONTROL_PORT --tls-ca ca.crt',
          'k3s:    kubectl -n swarm create secret generic swarm-token --from-file=token=token; kubectl -n swarm create secret generic swarm-tls --from-file=ca.crt --from-file=hub.crt --from-file=hub.key --from-file=worker.crt --from-file=worker.key',
        ].join('\n') + '\n');
      } catch (err) { fail(err, o.json); }
    });
}
