import { RelayError } from '../../../errors.js';
import type { AttemptRow, DeliveryRow } from '../../delivery-queries.js';
import { callerOf, storesFor, type ApiApp, type ApiServices } from '../app.js';
import { decodeCursor, encodeCursor, nextCursor } from '../cursor.js';
import * as s from '../schemas.js';
import { customerAsked } from './endpoints.js';

/**
 * The deliveries one listing request may examine per endpoint (per request without a customer
 * or endpoint) for a filter that skips rows (event, since, until, status pending or delivered):
 * the work of one request is bounded, and the page may hold fewer than `limit` with a nextCursor.
 */
export const LISTING_SCAN_CAP = 5_000;

/** Deliveries (newest first, filtered, by cursor), their attempts, and replay. */
export function deliveryRoutes(app: ApiApp, services: ApiServices): void {
  const tags = ['deliveries'];

  app.get('/v1/deliveries', { schema: { tags, summary: 'List deliveries, newest first (a customer token: to its endpoints; naming another customer is 403)', querystring: s.DeliveriesQuery, response: { 200: s.page(s.Delivery) } } }, async (request) => {
    const caller = callerOf(request);
    const q = request.query;
    const limit = q.limit ?? 50;
    const customerId = customerAsked(caller.kind === 'customer' ? caller.customerId : null, q.customerId);
    const { rows: deliveries, resumeBefore } = await storesFor(services, caller).deliveries.page({
      ...(customerId !== undefined && { customerId }),
      ...(q.endpointId !== undefined && { endpointId: q.endpointId }),
      ...(q.eventId !== undefined && { eventId: q.eventId }),
      ...(q.status !== undefined && { status: q.status }),
      ...(q.since !== undefined && { since: new Date(q.since) }),
      ...(q.until !== undefined && { until: new Date(q.until) }),
      beforeId: decodeCursor('deliveries', q.cursor, (after) => /^[0-9]{1,18}$/.test(after)),
      limit,
      scanCap: LISTING_SCAN_CAP,
    });
    // A page that stopped at the cap continues below the rows it examined, whatever it found.
    const next = nextCursor('deliveries', deliveries, limit, (d) => d.id) ?? (resumeBefore === null ? null : encodeCursor('deliveries', resumeBefore));
    return { data: deliveries.map(deliveryJson), nextCursor: next };
  });

  app.get('/v1/deliveries/:deliveryId', { schema: { tags, summary: 'One delivery, with its last attempt', params: s.DeliveryParams, response: { 200: s.Delivery } } }, async (request) => {
    const [delivery] = await storesFor(services, callerOf(request)).deliveries.list({ deliveryId: request.params.deliveryId, limit: 1 });
    if (delivery === undefined) throw new RelayError('WEBHOOK_NOT_FOUND', `no webhook delivery ${request.params.deliveryId}`);
    return deliveryJson(delivery);
  });

  app.get('/v1/deliveries/:deliveryId/attempts', { schema: { tags, summary: 'Every attempt of a delivery, first to last', params: s.DeliveryParams, response: { 200: s.list(s.Attempt) } } }, async (request) => ({
    data: (await storesFor(services, callerOf(request)).deliveries.attempts(request.params.deliveryId)).map(attemptJson),
  }));

  app.post('/v1/deliveries/:deliveryId/replay', { schema: { tags, summary: 'Send one delivery again (same webhook-id, a fresh retry schedule); a pending one is left on its way', params: s.DeliveryParams, response: { 202: s.Replayed } } }, async (request, reply) => {
    const replayed = await storesFor(services, callerOf(request)).deliveries.replay({ deliveryId: request.params.deliveryId }, new Date());
    return reply.code(202).send({ replayed });
  });
}

function deliveryJson(d: DeliveryRow): s.DeliveryJson {
  return {
    id: d.id,
    endpointId: d.endpointId,
    customerId: d.customerId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status,
    attemptCount: d.attempts,
    nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
    createdAt: d.createdAt.toISOString(),
    finishedAt: d.finishedAt?.toISOString() ?? null,
    lastAttempt: d.lastAttempt === null ? null : attemptJson(d.lastAttempt),
  };
}

function attemptJson(a: AttemptRow): s.AttemptJson {
  return { attempt: a.attempt, at: a.startedAt.toISOString(), outcome: a.outcome, statusCode: a.statusCode, latencyMs: a.latencyMs, error: a.error, responseSnippet: a.response };
}
