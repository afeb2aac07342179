import type { OutboxEvent } from '../event.js';

/**
 * Payload encoding, one implementation per `--format`. `encode` may return a promise only when
 * it must reach the schema registry (first use of a schema); the hot path is synchronous.
 * A payload that cannot be encoded throws PoisonEventError; a registry that cannot be reached
 * throws a retriable RelayError (the stream restarts, nothing is dead-lettered because of it).
 */
export interface PayloadEncoder {
  readonly format: string;
  encode(event: OutboxEvent, topic: string): Buffer | string | Promise<Buffer>;
  /**
   * The Kafka key, when the encoder has a key schema (OUTBOX_KEY_SCHEMA); absent or returning
   * the aggregate id, the key is the aggregate id as a UTF-8 string. Same error rules as `encode`.
   */
  encodeKey?(event: OutboxEvent, topic: string): Buffer | string | Promise<Buffer>;
}
