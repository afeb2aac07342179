import type { FastifyError } from 'fastify';
import { errorCode, errorMessage, sqlState, type ErrorCode } from '../../errors.js';
import { CUSTOMER_ID_MAX_LENGTH } from '../customer-rule.js';
import { MAX_PATH_PARAMETER_LENGTH, PATTERN_MEANINGS } from './schemas.js';

/** An error as `webhooks api` answers it: `{ "error": { "code", "message" } }` with its status. */
export interface ErrorAnswer {
  readonly status: number;
  readonly body: { readonly error: { readonly code: ErrorCode; readonly message: string } };
}

const STATUS: Partial<Record<ErrorCode, number>> = {
  WEBHOOK_API_UNAUTHORIZED: 401,
  WEBHOOK_API_TOKEN_EXPIRED: 401,
  WEBHOOK_API_FORBIDDEN: 403,
  WEBHOOK_NOT_FOUND: 404,
  WEBHOOK_API_INVALID_REQUEST: 400,
  WEBHOOK_API_INVALID_CURSOR: 400,
  WEBHOOK_ENDPOINT_INVALID: 400,
  WEBHOOK_ADDRESS_REFUSED: 422,
  WEBHOOK_API_RATE_LIMITED: 429,
  WEBHOOK_SCHEMA_MISSING: 503,
  SOURCE_DISCONNECTED: 503,
};

/**
 * Fastify's own refusals (validation, JSON that does not parse, a body over the limit, a media
 * type it cannot read) become WEBHOOK_API_INVALID_REQUEST with Fastify's status; the relay's
 * errors the API expects keep their code and status; anything else (an unexpected code included) is
 * 500 INTERNAL, its detail logged and not shown.
 */
export function errorAnswer(error: unknown): ErrorAnswer {
  const fastify = error as Partial<FastifyError> & { readonly validationContext?: string };
  if (fastify.validation) {
    const first = fastify.validation[0];
    const field = `${fastify.validationContext ?? 'request'}${first?.instancePath ? first.instancePath.replaceAll('/', '.') : ''}`;
    // TypeBox reports a field an object does not name (additionalProperties: false) as "schema is false" at the field.
    const pattern = first?.keyword === 'pattern' ? PATTERN_MEANINGS.get(String((first.params as { pattern?: unknown }).pattern)) : undefined;
    const problem = first?.message === 'schema is false' ? 'is not a field of this route (docs/openapi.json lists them)' : (pattern ?? first?.message ?? 'is invalid');
    return answer(400, 'WEBHOOK_API_INVALID_REQUEST', `${field}: ${problem}`);
  }
  // The router's own message repeats the whole path, however long: say which limit it passed instead.
  if (fastify.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return answer(414, 'WEBHOOK_API_INVALID_REQUEST', `a path parameter is longer than ${MAX_PATH_PARAMETER_LENGTH} UTF-16 units: no id is (a customer id is at most ${CUSTOMER_ID_MAX_LENGTH} characters, an endpoint id 64, a delivery id 18 digits)`);
  }
  if (typeof fastify.code === 'string' && fastify.code.startsWith('FST_') && typeof fastify.statusCode === 'number' && fastify.statusCode < 500) {
    return answer(fastify.statusCode, 'WEBHOOK_API_INVALID_REQUEST', fastify.message ?? fastify.code);
  }
  const code = errorCode(error);
  if (code === 'WEBHOOK_API_IDEMPOTENCY_CONFLICT') return answer(((error as { details?: { status?: number } }).details?.status) ?? 409, code, errorMessage(error));
  const status = STATUS[code];
  if (status !== undefined) return answer(status, code, errorMessage(error));
  // Any other code (CONFIG_INVALID from a secret file, ...) is a fault of the server, not of the request: its message may name a path, so it is logged, not shown.
  // A statement past the pool's statement_timeout: the store is slow, not the request wrong.
  if (sqlState(error) === '57014') return answer(503, 'SOURCE_DISCONNECTED', 'the store did not answer in time; retry');
  // A value Postgres text cannot hold (U+0000) that a schema let through: the request's fault, not the server's.
  if (sqlState(error) === '22021') return answer(400, 'WEBHOOK_API_INVALID_REQUEST', 'a value holds a character the store cannot keep (a NUL, \\u0000): remove it');
  return answer(500, 'INTERNAL', 'an internal error; it is logged');
}

function answer(status: number, code: ErrorCode, message: string): ErrorAnswer {
  return { status, body: { error: { code, message } } };
}
