import { Type, type Static, type TSchema } from 'typebox';
import { CUSTOMER_ID_MAX_LENGTH, CUSTOMER_ID_PATTERN } from '../customer-rule.js';

/*
 * Every request and answer of `webhooks api`, in TypeBox: the same schemas validate requests,
 * shape answers and make docs/openapi.json. Objects refuse fields they do not name
 * (additionalProperties: false), so a misspelt field is a 400, never silently ignored.
 */

const closed = <T extends Record<string, TSchema>>(properties: T, description?: string) => Type.Object(properties, { additionalProperties: false, ...(description !== undefined && { description }) });
const nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const time = (description: string) => Type.String({ format: 'date-time', description });

/** What each pattern of these schemas asks for, in words: a refusal says this, not the regular expression. */
export const PATTERN_MEANINGS = new Map<string, string>();
const matching = (pattern: string, meaning: string): string => {
  PATTERN_MEANINGS.set(pattern, meaning);
  return pattern;
};
/**
 * Free text stored in Postgres (a description, a URL, a reason, an id to look up): Postgres text
 * cannot hold U+0000, so it is refused here, naming the field, rather than by the statement (a 500).
 */
const text = (options: { readonly minLength?: number; readonly maxLength: number; readonly description?: string }) =>
  Type.String({ ...options, pattern: matching('^[^\\x00]*$', 'must not hold a NUL character (\\u0000): the store cannot keep one') });

/** The router's limit on one path parameter, in UTF-16 units: the longest id is a customer's (CUSTOMER_ID_MAX_LENGTH characters), twice as long in characters outside the BMP. */
export const MAX_PATH_PARAMETER_LENGTH = 2 * CUSTOMER_ID_MAX_LENGTH;

export const CustomerId = Type.String({ minLength: 1, maxLength: CUSTOMER_ID_MAX_LENGTH, pattern: matching(CUSTOMER_ID_PATTERN, `expected a customer id: 1 to ${CUSTOMER_ID_MAX_LENGTH} characters without spaces or control characters, and not the text null (a JSON null is no customer), e.g. cus_123`), description: "The platform's own id of its customer, e.g. cus_123" });
const Id = Type.String({ minLength: 1, maxLength: 64, pattern: matching('^[A-Za-z0-9_.-]+$', 'expected an id of letters, digits, _ . or -, e.g. ep_5f0c2a9e1b7d4c38') });
const EventTypePattern = text({ minLength: 1, maxLength: 200, description: 'An event type (invoice.paid) or a pattern (invoice.*, *)' });
const Url = text({ minLength: 1, maxLength: 2048, description: 'http:// or https://; its host may not resolve to a private address (OUTBOX_WEBHOOK_ALLOW_ADDRESSES)' });
const Description = text({ maxLength: 500 });

export const ErrorBody = closed(
  {
    error: closed({
      code: Type.String({ description: 'A stable code of the project (docs/errors.md), e.g. WEBHOOK_NOT_FOUND' }),
      message: Type.String({ description: 'What is wrong, naming the field and what was expected where there is one' }),
    }),
  },
  'Every 4xx and 5xx answer',
);

export const Session = Type.Union([closed({ kind: Type.Literal('platform') }), closed({ kind: Type.Literal('customer'), customerId: CustomerId, expiresAt: time('When the token stops working') })]);

export const MintTokenBody = closed({
  customerId: CustomerId,
  ttlSeconds: Type.Optional(Type.Integer({ minimum: 5, maximum: 86_400, default: 3_600, description: 'How long the token works' })),
});
export const MintedToken = closed({
  token: Type.String({ description: 'Give it to the customer (Authorization: Bearer); it is not stored and cannot be shown again' }),
  expiresAt: time('When it stops working'),
  portalUrl: Type.String({ description: 'The portal, logged in with this token (in the fragment: never sent to a server)' }),
});

export const Customer = closed({
  id: CustomerId,
  endpointCount: Type.Integer({ minimum: 0 }),
  firstEndpointAt: nullable(time('When its first endpoint was added')),
});

export const EventType = closed({
  name: Type.String(),
  firstSeenAt: nullable(time("The first event of this type the stage recorded was produced then (kept when its events are pruned); null for a customer token (another customer's events are not its to time)")),
  schema: nullable(Type.Unknown({ description: 'Its Avro schema (JSON), when OUTBOX_SCHEMAS_DIR has one' })),
});

