import type { OutboxEvent } from '../event.js';
import type { PayloadEncoder } from './encoder.js';

/** The payload as UTF-8 JSON, exactly the jsonb value the application inserted. */
export class JsonEncoder implements PayloadEncoder {
  readonly format = 'json' as const;

  encode(event: OutboxEvent): Buffer {
    return Buffer.from(JSON.stringify(event.payload), 'utf8');
  }
}
