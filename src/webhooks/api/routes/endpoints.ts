import { RelayError } from '../../../errors.js';
import type { Endpoint as StoredEndpoint } from '../../endpoint-store.js';
import { ENDPOINT_DEFAULTS } from '../../endpoint-store.js';
import { recordTestEvent } from '../../test-event.js';
import { callerOf, requirePlatform, storesFor, type ApiApp, type ApiServices } from '../app.js';
import { decodeCursor, nextCursor } from '../cursor.js';
import { idempotent } from '../idempotent-route.js';
import * as s from '../schemas.js';

/** How long a rotated-out secret keeps signing beside the new one: the receiver's time to switch. */
const KEEP_OLD_SECRET_MS = 86_400_000;

/** Endpoints: CRUD, disable/enable, rotate secret, a test event, replay since a time. */
export function endpointRoutes(app: ApiApp, services: ApiServices): void {
  const tags = ['endpoints'];

  app.get('/v1/endpoints', { schema: { tags, summary: "List endpoints, oldest first (a customer token: its own; naming another customer is 403)", querystring: s.EndpointsQuery, response: { 200: s.page(s.Endpoint) } } }, async (request) => {
    const caller = callerOf(request);
    const limit = request.query.limit ?? 50;
    const customerId = customerAsked(caller.kind === 'customer' ? caller.customerId : null, request.query.customerId);
    const endpoints = await storesFor(services, caller).endpoints.list({ ...(customerId !== undefined && { customerId }), after: decodeCursor('endpoints', request.query.cursor), limit });
    return { data: endpoints.map(endpointJson), nextCursor: nextCursor('endpoints', endpoints, limit, (e) => e.id) };
  });

  app.post('/v1/endpoints', { schema: { tags, summary: "Add an endpoint; its signing secret is shown in this answer only (a customer token: its own customer's; naming another is 403)", headers: s.IdempotencyHeaders, body: s.CreateEndpointBody, response: { 201: s.EndpointWithSecret } } }, async (request, reply) => {
    const caller = callerOf(request);
    const body = request.body;
    if (body.platformWide) requirePlatform(caller, 'add a platform-wide endpoint');
    const customerId = caller.kind === 'customer' ? customerAsked(caller.customerId, body.customerId)! : (body.customerId ?? null);
    return idempotent(services, request, reply, 201, async () => {
      const endpoint = await storesFor(services, caller).endpoints.add({
        ...ENDPOINT_DEFAULTS,
        url: body.url,
        eventTypes: body.eventTypes,
        description: body.description ?? null,
        customerId,
        platformWide: body.platformWide ?? false,
        ordered: false,
      });
      return { ...endpointJson(endpoint), secret: endpoint.secrets[0]!.secret };
    });
  });

  app.get('/v1/endpoints/:endpointId', { schema: { tags, summary: 'One endpoint', params: s.EndpointParams, response: { 200: s.Endpoint } } }, async (request) =>
    endpointJson(await storesFor(services, callerOf(request)).endpoints.get(request.params.endpointId)),
  );

  app.patch('/v1/endpoints/:endpointId', { schema: { tags, summary: "Change an endpoint's URL, event types or description (what is not given stays)", params: s.EndpointParams, body: s.UpdateEndpointBody, response: { 200: s.Endpoint } } }, async (request) => {
    const { url, eventTypes, description } = request.body;
    const endpoint = await storesFor(services, callerOf(request)).endpoints.update(request.params.endpointId, {
      ...(url !== undefined && { url }),
      ...(eventTypes !== undefined && { eventTypes }),
      ...(description !== undefined && { description }),
    });
    return endpointJson(endpoint);
  });

  app.delete('/v1/endpoints/:endpointId', { schema: { tags, summary: 'Remove an endpoint, with its deliveries and their attempts', params: s.EndpointParams, response: { 204: { type: 'null', description: 'Removed' } } } }, async (request, reply) => {
    await storesFor(services, callerOf(request)).endpoints.remove(request.params.endpointId);
    return reply.code(204).send(null);
  });

  app.post('/v1/endpoints/:endpointId/disable', { schema: { tags, summary: 'Stop sending to it; its deliveries are still recorded, and held', params: s.EndpointParams, body: s.DisableBody, response: { 200: s.Endpoint } } }, async (request) =>
    endpointJson(await storesFor(services, callerOf(request)).endpoints.disable(request.params.endpointId, request.body.reason ?? 'disabled through the API')),
  );

  app.post('/v1/endpoints/:endpointId/enable', { schema: { tags, summary: 'Send to it again: circuit closed, held deliveries due now', params: s.EndpointParams, response: { 200: s.Endpoint } } }, async (request) =>
    endpointJson((await storesFor(services, callerOf(request)).endpoints.enable(request.params.endpointId)).endpoint),
  );

  app.post('/v1/endpoints/:endpointId/rotate-secret', { schema: { tags, summary: 'A new signing secret, shown in this answer only; the old ones keep signing for 24 h', params: s.EndpointParams, response: { 200: s.EndpointWithSecret } } }, async (request) => {
    const { endpoint, secret } = await storesFor(services, callerOf(request)).endpoints.rotateSecret(request.params.endpointId, KEEP_OLD_SECRET_MS);
    return { ...endpointJson(endpoint), secret };
  });

  app.post('/v1/endpoints/:endpointId/test', { schema: { tags, summary: 'Record a webhook.test event for it, due now: the webhooks process sends it', headers: s.IdempotencyHeaders, params: s.EndpointParams, response: { 202: s.TestSent } } }, async (request, reply) => {
    const stores = storesFor(services, callerOf(request));
    const endpoint = await stores.endpoints.get(request.params.endpointId);
    return idempotent(services, request, reply, 202, async () => ({ deliveryId: await recordTestEvent(services.pool, services.tables, stores.recorder, endpoint, new Date()) }));
  });

  app.post('/v1/endpoints/:endpointId/replay', { schema: { tags, summary: "Send its deliveries recorded since a time again (failed and delivered ones)", params: s.EndpointParams, body: s.ReplaySinceBody, response: { 202: s.Replayed } } }, async (request, reply) => {
    const replayed = await storesFor(services, callerOf(request)).deliveries.replay({ endpointId: request.params.endpointId, since: new Date(request.body.since) }, new Date());
    return reply.code(202).send({ replayed });
  });
}

