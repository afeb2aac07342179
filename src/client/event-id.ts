import { createHash } from 'node:crypto';

/**
 * The namespace of `deterministicEventId`: a fixed, random UUID of this project. Pass your own
 * when two systems write into one outbox and could derive the same parts.
 */
export const OUTBOX_EVENT_ID_NAMESPACE = '6f1c3b1e-8d2a-4f5e-9a47-2b8e0c5d7a13';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A UUIDv5 (RFC 9562: SHA-1 of namespace + name) of the parts that identify one business fact,
 * e.g. `deterministicEventId(['invoice.paid', invoiceId])`, or with a version when the same
 * aggregate emits the same event type more than once: `['subscription.renewed', subId, period]`.
 *
 * Same parts, same id: a business transaction that is retried (a lost COMMIT acknowledgement, a
 * job run twice) inserts the same `event_id` and fails on the outbox's primary key instead of
 * emitting the event twice. The parts are JSON-encoded as an array before hashing, so
 * `['a:b', 'c']` and `['a', 'b:c']` differ.
 */
export function deterministicEventId(parts: readonly (string | number)[], namespace: string = OUTBOX_EVENT_ID_NAMESPACE): string {
  if (parts.length === 0) throw new TypeError('deterministicEventId needs at least one part');
  for (const part of parts) {
    if (typeof part === 'number' ? !Number.isFinite(part) : typeof part !== 'string' || part === '') {
      throw new TypeError(`deterministicEventId: every part must be a non-empty string or a finite number, got ${JSON.stringify(part)}`);
    }
  }
  return uuidV5(JSON.stringify(parts), namespace);
}

/** RFC 9562 UUID version 5 of `name` (UTF-8) in `namespace`. */
export function uuidV5(name: string, namespace: string): string {
  if (!UUID.test(namespace)) throw new TypeError(`namespace must be a UUID, got ${JSON.stringify(namespace)}`);
  const hash = createHash('sha1').update(Buffer.from(namespace.replaceAll('-', ''), 'hex')).update(name, 'utf8').digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
