import type { FastifyBaseLogger, FastifyInstance, FastifyRequest, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type pg from 'pg';
import { RelayError } from '../../errors.js';
import type { AddressGuard } from '../address-guard.js';
import { DeliveryQueries } from '../delivery-queries.js';
import { DeliveryStore } from '../delivery-store.js';
import { EndpointStore, type CustomerScope } from '../endpoint-store.js';
import type { WebhookTables } from '../webhook-tables.js';
import { IdempotencyStore } from './idempotency.js';
import type { Caller, TokenAuthority } from './tokens.js';

/** The Fastify instance of `webhooks api`, typed by its TypeBox schemas. */
export type ApiApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, TypeBoxTypeProvider>;

/** What the routes work with; the stores are the CLI's, scoped to the caller per request. */
export interface ApiServices {
  readonly pool: pg.Pool;
  readonly tables: WebhookTables;
  readonly guard: AddressGuard;
  readonly tokens: TokenAuthority;
  readonly idempotency: IdempotencyStore;
  /** Avro schemas by event type (OUTBOX_SCHEMAS_DIR), as JSON. */
  readonly eventSchemas: ReadonlyMap<string, unknown>;
  /** Base of portal links; null: the request's origin. */
  readonly publicUrl: string | null;
}

export function apiServices(input: Omit<ApiServices, 'idempotency'>): ApiServices {
  return { ...input, idempotency: new IdempotencyStore(input.pool, input.tables) };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authentication hook on every /v1 route. */
    caller: Caller | null;
  }
}

export function callerOf(request: FastifyRequest): Caller {
  if (request.caller === null) throw new RelayError('WEBHOOK_API_UNAUTHORIZED', 'no bearer token: send Authorization: Bearer <token>');
  return request.caller;
}

export function scopeOf(caller: Caller): CustomerScope {
  return caller.kind === 'customer' ? caller.customerId : null;
}

/** WEBHOOK_API_FORBIDDEN for a customer token on what only the platform may do. */
export function requirePlatform(caller: Caller, what: string): void {
  if (caller.kind !== 'platform') throw new RelayError('WEBHOOK_API_FORBIDDEN', `a customer token cannot ${what}: only the platform token can`);
}

/** The caller's view of the stores: a customer token's sees that customer's objects only. */
export function storesFor(services: ApiServices, caller: Caller): { readonly endpoints: EndpointStore; readonly deliveries: DeliveryQueries; readonly recorder: DeliveryStore } {
  const scope = scopeOf(caller);
  return {
    endpoints: new EndpointStore(services.pool, services.tables, services.guard, scope),
    deliveries: new DeliveryQueries(services.pool, services.tables, scope),
    recorder: new DeliveryStore(services.pool, services.tables),
  };
}
