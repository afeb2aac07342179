import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { codesWhere } from '../errors.js';
import { RELAY_STATES, type RelayState } from '../relay-state.js';

/** Postgres's wal_status values, and `missing` for a slot that does not exist (dropped, or not on this server after a failover). */
export const WAL_STATUSES = ['reserved', 'extended', 'unreserved', 'lost', 'missing'] as const;

/**
 * The relay's Prometheus metrics, one registry per process. Names follow Prometheus
 * conventions: counters end in _total, units in the name. deploy/ alerts and the Grafana
 * dashboard use these names; scripts/validate-deploy.sh checks they exist.
 */
export function createRelayMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    published: new Counter({ name: 'outbox_relay_events_published_total', help: 'Events acknowledged by Kafka, by topic, event type and outbox (as declared: a table, a pattern of tenant tables, or message:<prefix>).', labelNames: ['topic', 'event_type', 'outbox'], registers }),
    quarantinedTables: new Gauge({ name: 'outbox_relay_outbox_table_quarantined', help: "1 for an outbox table the relay cannot publish (a tenant's table lacking a mapped column, or with a payload type it cannot publish, or missing from the publication): its rows are dead letters (OUTBOX_TABLE_QUARANTINED) while every other outbox streams on; 0 once fixed. Found at start and whenever the stream describes the table anew.", labelNames: ['table'], registers }),
    deadLettered: new Counter({ name: 'outbox_relay_events_dead_lettered_total', help: 'Poison events sent to the dead-letter topic, by reason code.', labelNames: ['reason'], registers }),
    produceRequests: new Counter({ name: 'outbox_relay_produce_requests_total', help: 'Produce requests acknowledged by Kafka (events per request: published / this).', registers }),
    produceErrors: new Counter({ name: 'outbox_relay_produce_errors_total', help: 'Produce requests Kafka refused or did not answer, by Kafka error (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, ...); their partitions are sent again.', labelNames: ['error'], registers }),
    bytesOut: new Counter({ name: 'outbox_relay_bytes_out_total', help: 'Record bytes (key, value, headers, record framing) acknowledged by Kafka.', registers }),
    inFlight: new Gauge({ name: 'outbox_relay_in_flight_events', help: 'Events handed to Kafka and not yet acknowledged.', registers }),
    reconnects: new Counter({ name: 'outbox_relay_reconnects_total', help: 'Stream restarts after a lost connection or a failed publish, by error code.', labelNames: ['reason'], registers }),
    state: new Gauge({ name: 'outbox_relay_state', help: 'Relay state: 1 for the current one.', labelNames: ['state'], registers }),
    confirmedLsn: new Gauge({ name: 'outbox_relay_confirmed_lsn_bytes', help: 'Position last confirmed to Postgres, as a byte offset in the WAL.', registers }),
    stalledSeconds: new Gauge({ name: 'outbox_relay_stalled_seconds', help: 'How long events have waited with no position confirmed (Kafka not acknowledging, a stream that stopped); 0 when none wait. Above OUTBOX_STALL_TIMEOUT, /healthz fails.', registers }),
    sourceSilentSeconds: new Gauge({ name: 'outbox_relay_source_silent_seconds', help: 'How long nothing (no data, no keepalive) came from Postgres on the replication connection; 0 for a standby.', registers }),
    lagSeconds: new Gauge({ name: 'outbox_relay_lag_seconds', help: 'Now minus the commit time of the oldest event not yet acknowledged; 0 when caught up.', registers }),
    commitToAck: new Histogram({
      name: 'outbox_relay_commit_to_ack_seconds',
      help: 'From the Postgres commit to the Kafka acknowledgement, per event.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    slotLagBytes: new Gauge({ name: 'outbox_relay_slot_lag_bytes', help: "The server's WAL position (pg_current_wal_lsn(), or on a standby pg_last_wal_replay_lsn()) minus the slot's confirmed_flush_lsn: WAL the slot holds.", registers }),
    slotActive: new Gauge({ name: 'outbox_relay_slot_active', help: '1 when a reader is streaming from the slot.', registers }),
    slotIdleTimeout: new Gauge({ name: 'outbox_relay_slot_idle_timeout_seconds', help: 'idle_replication_slot_timeout (Postgres 18): a slot unread this long is invalidated at the next checkpoint; -1 when off or before 18.', registers }),
    walRate: new Gauge({ name: 'outbox_relay_wal_bytes_per_second', help: "WAL the slot's server writes (on a standby: replays) per second, a moving average over the slot polls.", registers }),
    slotOutageBudget: new Gauge({ name: 'outbox_relay_slot_outage_budget_seconds', help: 'How long the slot can go unread before Postgres may invalidate it: the first of idle_replication_slot_timeout (what is left of it) and safe_wal_size at the current WAL rate; -1 when nothing bounds it.', registers }),
    slotOnStandby: new Gauge({ name: 'outbox_relay_slot_on_standby', help: "1 when the slot's server is a standby in recovery (OUTBOX_REPLICA_URL); 0 on a primary, a promoted standby included.", registers }),
    slotWalStatus: new Gauge({ name: 'outbox_relay_slot_wal_status', help: "The slot's wal_status: 1 for the current one (unreserved or lost: the slot is about to be, or was, invalidated).", labelNames: ['status'], registers }),
    slotSafeWalSize: new Gauge({ name: 'outbox_relay_slot_safe_wal_size_bytes', help: 'WAL that can still be written before max_slot_wal_keep_size invalidates the slot; -1 when unlimited.', registers }),
    slotFailover: new Gauge({ name: 'outbox_relay_slot_failover', help: 'Whether the slot is a failover slot (Postgres 17+: standbys with sync_replication_slots keep a copy that a promotion streams from): 1 yes, 0 no, -1 unknown (a server before 17, or no slot).', registers }),
    slotSyncedStandbys: new Gauge({ name: 'outbox_relay_slot_synced_standbys', help: "Standbys among DATABASE_URL's other hosts holding a synchronized copy of the slot that a promotion can stream from; -1 when there is no copy to expect: DATABASE_URL names one host (look on the standby: docs/operations.md#postgres-failover), or the slot is OUTBOX_REPLICA_URL's (a standby's own slot, kept through its promotion).", registers }),
    sourceReplayDelayBytes: new Gauge({ name: 'outbox_relay_source_replay_delay_bytes', help: "With the slot on a standby (OUTBOX_REPLICA_URL): the primary's flushed WAL position minus the standby's replay position, WAL the relay cannot read yet; 0 on a primary, -1 when the primary cannot be read.", registers }),
    sourceReplayDelaySeconds: new Gauge({ name: 'outbox_relay_source_replay_delay_seconds', help: "With the slot on a standby (OUTBOX_REPLICA_URL): how long the oldest commit of the primary the standby has not replayed has waited (the relay cannot read it before); 0 when it replayed every completed transaction, on a primary too; -1 when the primary cannot be read.", registers }),
  };
}

export type RelayMetrics = ReturnType<typeof createRelayMetrics>;


/**
 * Counters with a reason label exist from the start at 0 for every known reason, so that
 * `increase()` in an alert sees the first dead letter or reconnect, not only the second.
 */
export function initReasons(metrics: RelayMetrics): void {
  for (const reason of codesWhere('poison')) metrics.deadLettered.inc({ reason }, 0);
  // A busy slot makes a standby, not a reconnect.
  for (const reason of codesWhere('retriable')) if (reason !== 'SOURCE_SLOT_BUSY') metrics.reconnects.inc({ reason }, 0);
}

export function setState(metrics: RelayMetrics, state: RelayState): void {
  for (const each of RELAY_STATES) metrics.state.set({ state: each }, each === state ? 1 : 0);
}
