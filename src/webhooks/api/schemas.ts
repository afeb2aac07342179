import { Type, type Static, type TSchema } from 'typebox';

/*
 * Every request and answer of `webhooks api`, in TypeBox: the same schemas validate requests,
 * shape answers and make docs/openapi.json. Objects refuse fields they do not name
 * (additionalProperties: false), so a misspelt field is a 400, never silently ignored.
 */

const closed = <T extends Record<string, TSchema>>(properties: T, description?: string) => Type.Object(properties, { additionalProperties: false, ...(description !== undefined && { description }) });
const nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const time = (description: string) => Type.String({ format: 'date-time', description });

export const CustomerId = Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\s\\x00-\\x1f\\x7f]+$', description: "The platform's own id of its customer, e.g. cus_123" });
const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$' });
const EventTypePattern = Type.String({ minLength: 1, maxLength: 200, description: 'An event type (invoice.paid) or a pattern (invoice.*, *)' });
const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'http:// or https://; its host may not resolve to a private address (OUTBOX_WEBHOOK_ALLOW_ADDRESSES)' });
const Description = Type.String({ maxLength: 500 });

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
export const DisableBody = closed({ reason: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })) });
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
  eventId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
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
export const DeliveryParams = closed({ deliveryId: Type.String({ pattern: '^[0-9]{1,18}$' }) });
export const CustomerParams = closed({ customerId: CustomerId });
export const IdempotencyHeaders = Type.Object({ 'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The same key and body get the same answer again (for a day); the same key with another body is 422' })) });

export type EndpointJson = Static<typeof Endpoint>;
export type DeliveryJson = Static<typeof Delivery>;
export type AttemptJson = Static<typeof Attempt>;
