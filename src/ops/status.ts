import pg from 'pg';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import { readSlot, type SlotReport } from '../observe/slot-monitor.js';
import { readStandbyCopies, type StandbyCopy } from '../observe/standby-copies.js';
import type { KafkaSecurity } from '../security/kafka-security.js';
import { countTopicRecords } from '../kafka/open.js';
import type { KafkaClientName } from '../kafka/ports.js';
import { findTables, type TableByAge } from '../setup/outbox-tables.js';
import { findQuarantined, type SetupTarget } from '../setup/setup.js';
import { qualifiedName } from '../outboxes.js';
import { onSlotServer, type SlotServer } from '../slot-server.js';
import { formatDuration, slotOutageBudget } from '../observe/outage-budget.js';
import { readReplayDelayOnce, type ReplayDelay } from '../observe/replay-delay.js';

export interface StatusInput {
  readonly database: DatabaseAccess;
  /** Where the slot is read: the primary, or OUTBOX_REPLICA_URL's standby. */
  readonly slotServer: SlotServer;
  readonly slot: string;
  readonly publication: string;
  /** Every outbox table, with the column its rows' age is read from. */
  readonly tables: readonly TableByAge[];
  /** The outboxes with their column maps: which tables the relay cannot stream. */
  readonly outboxes: SetupTarget;
  readonly kafkaBrokers: readonly string[] | null;
  readonly kafkaClient: KafkaClientName;
  readonly kafkaSecurity: KafkaSecurity;
  readonly deadLetterTopic: string;
}

export interface StatusReport {
  readonly slot: SlotReport;
  /** Where the slot is: the primary, a standby (OUTBOX_REPLICA_URL), or that standby promoted. */
  readonly slotServer: 'primary' | 'standby' | 'promoted standby';
  /** How long every reader may be down before Postgres may invalidate the slot (outage-budget.ts); null: unbounded. */
  readonly outageBudgetSeconds: number | null;
  /** The primary's WAL rate the budget was computed with: its average since pg_stat_wal was reset. */
  readonly walBytesPerSecond: number | null;
  /**
   * Each host of a several-host DATABASE_URL and its copy of the slot; empty for one host; null
   * with the slot on OUTBOX_REPLICA_URL: a standby's own slot, of which no server keeps a copy.
   */
  readonly standbys: readonly StandbyCopy[] | null;
  /** How far the slot's standby is behind DATABASE_URL's primary; null when the slot's server is no standby (a primary, or promoted). */
  readonly replayDelay: ReplayDelay | null;
  readonly publication: { readonly name: string; readonly exists: boolean };
  /** Each outbox table: rows retained, the oldest one's age, its size. */
  readonly outboxes: readonly { readonly table: string; readonly rows: number; readonly oldestRowAgeSeconds: number | null; readonly totalBytes: number }[];
  /** Outbox tables the relay cannot stream (a tenant's quarantined, a named one refused), with the reason. */
  readonly quarantined: readonly { readonly table: string; readonly reason: string }[];
  /** Records in the dead-letter topic, or why it could not be read. */
  readonly deadLetters: { readonly topic: string; readonly count: number | null; readonly error?: string };
}

