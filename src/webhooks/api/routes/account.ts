import { RelayError } from '../../../errors.js';
import { callerOf, requirePlatform, storesFor, type ApiApp, type ApiServices } from '../app.js';
import { decodeCursor, nextCursor } from '../cursor.js';
import * as s from '../schemas.js';
import { customerAsked } from './endpoints.js';

/** Who is calling, customer tokens, customers (known by their endpoints) and their replay, event types. */
export function accountRoutes(app: ApiApp, services: ApiServices): void {
  app.get('/v1/session', { schema: { tags: ['auth'], summary: 'Who the token is: the platform, or a customer until when', response: { 200: s.Session } } }, async (request) => {
    const caller = callerOf(request);
    return caller.kind === 'platform' ? { kind: 'platform' as const } : { kind: 'customer' as const, customerId: caller.customerId, expiresAt: caller.expiresAt.toISOString() };
  });

  app.post('/v1/customer-tokens', { schema: { tags: ['auth'], summary: "Mint a short-lived token of one customer (platform token only), with the portal's link", body: s.MintTokenBody, response: { 201: s.MintedToken } } }, async (request, reply) => {
    requirePlatform(callerOf(request), 'mint tokens');
    const { token, expiresAt } = services.tokens.mint(request.body.customerId, request.body.ttlSeconds ?? 3_600);
    const origin = services.publicUrl ?? `${request.protocol}://${request.host}`;
    return reply.code(201).send({ token, expiresAt: expiresAt.toISOString(), portalUrl: `${origin}/portal/#token=${token}` });
  });

  app.get('/v1/customers', { schema: { tags: ['customers'], summary: 'Customers with endpoints, by id (platform token only)', querystring: s.PageQuery, response: { 200: s.page(s.Customer) } } }, async (request) => {
    const caller = callerOf(request);
    requirePlatform(caller, 'list customers');
    const limit = request.query.limit ?? 50;
    const customers = await storesFor(services, caller).endpoints.customers({ after: decodeCursor('customers', request.query.cursor), limit });
    return { data: customers.map(customerJson), nextCursor: nextCursor('customers', customers, limit, (c) => c.customerId) };
  });

  app.get('/v1/customers/:customerId', { schema: { tags: ['customers'], summary: "One customer: its endpoints counted (a customer token: its own only; another's is 403)", params: s.CustomerParams, response: { 200: s.Customer } } }, async (request) => {
    const caller = callerOf(request);
    const customerId = customerAsked(caller.kind === 'customer' ? caller.customerId : null, request.params.customerId)!;
    const [found] = await storesFor(services, caller).endpoints.customers({ customerId, limit: 1 });
    // A customer token's own customer exists before its first endpoint: the platform named it.
    if (found === undefined && caller.kind === 'customer') return { id: customerId, endpointCount: 0, firstEndpointAt: null };
    if (found === undefined) throw new RelayError('WEBHOOK_NOT_FOUND', `customer ${customerId} has no webhook endpoint`);
    return customerJson(found);
  });

  app.post('/v1/customers/:customerId/replay', { schema: { tags: ['customers'], summary: "Send the deliveries to a customer's endpoints recorded since a time again (a customer token: its own only; another's is 403)", params: s.CustomerParams, body: s.ReplaySinceBody, response: { 202: s.Replayed } } }, async (request, reply) => {
    const caller = callerOf(request);
    const customerId = customerAsked(caller.kind === 'customer' ? caller.customerId : null, request.params.customerId)!;
    const replayed = await storesFor(services, caller).deliveries.replay({ customerId, since: new Date(request.body.since) }, new Date());
    return reply.code(202).send({ replayed });
  });

  app.get('/v1/event-types', { schema: { tags: ['event types'], summary: "Event types the store holds events of, with their Avro schema where OUTBOX_SCHEMAS_DIR has one (a customer token: the catalogue of names, and those with a schema, without another customer's times)", response: { 200: s.list(s.EventType) } } }, async (request) => {
    const caller = callerOf(request);
    const types = await storesFor(services, caller).deliveries.seenEventTypes();
    if (caller.kind === 'platform') return { data: types.map((t) => ({ name: t.name, firstSeenAt: t.firstSeenAt.toISOString(), schema: services.eventSchemas.get(t.name) ?? null })) };
    // Type names are the platform's catalogue (a new customer's portal offers them); when another customer's events were produced is not.
    const names = [...new Set([...types.map((t) => t.name), ...services.eventSchemas.keys()])].sort();
    return { data: names.map((name) => ({ name, firstSeenAt: null, schema: services.eventSchemas.get(name) ?? null })) };
  });
}

function customerJson(c: { readonly customerId: string; readonly endpointCount: number; readonly firstEndpointAt: Date }) {
  return { id: c.customerId, endpointCount: c.endpointCount, firstEndpointAt: c.firstEndpointAt.toISOString() };
}
