/**
 * Which event types an endpoint receives: exact types (`invoice.paid`) or a trailing wildcard
 * (`invoice.*`: every type under `invoice.`, `invoice.payment.failed` too; `*`: every type).
 * Matching happens in the consumer, once per event, against its customer's subscriptions and the platform-wide ones.
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
  /** The customer whose events it receives; null: platform-wide, every customer's. */
  readonly customerId: string | null;
}

/** Event types to endpoints, for one audience (a customer, or the platform-wide endpoints): exact types in a map, wildcards by prefix. */
class TypeIndex {
  private readonly exact = new Map<string, string[]>();
  private readonly prefixes: { readonly prefix: string; readonly endpointId: string }[] = [];
  size = 0;

  add(endpointId: string, eventTypes: readonly string[]): void {
    this.size += 1;
    // One endpoint with overlapping patterns (invoice.*, invoice.paid) still gets one delivery per event.
    for (const pattern of new Set(eventTypes)) {
      if (pattern === '*') this.prefixes.push({ prefix: '', endpointId });
      else if (pattern.endsWith('.*')) this.prefixes.push({ prefix: pattern.slice(0, -1), endpointId });
      else this.exact.set(pattern, [...(this.exact.get(pattern) ?? []), endpointId]);
    }
  }

  match(eventType: string, found: Set<string>): void {
    for (const endpointId of this.exact.get(eventType) ?? []) found.add(endpointId);
    for (const { prefix, endpointId } of this.prefixes) if (eventType.startsWith(prefix) && eventType.length > prefix.length) found.add(endpointId);
  }
}

/**
 * Every subscription, indexed by whose events it receives: an event is matched against its own
 * customer's endpoints (a map lookup, however many customers there are) and the platform-wide
 * ones, never against another customer's.
 */
export class SubscriptionIndex {
  private readonly platformWide = new TypeIndex();
  private readonly byCustomer = new Map<string, TypeIndex>();
  /** Only the endpoints that are not owed every event. */
  private readonly deliverFromMs = new Map<string, number>();
  /** The most endpoints one event can be owed to: the platform-wide ones and the largest customer's. */
  readonly mostFanOut: number;

  constructor(subscribers: readonly Subscriber[]) {
    let largestCustomer = 0;
    for (const { endpointId, eventTypes, deliverFromMs, customerId } of subscribers) {
      if (deliverFromMs > -Infinity) this.deliverFromMs.set(endpointId, deliverFromMs);
      let audience = this.platformWide;
      if (customerId !== null) {
        audience = this.byCustomer.get(customerId) ?? new TypeIndex();
        this.byCustomer.set(customerId, audience);
      }
      audience.add(endpointId, eventTypes);
      if (customerId !== null) largestCustomer = Math.max(largestCustomer, audience.size);
    }
    this.mostFanOut = this.platformWide.size + largestCustomer;
  }

  /**
   * The endpoints owed an event of `customerId` (null: its customer is unknown, so only the
   * platform-wide endpoints) and `eventType`, produced at `producedAtMs`, each once.
   */
  endpointsFor(customerId: string | null, eventType: string, producedAtMs: number): readonly string[] {
    const found = new Set<string>();
    this.platformWide.match(eventType, found);
    if (customerId !== null) this.byCustomer.get(customerId)?.match(eventType, found);
    if (this.deliverFromMs.size === 0) return [...found];
    return [...found].filter((endpointId) => producedAtMs >= (this.deliverFromMs.get(endpointId) ?? -Infinity));
  }
}