/** Everything an operator asks first, read from Postgres (and Kafka for the dead letters). */
export async function readStatus(input: StatusInput): Promise<StatusReport> {
  const client = await connectPostgres(input.database, 'outbox-relay-status');
  try {
    const slot = await onSlotServer(input.slotServer, client, (slotClient) => readSlot(slotClient, input.slot), 'outbox-relay-status');
    const publication = await client.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [input.publication]);
    const outboxes: StatusReport['outboxes'][number][] = [];
    for (const { table: relation, createdAtColumn } of await findTables(client, input.tables)) {
      const table = `${pg.escapeIdentifier(relation.schema)}.${pg.escapeIdentifier(relation.name)}`;
      const { rows } = await client.query<{ rows: string; age: number | null; bytes: string }>(
        `SELECT count(*)::text AS rows, extract(epoch FROM now() - min(${pg.escapeIdentifier(createdAtColumn)}))::float8 AS age,
                pg_total_relation_size(${pg.escapeLiteral(table)})::text AS bytes FROM ${table}`,
      );
      const row = rows[0]!;
      outboxes.push({ table: qualifiedName(relation), rows: Number(row.rows), oldestRowAgeSeconds: row.age, totalBytes: Number(row.bytes) });
    }
    const walBytesPerSecond = await averageWalRate(client);
    const replayDelay = slot.onStandby ? await onSlotServer(input.slotServer, client, (standby) => readReplayDelayOnce(client, standby), 'outbox-relay-status') : null;
    return {
      slot,
      outageBudgetSeconds: slotOutageBudget(slot, walBytesPerSecond),
      walBytesPerSecond,
      slotServer: !input.slotServer.standby ? 'primary' : slot.onStandby ? 'standby' : 'promoted standby',
      // A standby's own slot is no failover slot, and stays on it through its promotion:
      // DATABASE_URL's hosts are the primary it replays (gone after the promotion), no copies.
      standbys: input.slotServer.standby ? null : await readStandbyCopies(input.database, input.slot),
      replayDelay,
      publication: { name: input.publication, exists: publication.rows.length > 0 },
      outboxes,
      quarantined: [...(await findQuarantined(input.outboxes))].map(([table, reason]) => ({ table, reason })),
      deadLetters: await countDeadLetters(input),
    };
  } finally {
    await client.end();
  }
}

/** The primary's WAL bytes per second since its WAL statistics were last reset (pg_stat_wal, 14+): an outage's rate, roughly. */
async function averageWalRate(client: pg.Client): Promise<number | null> {
  const { rows } = await client.query<{ rate: number | null }>('SELECT wal_bytes::float8 / greatest(extract(epoch FROM now() - stats_reset)::float8, 1) AS rate FROM pg_stat_wal');
  return rows[0]?.rate ?? null;
}

const SLOT_SERVERS: Record<StatusReport['slotServer'], string> = {
  primary: 'the primary (DATABASE_URL)',
  standby: 'a standby (OUTBOX_REPLICA_URL): lag is measured against what it has replayed',
  'promoted standby': 'OUTBOX_REPLICA_URL, promoted: a primary now, read on as one (point DATABASE_URL at it too)',
};

async function countDeadLetters(input: StatusInput): Promise<StatusReport['deadLetters']> {
  const topic = input.deadLetterTopic;
  if (!input.kafkaBrokers) return { topic, count: null, error: 'KAFKA_BROKERS not set' };
  try {
    return { topic, count: await countTopicRecords(input.kafkaClient, input.kafkaBrokers, topic, input.kafkaSecurity) };
  } catch (error) {
    return { topic, count: null, error: (error as Error).message };
  }
}

/** The standby's delay behind the primary's commits: what the slot's lag, measured against what the standby replayed, does not show. */
function formatReplayDelay(delay: ReplayDelay | null, bytes: (value: number) => string, seconds: (value: number) => string): string {
  if (delay === null) return 'none: OUTBOX_REPLICA_URL is a primary now (promoted), it replays nothing';
  const paused = delay.paused ? '; replay is paused on the standby (SELECT pg_wal_replay_resume() there)' : '';
  if (delay.seconds === 0) return `none: the standby has replayed every commit of the primary${delay.bytes > 0 ? ` (not yet ${bytes(delay.bytes)} of WAL without one)` : ''}${paused}`;
  return `${bytes(delay.bytes)} and ${seconds(delay.seconds)} behind the primary's commits${paused}: the relay reads them only once the standby replays them`;
}