/**
 * The customer a customer token's request is about: its own, whether named or implied (a
 * platform token: what it asks, if anything). Naming another is WEBHOOK_API_FORBIDDEN, decided
 * from the token alone before any read, so the answer is the same whether that customer exists:
 * nothing leaks, and the caller is told the truth (its token's scope), not that a customer with
 * endpoints has none. An object named by its own id (an endpoint, a delivery) stays 404 as a
 * missing one: there a 403 would confirm the id exists.
 */
export function customerAsked(own: string | null, asked: string | undefined): string | undefined {
  if (own === null) return asked;
  if (asked !== undefined && asked !== own) throw new RelayError('WEBHOOK_API_FORBIDDEN', `a customer token cannot name another customer (${asked}): it reaches its own customer's objects only; leave customerId out or name its own`);
  return own;
}

export function endpointJson(endpoint: StoredEndpoint): s.EndpointJson {
  return {
    id: endpoint.id,
    customerId: endpoint.customerId,
    platformWide: endpoint.platformWide,
    url: endpoint.url,
    eventTypes: [...endpoint.eventTypes],
    description: endpoint.description,
    disabled: endpoint.disabledAt !== null,
    disabledReason: endpoint.disabledReason,
    failingSince: endpoint.failingSince?.toISOString() ?? null,
    createdAt: endpoint.createdAt.toISOString(),
  };
}
