import { Counter } from 'prom-client';
import { errorMessage, PoisonEventError, RelayError } from '../../errors.js';
import { readPem } from '../../security/pem.js';
import { compileTopicTemplate } from '../../transform/topic-router.js';
import { sleep } from '../../time.js';
import type { AvroOptions, EncoderContext } from '../create-encoder.js';
import type { PayloadEncoder } from '../encoder.js';
import { AvroEncoder } from './avro-encoder.js';
import { loadKeySchema } from './key-schema.js';
import { HttpSchemaRegistry } from './registry.js';
import { formatProblem, loadSchemaSet, type SchemaSet } from './schema-set.js';

/**
 * The Avro encoder: loads and compiles schemas/, then registers or looks
 * up every subject known before the first event. A registry that is down at start is waited
 * for (with backoff); an incompatible or missing schema fails the start, naming files and subjects.
 */
export async function createAvroEncoder(config: AvroOptions, context: EncoderContext): Promise<PayloadEncoder> {
  const logger = context.logger.child({ stage: 'encode' });
  const schemas = await loadSchemas(config.schemasDir);
  const keySchema = config.keySchema ? await loadKeySchema(config.keySchema) : null;
  if (keySchema && !keySchema.fullName && config.subjectStrategy !== 'topic') {
    throw new RelayError('CONFIG_INVALID', `invalid configuration: OUTBOX_SUBJECT_STRATEGY=${config.subjectStrategy} needs a named key schema (a record), but ${keySchema.file} is a plain string`);
  }
  const requests = new Counter({
    name: 'outbox_relay_schema_registry_requests_total',
    help: 'Requests to the schema registry, by operation (register, lookup) and outcome (ok, error). Steady state: none.',
    labelNames: ['operation', 'outcome'],
    registers: context.metricsRegistry ? [context.metricsRegistry] : [],
  });
  const { registry: access } = config;
  const registry = new HttpSchemaRegistry({
    url: access.url.reveal(),
    auth: access.auth,
    ca: access.caFile ? readPem('SCHEMA_REGISTRY_CA_FILE', access.caFile) : null,
    onRequest: (operation, outcome) => requests.inc({ operation, outcome }),
  });
  const encoder = new AvroEncoder({
    schemas: schemas.byEventType,
    schemasDir: config.schemasDir,
    registry,
    strategy: config.subjectStrategy,
    autoRegister: config.autoRegister,
    keySchema,
    logger,
  });
  const sharedTopics = config.topicTemplates.filter((template) => !template.includes('{event_type}'));
  if (config.subjectStrategy === 'topic' && sharedTopics.length > 0 && schemas.byEventType.size > 1) {
    logger.warn({ topicTemplates: sharedTopics },
      'subject strategy "topic" gives one subject per topic, but the topic template can put several event types on one topic: the registry will refuse the second schema as incompatible. Use OUTBOX_SUBJECT_STRATEGY=topic-record or record, or {event_type} in the topic template');
  }
  const topicFor = knownTopics(config.topicTemplates);
  let delay = config.retryMinMs;
  for (;;) {
    try {
      const resolved = await encoder.prepare(topicFor);
      logger.info({ schemas: schemas.byEventType.size, resolvedAtStart: resolved, strategy: config.subjectStrategy, autoRegister: config.autoRegister, registry: registry.location }, 'avro encoder ready');
      return encoder;
    } catch (error) {
      if (!(error instanceof RelayError) || !error.retriable || context.signal?.aborted) throw error;
      logger.warn({ code: error.code, err: errorMessage(error), retryInMs: delay }, 'schema registry unavailable at start; retrying');
      await sleep(delay, context.signal);
      delay = Math.min(delay * 2, config.retryMaxMs);
    }
  }
}

/** Loads schemas/ and refuses to start on any problem, listing them all. */
export async function loadSchemas(dir: string): Promise<SchemaSet> {
  let schemas: SchemaSet;
  try {
    schemas = await loadSchemaSet(dir);
  } catch (error) {
    throw new RelayError('CONFIG_INVALID', `invalid configuration: OUTBOX_SCHEMAS_DIR=${JSON.stringify(dir)} cannot be read: ${errorMessage(error)}`, { cause: error });
  }
  if (schemas.problems.length > 0) {
    throw new RelayError('SCHEMA_INVALID', `${schemas.problems.length} problem(s) in ${dir} (run \`outbox-relay schemas check\`):\n  - ${schemas.problems.map(formatProblem).join('\n  - ')}`);
  }
  if (schemas.byEventType.size === 0) throw new RelayError('SCHEMA_INVALID', `no .avsc schema under ${dir}`);
  return schemas;
}

/** An event type's topics, by the templates that do not depend on the aggregate type. */
function knownTopics(templates: readonly string[]): (eventType: string) => string[] {
  const routes = [...new Set(templates)].filter((template) => !template.includes('{aggregate_type}')).map(compileTopicTemplate);
  return (eventType) => {
    const topics = new Set<string>();
    for (const route of routes) {
      try {
        topics.add(route({ eventId: '', aggregateType: '', aggregateId: '', eventType, payload: null, headers: {}, createdAt: null }));
      } catch (error) {
        if (!(error instanceof PoisonEventError)) throw error;
      }
    }
    return [...topics];
  };
}
