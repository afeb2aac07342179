import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AttemptOutcome } from './http-sender.js';
import type { StoreGauges } from './delivery-queries.js';

export const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = ['delivered', 'http_status', 'redirect', 'timeout', 'connect', 'refused_address', 'network'];

/**
 * Counters are this process's; the store's gauges (pending, failed, circuits, disabled) are
 * read from Postgres and are the same in every process: alert on max() of them, sum() the counters.
 */
export function createWebhookMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const metrics = {
    registry,
    eventsConsumed: new Counter({ name: 'outbox_webhook_events_consumed_total', help: 'Outbox events read from Kafka by this process.', registers }),
    undecodable: new Counter({ name: 'outbox_webhook_undecodable_records_total', help: 'Records on the webhook topics that are not outbox events (skipped; they stay in Kafka).', registers }),
    eventsWithoutCustomer: new Counter({ name: 'outbox_webhook_events_without_customer_total', help: "Events read by this process whose customer OUTBOX_WEBHOOK_CUSTOMER_FROM could not find (delivered to no customer's endpoint; a re-read counts again).", registers }),
    deliveriesRecorded: new Counter({ name: 'outbox_webhook_deliveries_recorded_total', help: 'Deliveries (event, endpoint) recorded by this process.', registers }),
    deliveries: new Counter({ name: 'outbox_webhook_deliveries_total', help: 'Deliveries finished by this process, by outcome: delivered, or failed (every attempt of the schedule failed).', labelNames: ['outcome'] as const, registers }),
    attempts: new Counter({ name: 'outbox_webhook_attempts_total', help: 'Attempts by outcome (delivered, http_status, redirect, timeout, connect, refused_address, network).', labelNames: ['outcome'] as const, registers }),
    attemptSeconds: new Histogram({
      name: 'outbox_webhook_attempt_duration_seconds',
      help: 'Duration of each attempt, connecting included, by outcome.',
      labelNames: ['outcome'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    firstAttemptDelay: new Histogram({
      name: 'outbox_webhook_first_attempt_delay_seconds',
      help: "From the event's Kafka timestamp to the start of its first attempt.",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    endpointsDisabled: new Counter({ name: 'outbox_webhook_endpoints_disabled_total', help: 'Endpoints this process disabled, by reason (gone: 410; failing: longer than OUTBOX_WEBHOOK_DISABLE_AFTER).', labelNames: ['reason'] as const, registers }),
    circuitsOpened: new Counter({ name: 'outbox_webhook_circuits_opened_total', help: "Endpoint circuits this process opened.", registers }),
    heldBack: new Counter({ name: 'outbox_webhook_held_back_total', help: "Deliveries the endpoint gate did not let go, by why (paused: a Retry-After or an open circuit; disabled: a 410 or failing too long): due again when it reopens, no attempt counted.", labelNames: ['reason'] as const, registers }),
    pending: new Gauge({ name: 'outbox_webhook_pending_deliveries', help: 'Deliveries not yet delivered or failed (the store, all processes).', registers }),
    failed: new Gauge({ name: 'outbox_webhook_failed_deliveries', help: 'Deliveries whose every attempt failed and that were not replayed (the store).', registers }),
    oldestPending: new Gauge({ name: 'outbox_webhook_oldest_pending_seconds', help: 'Age of the oldest pending delivery, per endpoint (the 50 oldest endpoints).', labelNames: ['endpoint'] as const, registers }),
    withoutCustomer: new Gauge({ name: 'outbox_webhook_events_without_customer', help: "Events whose customer was not found, waiting for `webhooks replay --without-customer` (the store).", registers }),
    openCircuits: new Gauge({ name: 'outbox_webhook_open_circuits', help: 'Endpoints whose circuit is open now.', registers }),
    disabledEndpoints: new Gauge({ name: 'outbox_webhook_disabled_endpoints', help: 'Endpoints disabled (by an operator, a 410, or failing too long); their deliveries are held.', registers }),
    storeBytes: new Gauge({ name: 'outbox_webhook_store_bytes', help: 'Size of the events, events_without_customer, deliveries and attempts tables with their indexes.', registers }),
    lastStoreRead: new Gauge({ name: 'outbox_webhook_store_read_timestamp_seconds', help: "When this process last read the store's gauges.", registers }),
  };
  for (const outcome of ATTEMPT_OUTCOMES) metrics.attempts.inc({ outcome }, 0);
  for (const outcome of ['delivered', 'failed']) metrics.deliveries.inc({ outcome }, 0);
  for (const reason of ['gone', 'failing']) metrics.endpointsDisabled.inc({ reason }, 0);
  for (const reason of ['paused', 'disabled']) metrics.heldBack.inc({ reason }, 0);
  return metrics;
}

export type WebhookMetrics = ReturnType<typeof createWebhookMetrics>;

export function showStoreGauges(metrics: WebhookMetrics, gauges: StoreGauges, at: Date): void {
  metrics.pending.set(gauges.pending);
  metrics.failed.set(gauges.failed);
  metrics.withoutCustomer.set(gauges.withoutCustomer);
  metrics.openCircuits.set(gauges.openCircuits);
  metrics.disabledEndpoints.set(gauges.disabledEndpoints);
  metrics.storeBytes.set(gauges.storeBytes);
  // Endpoints that caught up drop out of the series instead of reporting a stale age.
  metrics.oldestPending.reset();
  for (const { endpointId, ageSeconds } of gauges.oldestPending) metrics.oldestPending.set({ endpoint: endpointId }, ageSeconds);
  metrics.lastStoreRead.set(at.getTime() / 1000);
}