export const Endpoint = closed({
  id: Id,
  customerId: nullable(CustomerId),
  platformWide: Type.Boolean({ description: "Receives every customer's events (an internal consumer; platform token only)" }),
  url: Type.String(),
  eventTypes: Type.Array(Type.String()),
  description: nullable(Type.String()),
  disabled: Type.Boolean(),
  disabledReason: nullable(Type.String()),
  failingSince: nullable(time('The first failure since its last success')),
  createdAt: time('When it was added'),
});
export const EndpointWithSecret = closed({
  ...Endpoint.properties,
  secret: Type.String({ description: 'The whsec_ signing secret: shown here only, once' }),
});

export const CreateEndpointBody = closed({
  url: Url,
  eventTypes: Type.Array(EventTypePattern, { minItems: 1, maxItems: 100 }),
  description: Type.Optional(Description),
  customerId: Type.Optional(CustomerId),
  platformWide: Type.Optional(Type.Boolean({ description: 'Platform token only; excludes customerId' })),
});
export const UpdateEndpointBody = closed({
  url: Type.Optional(Url),
  eventTypes: Type.Optional(Type.Array(EventTypePattern, { minItems: 1, maxItems: 100 })),
  description: Type.Optional(nullable(Description)),
});
export const DisableBody = closed({ reason: Type.Optional(text({ minLength: 1, maxLength: 500 })) });
export const ReplaySinceBody = closed({ since: time('Deliveries recorded at or after this time are sent again') });

export const Attempt = closed({
  attempt: Type.Integer({ minimum: 1 }),
  at: time('When it started'),
  outcome: Type.String({ description: 'delivered, http_status, timeout, connect, refused_address, redirect or network' }),
  statusCode: nullable(Type.Integer()),
  latencyMs: nullable(Type.Integer()),
  error: nullable(Type.String()),
  responseSnippet: nullable(Type.String({ description: "The first bytes of the endpoint's answer" })),
});

export const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]);
export const Delivery = closed({
  id: Type.String(),
  endpointId: Id,
  customerId: nullable(CustomerId),
  eventId: Type.String(),
  eventType: Type.String(),
  status: DeliveryStatus,
  attemptCount: Type.Integer({ minimum: 0 }),
  nextAttemptAt: nullable(time('When a pending delivery is due')),
  createdAt: time('When it was recorded'),
  finishedAt: nullable(time('When it was delivered or failed')),
  lastAttempt: nullable(Attempt),
});

const Cursor = Type.String({ minLength: 1, maxLength: 200, description: 'The nextCursor of the previous page' });
const Limit = Type.Integer({ minimum: 1, maximum: 200, default: 50 });
export const PageQuery = closed({ cursor: Type.Optional(Cursor), limit: Type.Optional(Limit) });
export const EndpointsQuery = closed({ customerId: Type.Optional(CustomerId), cursor: Type.Optional(Cursor), limit: Type.Optional(Limit) });
export const DeliveriesQuery = closed({
  customerId: Type.Optional(CustomerId),
  endpointId: Type.Optional(Id),
  eventId: Type.Optional(text({ minLength: 1, maxLength: 200 })),
  status: Type.Optional(DeliveryStatus),
  since: Type.Optional(time('Recorded at or after')),
  until: Type.Optional(time('Recorded before')),
  cursor: Type.Optional(Cursor),
  limit: Type.Optional(Limit),
});

export const page = <T extends TSchema>(item: T) => closed({ data: Type.Array(item), nextCursor: nullable(Type.String({ description: "The next page's cursor (pass it as cursor); null: the last page. A deliveries listing with a filter that skips rows (eventId, since, until, status pending or delivered) examines at most 5,000 deliveries per endpoint per request, so a page may hold fewer than limit items, even none, with a nextCursor: follow it until it is null" })) });
export const list = <T extends TSchema>(item: T) => closed({ data: Type.Array(item) });
export const Replayed = closed({ replayed: Type.Integer({ minimum: 0, description: 'Deliveries due again now (pending ones are left on their way)' }) });
export const TestSent = closed({ deliveryId: Type.String({ description: 'The webhook.test delivery, due now' }) });

export const EndpointParams = closed({ endpointId: Id });
export const DeliveryParams = closed({ deliveryId: Type.String({ pattern: matching('^[0-9]{1,18}$', 'expected a delivery id: 1 to 18 digits') }) });
export const CustomerParams = closed({ customerId: CustomerId });
export const IdempotencyHeaders = Type.Object({ 'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The same key and body get the same answer again (for a day); the same key with another body is 422' })) });

export type EndpointJson = Static<typeof Endpoint>;
export type DeliveryJson = Static<typeof Delivery>;
export type AttemptJson = Static<typeof Attempt>;
