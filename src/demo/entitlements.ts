/**
 * The demo's entitlement service as a long-running process (e.g. next to `billing.js` in the
 * docker-compose profile `demo`): consumes `invoice.paid` and extends access once per event.
 * Env: DATABASE_URL (or DATABASE_URL_FILE), DATABASE_PASSWORD(_FILE), KAFKA_BROKERS,
 * SCHEMA_REGISTRY_URL(_FILE) (with OUTBOX_FORMAT=avro, the default here), DEMO_TOPIC
 * (outbox.invoice), DEMO_GROUP (demo-entitlements), DEMO_PREFIX (demo).
 * Stops on SIGTERM / SIGINT.
 */
import { kafkajs } from '../kafka/kafkajs/kafkajs.js';
import { avroRegistryFromEnv, createIdempotentConsumer, ensureConsumedEventsTable, kafkaConfigFromEnv } from '../client/index.js';
import { demoPool } from './database.js';
import { createEntitlementSchema, entitlementTables, extendEntitlement } from './entitlement-service.js';

async function main(): Promise<void> {
  const env = process.env;
  const format = env.OUTBOX_FORMAT === 'json' ? 'json' : 'avro';
  if (format === 'avro' && !env.SCHEMA_REGISTRY_URL && !env.SCHEMA_REGISTRY_URL_FILE) throw new Error('SCHEMA_REGISTRY_URL is required for Avro (or set OUTBOX_FORMAT=json)');
  const tables = entitlementTables(env.DEMO_PREFIX ?? 'demo');
  const topic = env.DEMO_TOPIC ?? 'outbox.invoice';
  const pool = demoPool(env, 'demo-entitlements');
  await createEntitlementSchema(pool, tables);
  await ensureConsumedEventsTable(pool);
  const { Kafka, logLevel } = kafkajs();
  const consumer = createIdempotentConsumer({
    // The relay's own variables (KAFKA_SSL*, KAFKA_SASL*, SCHEMA_REGISTRY_*): the demo runs where the relay does.
    kafka: new Kafka({ clientId: 'demo-entitlements', ...kafkaConfigFromEnv(env), logLevel: logLevel.WARN }),
    groupId: env.DEMO_GROUP ?? 'demo-entitlements',
    topics: [topic],
    pool,
    handler: extendEntitlement(tables),
    format,
    ...(format === 'avro' ? { registry: avroRegistryFromEnv(env) } : {}),
    fromBeginning: true,
    onOutcome: (outcome, event) => process.stdout.write(`entitlements: ${outcome === 'applied' ? 'extended access for' : 'skipped duplicate of'} ${event.aggregateId} (event ${event.eventId})\n`),
  });
  await consumer.start();
  process.stdout.write(`entitlements: consuming ${topic}\n`);
  const stop = () => {
    void consumer.stop().finally(() => pool.end());
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`entitlements: ${(error as Error).message}\n`);
  process.exitCode = 1;
});
