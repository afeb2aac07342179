import { NO_HEADER_BLOCK } from './record-format.js';
import type { ProgressRecordOptions } from './ports.js';
import type { OutgoingMessage } from './record.js';

/** The progress record as a message of the transaction: keyed by slot and server, on the progress topic. */
export function progressMessage(progress: ProgressRecordOptions, batch: readonly OutgoingMessage[]): OutgoingMessage {
  const value = progress.value(batch);
  // Only topic, key and value reach Kafka; the rest is what the batch's type asks of a message.
  return { ...batch.at(-1)!, topic: progress.topic, key: progress.key, value, headers: {}, headerBlock: NO_HEADER_BLOCK, deadLetter: false, label: 'progress' };
}
