import type { OutboxEvent } from '../event.js';
import { JsonText } from '../decode/json-text.js';
import type { PayloadEncoder } from './encoder.js';

/**
 * The payload as UTF-8 JSON: the json/jsonb text Postgres sent (the stream keeps it unparsed
 * for this format), or, for any other column type, the value serialized.
 */
export class JsonEncoder implements PayloadEncoder {
  readonly format = 'json' as const;

  encode(event: OutboxEvent): Buffer | string {
    return event.payload instanceof JsonText ? event.payload.text : JSON.stringify(event.payload);
  }
}
