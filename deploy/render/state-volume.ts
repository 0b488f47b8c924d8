/**
 * The hub's state volume and the results archive's bound on it, kept consistent: the journal takes
 * up to JOURNAL_PER_HOT_BYTE x the hot state's byte bound (--retain), the archive its own bound
 * (--archive-max) and a file being written besides. k3s only: a PersistentVolumeClaim has a size;
 * a podman host folder has none (the hub's own default bound applies unless one is given).
 */
import { SwarmError } from '../../protocol/errors.js';
import { parseSize } from '../../protocol/bytes.js';
import { DEFAULT_RETAIN, fullRetain, type RetainOptions } from '../../hub/retention.js';
import { JOURNAL_PER_HOT_BYTE, ROTATE_BYTES, archiveBytesForVolume, describeArchiveBound, type ArchiveBound } from '../../hub/archive-bound.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

export interface StateVolume { stateSize: string; archiveMax?: ArchiveBound }

/**
 * k3s: given a volume (`--state-size`) and no bound, the archive gets what the volume has left after
 * the journal (1Gi at the default horizon: 640 MiB); given neither, the same of 1Gi (a horizon whose
 * journal needs more gets a larger volume and 640 MiB of archive); given a bound and no volume, the volume is
 * sized to hold it (whole Gi, at least 1Gi); given both, a bound the volume cannot hold is refused
 * (SWARM_ERR_CONFIG), as is no byte bound at all (`off`, or an age only): the volume would fill.
 */
export function stateVolume(target: 'podman' | 'k3s', stateSize: string | undefined, archiveMax: ArchiveBound | undefined, retain: RetainOptions | undefined): StateVolume {
  if (target !== 'k3s') return { stateSize: stateSize ?? '1Gi', ...(archiveMax ? { archiveMax } : {}) };
  const journal = JOURNAL_PER_HOT_BYTE * fullRetain(retain ?? DEFAULT_RETAIN).bytes;
  const mib = (n: number) => `${Math.ceil(n / MiB)} MiB`;
  if (!archiveMax && stateSize === undefined) {
    // The default volume, 1Gi, and the archive what it leaves; a horizon whose journal 1Gi cannot
    // hold gets a volume for it and the archive 1Gi leaves at the default horizon.
    const bytes = archiveBytesForVolume(GiB, fullRetain(retain ?? DEFAULT_RETAIN).bytes);
    if (bytes !== undefined) return { stateSize: '1Gi', archiveMax: { bytes, ageMs: 0 } };
    archiveMax = { bytes: archiveBytesForVolume(GiB, DEFAULT_RETAIN.bytes)!, ageMs: 0 };
  }
  if (!archiveMax) {
    const size = stateSize!;
    const vol = sizeOf(size);
    const bytes = archiveBytesForVolume(vol, fullRetain(retain ?? DEFAULT_RETAIN).bytes);
    if (bytes === undefined) throw new SwarmError('SWARM_ERR_CONFIG', `--state-size ${size} leaves no room for the results archive: the journal takes up to ${mib(journal)} at this --retain; give a larger --state-size`);
    return { stateSize: size, archiveMax: { bytes, ageMs: 0 } };
  }
  if (!archiveMax.bytes) throw new SwarmError('SWARM_ERR_CONFIG', `--archive-max ${describeArchiveBound(archiveMax)} has no byte bound: on a k3s volume of fixed size the archive would fill it; give a size (e.g. 2GiB or 2GiB,30d)`);
  const need = archiveMax.bytes + journal + ROTATE_BYTES;
  if (stateSize === undefined) return { stateSize: `${Math.max(1, Math.ceil(need / GiB))}Gi`, archiveMax };
  if (need > sizeOf(stateSize)) {
    throw new SwarmError('SWARM_ERR_CONFIG', `--archive-max ${describeArchiveBound(archiveMax)} does not fit --state-size ${stateSize}: with the journal (up to ${mib(journal)} at this --retain) and a file being written it needs ${mib(need)}; give --state-size ${Math.ceil(need / GiB)}Gi or a smaller --archive-max`);
  }
  return { stateSize, archiveMax };
}

function sizeOf(v: string): number {
  try { return parseSize(v); } catch (e) { throw new SwarmError('SWARM_ERR_CONFIG', `--state-size: ${(e as Error).message}`); }
}
