import type { TrackedTransaction } from '../checkpoint/commit-tracker.js';
import { errorCode, errorMessage } from '../errors.js';
import type { OutgoingMessage } from '../kafka/record.js';
import type { PoisonedEvent } from './outbox-routes.js';
import { HEADER } from './headers.js';
import { encodeHeaders } from '../kafka/record-format.js';
import { RECORD_BATCH_OVERHEAD, recordSize } from '../kafka/record-size.js';

export interface DeadLetterInput {
  readonly topic: string;
  /** A row larger than this goes without its values (it stays in the outbox for `replay`). */
  readonly maxBytes: number;
  readonly event: PoisonedEvent;
  readonly error: unknown;
  readonly transaction: TrackedTransaction;
  /** The row's place in its transaction (see OutgoingMessage). */
  readonly position: number;
  /** The outbox it came from (`schema.table`, `message:<prefix>`). */
  readonly source: string;
  /** That outbox as declared (OutboxRoute.declared). */
  readonly declared: string;
}

/**
 * A poison event as a Kafka record on the dead-letter topic: the row as it was read (JSON),
 * and headers naming the reason, the error code and the source position — enough to fix the
 * cause and replay it, without opening the database.
 */
export function deadLetterMessage(input: DeadLetterInput): OutgoingMessage {
  const code = errorCode(input.error);
  const headers: Record<string, string> = {
    [HEADER.deadLetterReason]: errorMessage(input.error),
    [HEADER.deadLetterCode]: code,
    [HEADER.deadLetterTable]: input.source,
    [HEADER.commitLsn]: input.transaction.commitLsnText,
  };
  const { eventId, key } = input.event;
  if (eventId !== null) headers[HEADER.eventId] = eventId;
  let value = Buffer.from(JSON.stringify(input.event.values), 'utf8');
  let headerBlock = encodeHeaders(headers);
  if (recordSize(key, value, headerBlock) > input.maxBytes - RECORD_BATCH_OVERHEAD) {
    headers[HEADER.deadLetterOmitted] = `${value.length} bytes omitted; ${input.event.copy}`;
    headerBlock = encodeHeaders(headers);
    value = Buffer.from('{}', 'utf8');
  }
  return {
    topic: input.topic,
    key,
    value,
    size: recordSize(key, value, headerBlock),
    headers,
    headerBlock,
    transaction: input.transaction,
    position: input.position,
    label: code,
    outbox: input.declared,
    deadLetter: true,
    batchLimit: input.maxBytes,
  };
}
