import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type RelayState = 'starting' | 'standby' | 'active' | 'draining' | 'stopped';
export const RELAY_STATES: readonly RelayState[] = ['starting', 'standby', 'active', 'draining', 'stopped'];

/**
 * The relay's Prometheus metrics, one registry per process (tests create their own).
 * Names follow Prometheus conventions: counters end in _total, units in the name.
 */
export function createRelayMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    published: new Counter({ name: 'outbox_relay_events_published_total', help: 'Events acknowledged by Kafka, by topic and event type.', labelNames: ['topic', 'event_type'], registers }),
    deadLettered: new Counter({ name: 'outbox_relay_events_dead_lettered_total', help: 'Poison events sent to the dead-letter topic, by reason code.', labelNames: ['reason'], registers }),
    bytesOut: new Counter({ name: 'outbox_relay_bytes_out_total', help: 'Record value bytes acknowledged by Kafka.', registers }),
    inFlight: new Gauge({ name: 'outbox_relay_in_flight_events', help: 'Events handed to Kafka and not yet acknowledged.', registers }),
    reconnects: new Counter({ name: 'outbox_relay_reconnects_total', help: 'Stream restarts after a lost connection or a failed publish.', labelNames: ['reason'], registers }),
    state: new Gauge({ name: 'outbox_relay_state', help: 'Relay state: 1 for the current one.', labelNames: ['state'], registers }),
    confirmedLsn: new Gauge({ name: 'outbox_relay_confirmed_lsn_bytes', help: 'Position last confirmed to Postgres, as a byte offset in the WAL.', registers }),
    lagSeconds: new Gauge({ name: 'outbox_relay_lag_seconds', help: 'Now minus the commit time of the oldest event not yet acknowledged; 0 when caught up.', registers }),
    commitToAck: new Histogram({
      name: 'outbox_relay_commit_to_ack_seconds',
      help: 'From the Postgres commit to the Kafka acknowledgement, per event.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
  };
}

export type RelayMetrics = ReturnType<typeof createRelayMetrics>;

export function setState(metrics: RelayMetrics, state: RelayState): void {
  for (const each of RELAY_STATES) metrics.state.set({ state: each }, each === state ? 1 : 0);
}
