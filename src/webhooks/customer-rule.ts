/**
 * Whose event it is: the one customer an event belongs to, found by the rule the operator
 * declared (OUTBOX_WEBHOOK_CUSTOMER_FROM), never guessed. An event is delivered to its
 * customer's endpoints and to platform-wide ones; one whose customer cannot be found goes to no
 * customer's endpoint, and is recorded as such (listed, counted, replayable once fixed).
 */

export type CustomerRule =
  /** A Kafka header of the record (the relay carries one from the outbox's headers column). */
  | { readonly kind: 'header'; readonly name: string }
  /** A field of the payload: a JSON pointer (RFC 6901) into a JSON payload, the same path into a decoded Avro one. */
  | { readonly kind: 'payload'; readonly pointer: string; readonly path: readonly string[] }
  /** The record's key: for platforms whose aggregate is the customer. */
  | { readonly kind: 'aggregate_id' };

export const CUSTOMER_RULE_EXAMPLES = 'header:customer_id, payload:/customer/id or aggregate_id';

/** The longest customer id, in characters (code points). */
export const CUSTOMER_ID_MAX_LENGTH = 255;
/**
 * A customer id as an endpoint and an event carry it: what a platform already uses (cus_123, a
 * UUID, a number), of 1 to CUSTOMER_ID_MAX_LENGTH characters; the API's schemas take this pattern.
 * Never the text `null`: the relay writes a JSON null of the outbox's headers column as that text,
 * so an event cannot tell the id "null" from no customer. It means no customer everywhere, and an
 * endpoint for it, which could never receive an event, is refused.
 */
// The control characters (Unicode's Cc) written as ranges, not \p{Cc}: docs/openapi.json carries this pattern to other languages' validators.
export const CUSTOMER_ID_PATTERN = '^(?!null$)[^\\s\\x00-\\x1f\\x7f-\\x9f]+$';
const CUSTOMER_ID = new RegExp(CUSTOMER_ID_PATTERN, 'u');

/** Null, or what is wrong with a customer id and what is expected. */
export function customerIdProblem(id: string): string | null {
  if (id === 'null') return '"null" is not a customer id: it is how a JSON null arrives, which is no customer, so an endpoint for it could never receive an event; expected the customer\'s own id, e.g. cus_123';
  const length = [...id].length;
  return CUSTOMER_ID.test(id) && length <= CUSTOMER_ID_MAX_LENGTH ? null : `"${id}" is not a customer id: expected 1 to ${CUSTOMER_ID_MAX_LENGTH} characters without spaces or control characters, e.g. cus_123`;
}

/** The rule an operator wrote; throws an Error saying what is wrong (the option's parser adds what is expected). */
export function parseCustomerRule(raw: string): CustomerRule {
  const text = raw.trim();
  if (text === 'aggregate_id') return { kind: 'aggregate_id' };
  const colon = text.indexOf(':');
  const kind = colon < 0 ? text : text.slice(0, colon);
  const argument = colon < 0 ? '' : text.slice(colon + 1);
  if (kind === 'header') {
    if (!/^[A-Za-z0-9_.:-]{1,255}$/.test(argument)) throw new Error(`names the header "${argument}": expected a header name of letters, digits, _ . : or -`);
    return { kind: 'header', name: argument };
  }
  if (kind === 'payload') {
    if (!argument.startsWith('/')) throw new Error(`has the pointer "${argument}": expected a JSON pointer starting with /, e.g. /customer/id`);
    return { kind: 'payload', pointer: argument, path: argument.slice(1).split('/').map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~')) };
  }
  throw new Error(`is "${text}", not a rule`);
}

export function describeCustomerRule(rule: CustomerRule): string {
  return rule.kind === 'header' ? `header:${rule.name}` : rule.kind === 'payload' ? `payload:${rule.pointer}` : 'aggregate_id';
}

/** What a rule reads from an event. */
export interface CustomerSource {
  readonly headers: Readonly<Record<string, string>>;
  /** The decoded payload (JSON parsed, or Avro decoded). */
  readonly payload: unknown;
  readonly aggregateId: string | null;
}

export type CustomerOf = { readonly customerId: string } | { readonly customerId: null; readonly missing: string };

/** The event's customer, or why it has none (a missing header, a null field): never a guess. */
export function customerOf(rule: CustomerRule, event: CustomerSource): CustomerOf {
  let value: unknown;
  let where: string;
  if (rule.kind === 'header') {
    value = Object.hasOwn(event.headers, rule.name) ? event.headers[rule.name] : undefined;
    // The relay writes a JSON value of the outbox's headers column as its text: a null there
    // arrives as "null", which is nobody's id (CUSTOMER_ID_PATTERN refuses it wherever else it is read).
    if (value === 'null') value = null;
    where = `header ${rule.name}`;
  } else if (rule.kind === 'aggregate_id') {
    value = event.aggregateId;
    where = 'aggregate id';
  } else {
    value = event.payload;
    for (const token of rule.path) {
      value = value !== null && typeof value === 'object' && Object.hasOwn(value, token) ? (value as Record<string, unknown>)[token] : undefined;
      if (value === undefined) break;
    }
    where = `payload field ${rule.pointer}`;
  }
  if (value === undefined) return { customerId: null, missing: `no ${where}` };
  if (value === null) return { customerId: null, missing: `${where} is null` };
  // A number loses digits past 2^53 as JSON.parse reads it: such an id is refused, not rounded to someone else's.
  const text = typeof value === 'string' ? value : typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : typeof value === 'bigint' ? value.toString() : null;
  if (text === null) return { customerId: null, missing: `${where} is ${typeof value === 'number' ? 'a number beyond 2^53' : Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'an object' : `a ${typeof value}`}, not a customer id (a string or a safe integer)` };
  const problem = customerIdProblem(text);
  return problem ? { customerId: null, missing: `${where}: ${problem}` } : { customerId: text };
}