export function formatStatus(report: StatusReport): string {
  const { slot } = report;
  const bytes = (value: number | null) => (value === null ? '-' : value < 1024 ? `${value} B` : value < 1 << 20 ? `${(value / 1024).toFixed(1)} KiB` : `${(value / (1 << 20)).toFixed(1)} MiB`);
  const seconds = (value: number | null) => (value === null ? '-' : `${value.toFixed(1)} s`);
  const rows: [string, string][] = [
    ['slot', slot.exists ? slot.slot : `${slot.slot} (MISSING: run outbox-relay setup)`],
    ['slot server', SLOT_SERVERS[report.slotServer]],
    ['active reader', slot.reader ? `pid ${slot.activePid} ${slot.reader.applicationName} ${slot.reader.clientAddress ?? 'local'} since ${slot.reader.since.toISOString()}` : 'none'],
    ['confirmed flush lsn', slot.confirmedFlushLsn ?? '-'],
    ['current wal lsn', slot.currentWalLsn],
    ['lag', `${bytes(slot.lagBytes)} (flush lag ${seconds(slot.flushLagSeconds)})`],
    ['wal status', slot.walStatus ?? '-'],
    ['failover', slot.failover === null ? (slot.exists ? 'no (Postgres before 17)' : '-') : `${slot.failover ? 'yes' : 'no'}${slot.synced ? ' (this slot was synchronized from a primary: this server was promoted)' : ''}`],
    ['standby copies', report.standbys === null ? "none to expect: the slot is OUTBOX_REPLICA_URL's standby's own (Postgres copies only a primary's failover slots to standbys; this one stays on its standby through a promotion)" : report.standbys.length === 0 ? "unknown: DATABASE_URL names one host (on the standby: SELECT synced, temporary FROM pg_replication_slots)" : report.standbys.filter((copy) => copy.state !== 'primary').map((copy) => `${copy.host} ${copy.state}${copy.confirmedFlushLsn ? ` at ${copy.confirmedFlushLsn}` : ''}`).join(', ') || 'none'],
    ...(report.slotServer === 'primary' ? [] : [['replay delay', formatReplayDelay(report.replayDelay, bytes, seconds)] as [string, string]]),
    ['idle timeout', slot.idleTimeoutSeconds === null ? 'none (idle_replication_slot_timeout off, or before Postgres 18)' : `${formatDuration(slot.idleTimeoutSeconds)}: Postgres invalidates the slot once it has been unread that long (idle_replication_slot_timeout)${slot.inactiveSince ? `; unread since ${slot.inactiveSince.toISOString()}` : ''}`],
    ['outage budget', report.outageBudgetSeconds === null ? 'unbounded: neither idle_replication_slot_timeout nor max_slot_wal_keep_size can invalidate the slot' : `${formatDuration(report.outageBudgetSeconds)}: a longer outage of every relay may lose the slot (the first of the idle timeout and safe wal size at ${bytes(report.walBytesPerSecond === null ? null : Math.round(report.walBytesPerSecond))}/s of WAL, the primary's average)`],
    ['safe wal size', !slot.exists ? '-' : slot.walStatus === 'lost' ? 'none: the slot is lost (see `outbox-relay run` for how to recover)' : slot.safeWalSizeBytes === null ? 'unlimited' : bytes(slot.safeWalSizeBytes)],
    ['publication', `${report.publication.name}${report.publication.exists ? '' : ' (MISSING)'}`],
    ...report.outboxes.map((outbox): [string, string] => ['outbox', `${outbox.table}: ${outbox.rows} rows, ${bytes(outbox.totalBytes)}, oldest ${seconds(outbox.oldestRowAgeSeconds)} old`]),
    ...report.quarantined.map((entry): [string, string] => ['quarantined', `${entry.table}: ${entry.reason}`]),
    ['dead letters', report.deadLetters.count === null ? `unknown (${report.deadLetters.error})` : `${report.deadLetters.count} in ${report.deadLetters.topic}`],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  return rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`).join('\n') + '\n';
}
