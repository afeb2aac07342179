import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { errorMessage, PoisonEventError, RelayError } from '../errors.js';
import { compileTopicTemplate } from '../sink/topic-router.js';
import { AvroEncoder } from './avro/avro-encoder.js';
import { loadKeySchema } from './avro/key-schema.js';
import { HttpSchemaRegistry } from './avro/registry.js';
import { formatProblem, loadSchemaSet, type SchemaSet } from './avro/schema-set.js';
import type { SubjectStrategy } from './avro/subjects.js';
import type { PayloadEncoder } from './encoder.js';
import { JsonEncoder } from './json-encoder.js';
import { sleep } from '../time.js';
import { readPem } from '../security/pem.js';
import type { Secret } from '../security/secret.js';

/** JSON needs nothing more; Avro its schemas and the registry (a key schema only with Avro). */
export type EncoderOptions =
  | { readonly format: 'json' }
  | {
      readonly format: 'avro';
      readonly registry: RegistryAccess;
      readonly schemasDir: string;
      readonly subjectStrategy: SubjectStrategy;
      readonly autoRegister: boolean;
      /** The key schema's file; null: the key is the aggregate id as a UTF-8 string. */
      readonly keySchema: string | null;
      /** Where events go, to resolve every subject whose topic is known before the first event. */
      readonly topicTemplate: string;
      /** Backoff while the registry is down at start. */
      readonly retryMinMs: number;
      readonly retryMaxMs: number;
    };

/** The schema registry: its URL (may hold user:password@), basic auth apart from it, a CA for https. */
export interface RegistryAccess {
  readonly url: Secret;
  readonly auth: { readonly username: string; readonly password: Secret } | null;
  /** PEM file of extra CAs to trust. */
  readonly caFile: string | null;
}

export interface EncoderContext {
  readonly logger: Logger;
  /** Where the encoder's own metrics go (the relay's registry). */
  readonly metricsRegistry?: Registry;
  /** Stops the start-up retries (SIGTERM while the registry is down). */
  readonly signal?: AbortSignal;
}

/**
 * The encoder for `config.format`. For Avro: loads and compiles schemas/, then registers or looks
 * up every subject known before the first event. A registry that is down at start is waited
 * for (with backoff); an incompatible or missing schema fails the start, naming files and subjects.
 */
export async function createEncoder(config: EncoderOptions, context: EncoderContext): Promise<PayloadEncoder> {
  if (config.format === 'json') return new JsonEncoder();
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
  if (config.subjectStrategy === 'topic' && !config.topicTemplate.includes('{event_type}') && schemas.byEventType.size > 1) {
    logger.warn({ topicTemplate: config.topicTemplate },
      'subject strategy "topic" gives one subject per topic, but the topic template can put several event types on one topic: the registry will refuse the second schema as incompatible. Use OUTBOX_SUBJECT_STRATEGY=topic-record or record, or {event_type} in the topic template');
  }
  const topicFor = knownTopics(config.topicTemplate);
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

/** An event type's topic, when the template does not depend on the aggregate type. */
function knownTopics(template: string): (eventType: string) => string | null {
  if (template.includes('{aggregate_type}')) return () => null;
  const route = compileTopicTemplate(template);
  return (eventType) => {
    try {
      return route({ eventId: '', aggregateType: '', aggregateId: '', eventType, payload: null, headers: {}, createdAt: null });
    } catch (error) {
      if (error instanceof PoisonEventError) return null;
      throw error;
    }
  };
}
