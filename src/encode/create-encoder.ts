import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { SubjectStrategy } from './avro/subjects.js';
import type { PayloadEncoder } from './encoder.js';
import { JsonEncoder } from './json-encoder.js';
import { RelayError } from '../errors.js';
import type { PayloadFormat } from '../outboxes.js';
import type { Secret } from '../security/secret.js';

/** JSON needs nothing more; Avro, when any outbox is Avro, its schemas and the registry (a key schema only with Avro). */
export interface EncoderOptions {
  readonly avro: AvroOptions | null;
}

export interface AvroOptions {
  readonly registry: RegistryAccess;
  readonly schemasDir: string;
  readonly subjectStrategy: SubjectStrategy;
  readonly autoRegister: boolean;
  /** The key schema's file; null: the key is the aggregate id as a UTF-8 string. */
  readonly keySchema: string | null;
  /** Every Avro outbox's topic template ({schema} and {table} filled in): the topics whose subjects are resolved at start. */
  readonly topicTemplates: readonly string[];
  /** Backoff while the registry is down at start. */
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
}

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

/** The encoders of the configured outboxes, by format: each outbox's events go through its own (OutboxRoute.encoder). */
export interface PayloadEncoders {
  of(format: PayloadFormat): PayloadEncoder;
  /** The formats there are encoders for, for the start-up log. */
  readonly formats: readonly PayloadFormat[];
}

/**
 * JSON's encoder, and Avro's when an outbox is Avro. The Avro half (avsc, schemas, the registry
 * client) is loaded only then: a JSON relay does not carry its ~10 MB of memory.
 */
export async function createEncoders(config: EncoderOptions, context: EncoderContext): Promise<PayloadEncoders> {
  const json = new JsonEncoder();
  const avro = config.avro && (await import('./avro/create-avro-encoder.js').then(({ createAvroEncoder }) => createAvroEncoder(config.avro!, context)));
  return {
    formats: avro ? ['json', 'avro'] : ['json'],
    of: (format) => {
      if (format === 'json') return json;
      // Never without one: encoderOptions makes Avro's whenever an outbox is Avro.
      if (!avro) throw new RelayError('CONFIG_INVALID', 'an Avro outbox without the Avro encoder: OUTBOX_FORMAT or its OUTBOX_SOURCES entry says avro, and the encoder was not made');
      return avro;
    },
  };
}
