import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { SubjectStrategy } from './avro/subjects.js';
import type { PayloadEncoder } from './encoder.js';
import { JsonEncoder } from './json-encoder.js';
import type { Secret } from '../security/secret.js';

/** JSON needs nothing more; Avro its schemas and the registry (a key schema only with Avro). */
export type EncoderOptions = { readonly format: 'json' } | AvroOptions;

export interface AvroOptions {
  readonly format: 'avro';
  readonly registry: RegistryAccess;
  readonly schemasDir: string;
  readonly subjectStrategy: SubjectStrategy;
  readonly autoRegister: boolean;
  /** The key schema's file; null: the key is the aggregate id as a UTF-8 string. */
  readonly keySchema: string | null;
  /** Where events go, to resolve every subject whose topic is known before the first event. */
  /** Every outbox's topic template ({schema} and {table} filled in): the topics whose subjects are resolved at start. */
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

/**
 * The encoder for `config.format`. The Avro half (avsc, schemas, the registry client) is loaded
 * only for the Avro format: a JSON relay does not carry its ~10 MB of memory.
 */
export async function createEncoder(config: EncoderOptions, context: EncoderContext): Promise<PayloadEncoder> {
  if (config.format === 'json') return new JsonEncoder();
  const { createAvroEncoder } = await import('./avro/create-avro-encoder.js');
  return createAvroEncoder(config, context);
}
