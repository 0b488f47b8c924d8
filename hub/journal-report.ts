import type { TaskStore } from './store.js';

/** The journal's part of `swarm status --json`: durability mode, sizes, damage set aside, disk trouble. */
export function journalStatus(store: TaskStore): Record<string, unknown> | undefined {
  const s = store.journalStats;
  if (!s) return undefined;
  return {
    ...s,
    damaged_records: store.damage.records,
    quarantine: store.damage.quarantine,
    damage: store.damage.samples,
    legacy_records: store.legacyRecords,
    orphan_records: store.damage.orphans,
    retention: store.retention,
  };
}

/** Prometheus lines for the journal (none without a state directory). */
export function journalMetrics(store: TaskStore): string {
  const s = store.journalStats;
  if (!s) return '';
  const out: string[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, v: number) => out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${v}`);
  metric('swarm_journal_damaged_records', 'gauge', 'Damaged journal records set aside (quarantined) when the hub started.', store.damage.records);
  metric('swarm_journal_orphan_records', 'gauge', 'Intact results or failures whose task line was damaged, found when the hub started (kept, not dropped).', store.damage.orphans);
  metric('swarm_journal_legacy_records', 'gauge', 'Journal records without a checksum of their own, found when the hub started (accepted only before the first checksummed one).', store.legacyRecords);
  metric('swarm_journal_write_errors_total', 'counter', 'Journal writes that failed (nothing of them was kept).', s.write_errors);
  metric('swarm_journal_disk_full', 'gauge', '1 while the last journal write failed for want of space.', s.disk_full ? 1 : 0);
  metric('swarm_journal_segment_bytes', 'gauge', 'Bytes in the live journal segment.', s.segment_bytes);
  metric('swarm_journal_snapshot_bytes', 'gauge', 'Bytes in the last snapshot.', s.snapshot_bytes);
  metric('swarm_journal_compactions_total', 'counter', 'Compactions since the hub started.', s.compactions);
  const r = store.retention;
  metric('swarm_hot_finished_tasks', 'gauge', 'Finished tasks held in the hot state (memory, journal, replicas).', r.hot_finished);
  metric('swarm_hot_finished_bytes', 'gauge', 'Bytes of the finished tasks held hot, as the --retain bytes bound counts them (prompts, results, a fixed part per record).', r.hot_bytes);
  metric('swarm_retain_bytes', 'gauge', 'The --retain bytes bound: past it the oldest finished tasks move to the archive.', r.retain.bytes);
  metric('swarm_evicted_tasks_total', 'counter', 'Finished tasks moved to the results archive since the hub started.', r.evicted);
  if (r.archive) {
    metric('swarm_archive_bytes', 'gauge', 'Bytes in the results archive.', r.archive.bytes);
    metric('swarm_archive_write_errors_total', 'counter', 'Results archive writes that failed (the tasks stayed hot).', r.archive.write_errors);
    metric('swarm_archive_disk_full', 'gauge', '1 while the last results archive write failed for want of space.', r.archive.disk_full ? 1 : 0);
    metric('swarm_archive_files', 'gauge', 'Files in the results archive.', r.archive.files);
    metric('swarm_archive_max_bytes', 'gauge', 'The --archive-max bytes bound: past it the oldest archive files are removed (0: none).', r.archive.max_bytes);
    metric('swarm_archive_pruned_files_total', 'counter', 'Results archive files removed by --archive-max since the hub started.', r.archive.pruned_files);
    metric('swarm_archive_pruned_bytes_total', 'counter', 'Bytes of the results archive files removed by --archive-max since the hub started.', r.archive.pruned_bytes);
    metric('swarm_archive_prune_errors_total', 'counter', 'Results archive files that could not be removed or begun (the archive went on, over its bound meanwhile).', r.archive.prune_errors);
  }
  return out.join('\n') + '\n';
}
