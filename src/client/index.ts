/**
 * The application side of the transactional outbox (`outbox-relay/client`):
 * write events in your own transaction, consume them effectively-once.
 */
export { writeOutboxEvent, writeOutboxEvents, createOutboxWriter, type OutboxEventInput, type OutboxWriterOptions, type Queryable } from './writer.js';
export { deterministicEventId, uuidV5, OUTBOX_EVENT_ID_NAMESPACE } from './event-id.js';
export { loadOutboxSchemas, type SchemaSet } from './schemas.js';
export { traceparentProblem } from './trace-context.js';
export {
  createIdempotentConsumer,
  applyOnce,
  decodeOutboxRecord,
  avroRegistry,
  type ConsumedEvent,
  type ConsumeOutcome,
  type EventHandler,
  type IdempotentConsumer,
  type IdempotentConsumerOptions,
} from './consumer.js';
export { ensureConsumedEventsTable, claimEvent, pruneConsumedEvents, type PruneConsumedEventsOptions } from './consumed-events.js';
export { OutboxClientError, type ClientErrorCode } from './errors.js';
export { kafkaConfigFromEnv, avroRegistryFromEnv } from './connections.js';
export { repairHeaders, headerText } from './kafkajs-headers.js';
