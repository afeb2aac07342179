/**
 * Which event types an endpoint receives: exact types (`invoice.paid`) or a trailing wildcard
 * (`invoice.*`: every type under `invoice.`, `invoice.payment.failed` too; `*`: every type).
 * Matching happens in the consumer, once per event, against every subscription at once.
 */

const WORD = '[A-Za-z0-9_:-]+';
const PATTERN = new RegExp(`^(?:\\*|${WORD}(?:\\.${WORD})*(?:\\.\\*)?)$`);

/** Null, or what is wrong with a pattern and what is expected. */
export function eventTypeProblem(pattern: string): string | null {
  return PATTERN.test(pattern)
    ? null
    : `"${pattern}" is not an event type or pattern: expected dot-separated words of letters, digits, _ : or -, optionally ending in .* (e.g. invoice.paid, invoice.*, *)`;
}

export interface Subscriber {
  readonly endpointId: string;
  readonly eventTypes: readonly string[];
  /** Owed the events produced (their Kafka timestamp, ms) at or after this; -Infinity: every event. */
  readonly deliverFromMs: number;
}

/** Every subscription, indexed: exact types in a map, wildcards by prefix. */
export class SubscriptionIndex {
  private readonly exact = new Map<string, string[]>();
  private readonly prefixes: { readonly prefix: string; readonly endpointId: string }[] = [];
  private readonly endpoints = new Set<string>();
  /** Only the endpoints that are not owed every event. */
  private readonly deliverFromMs = new Map<string, number>();

  constructor(subscribers: readonly Subscriber[]) {
    for (const { endpointId, eventTypes, deliverFromMs } of subscribers) {
      this.endpoints.add(endpointId);
      if (deliverFromMs > -Infinity) this.deliverFromMs.set(endpointId, deliverFromMs);
      // One endpoint with overlapping patterns (invoice.*, invoice.paid) still gets one delivery per event.
      for (const pattern of new Set(eventTypes)) {
        if (pattern === '*') this.prefixes.push({ prefix: '', endpointId });
        else if (pattern.endsWith('.*')) this.prefixes.push({ prefix: pattern.slice(0, -1), endpointId });
        else this.exact.set(pattern, [...(this.exact.get(pattern) ?? []), endpointId]);
      }
    }
  }

  /** How many endpoints subscribe to anything. */
  get size(): number {
    return this.endpoints.size;
  }

  /** The endpoints owed an event of `eventType` produced at `producedAtMs`, each once. */
  endpointsFor(eventType: string, producedAtMs: number): readonly string[] {
    const found = new Set(this.exact.get(eventType));
    for (const { prefix, endpointId } of this.prefixes) if (eventType.startsWith(prefix) && eventType.length > prefix.length) found.add(endpointId);
    if (this.deliverFromMs.size === 0) return [...found];
    return [...found].filter((endpointId) => producedAtMs >= (this.deliverFromMs.get(endpointId) ?? -Infinity));
  }
}
