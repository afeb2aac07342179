import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import { registerAjvFormats, type TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import { RelayError, errorMessage } from '../../errors.js';
import type { ApiApp, ApiServices } from './app.js';
import { errorAnswer } from './http-errors.js';
import { callerKey } from './tokens.js';
import type { ApiMetrics } from './metrics.js';
import { OtherMethods } from './other-methods.js';
import type { PortalFile } from './portal-files.js';
import { accountRoutes } from './routes/account.js';
import { deliveryRoutes } from './routes/deliveries.js';
import { endpointRoutes } from './routes/endpoints.js';
import { ErrorBody, MAX_PATH_PARAMETER_LENGTH } from './schemas.js';
import { validatorCompiler } from './validation.js';

/** Bodies are a few fields: anything near this size is a mistake or an attack. */
export const BODY_LIMIT_BYTES = 64 * 1024;
/** A request not fully received and answered in this time is ended (408). */
const REQUEST_TIMEOUT_MS = 10_000;
/** An idle connection is closed after this; a keep-alive one after KEEP_ALIVE_MS. */
const CONNECTION_TIMEOUT_MS = 30_000;
const KEEP_ALIVE_MS = 5_000;

/** The portal is the API's own page: nothing inline, nothing from elsewhere. */
const PORTAL_HEADERS = {
  'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
} as const;

/** On every /v1 answer, errors included. */
const V1_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' } as const;

export interface ApiServerOptions {
  readonly services: ApiServices;
  readonly metrics: ApiMetrics;
  readonly logger: FastifyBaseLogger;
  readonly portalFiles: ReadonlyMap<string, PortalFile>;
  /** Requests per minute per caller (the platform, or one customer); per address without a valid token. */
  readonly rateLimitPerMinute: number;
  /** Whether the store answers, for /readyz. */
  readonly ready: () => Promise<boolean>;
}

/**
 * The Fastify app of `webhooks api`: TypeBox schemas validate every request (unknown fields
 * refused) and make the OpenAPI document; every /v1 route needs a token; every error is
 * `{ "error": { "code", "message" } }`.
 */
export async function buildApiServer(options: ApiServerOptions): Promise<ApiApp> {
  registerAjvFormats();
  const app: ApiApp = Fastify({
    loggerInstance: options.logger,
    // Its own line per answer, at debug (onResponse): Fastify's would log every request at info.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_MS,
    return503OnClosing: true,
    // Every customer id a token is minted for must fit a path (/v1/customers/{id}): the router
    // measures a parameter in UTF-16 units, two for each character outside the BMP.
    routerOptions: { maxParamLength: MAX_PATH_PARAMETER_LENGTH },
    // What the router refuses before any route (a parameter longer than that, a URL that does not decode) gets the API's own error body.
    // Its reply skips the hooks (onSend): the /v1 headers are set here too.
    frameworkErrors: (error, request, reply) => {
      if (request.url.startsWith('/v1/')) void reply.headers(V1_HEADERS);
      void answerError(error, request, reply);
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  // Query strings and paths are converted (limit=50 is a number, limit=1.5 and limit=true are refused); bodies are taken as sent: "5" is no integer.
  app.setValidatorCompiler(validatorCompiler);
  app.decorateRequest('caller', null);
  // JSON only: a text body would reach the schemas as a string and be refused for its shape, not its type (415).
  app.removeContentTypeParser('text/plain');

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'outbox-relay webhooks API',
        version: '1',
        description:
          "Endpoints, deliveries, attempts and replay of outbox-relay's webhooks, for the platform's application (platform token) and its customers (customer tokens, minted by the platform: one customer's objects only). Every error is { error: { code, message } } with a code of docs/errors.md.",
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'The platform token, or a customer token (POST /v1/customer-tokens)' } } },
      security: [{ bearer: [] }],
    },
  });
  await app.register(rateLimit, {
    max: options.rateLimitPerMinute,
    timeWindow: 60_000,
    // Per verified caller (every token of one customer shares its budget), or per address for a request without a valid token.
    keyGenerator: (request) => {
      try {
        return callerKey(options.services.tokens.verify(request.headers.authorization));
      } catch {
        return `ip:${request.ip}`;
      }
    },
    allowList: (request) => !request.url.startsWith('/v1/'),
    errorResponseBuilder: (_request, context) => new RelayError('WEBHOOK_API_RATE_LIMITED', `more than ${context.max} requests a minute from this caller: retry in ${context.after}`),
  });

  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/v1/')) return;
    const schema = (route.schema ??= {});
    schema.response = { ...(schema.response as object), '4xx': ErrorBody, '5xx': ErrorBody };
  });
  app.addHook('onRequest', async (request) => {
    if (request.url.startsWith('/v1/')) request.caller = options.services.tokens.verify(request.headers.authorization);
  });
  // A /v1 answer may hold a secret shown once (a signing secret, a customer token) or a customer's
  // data: no cache or proxy keeps it, and no browser reads it as anything but its type. Errors too.
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.url.startsWith('/v1/')) void reply.headers(V1_HEADERS);
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    options.metrics.requests.inc({ route, method: request.method, status: String(reply.statusCode) });
    options.metrics.seconds.observe({ route, method: request.method }, reply.elapsedTime / 1000);
    // Never the token, the body or the query (ids only in the route pattern).
    request.log.debug({ method: request.method, route, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'webhooks api: answered');
  });
  app.setErrorHandler(answerError);
  app.setNotFoundHandler((request, reply) => reply.code(404).send({ error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: `no route ${request.method} ${request.url.split('?')[0]}: docs/openapi.json lists them` } }));

  const otherMethods = new OtherMethods(app);
  accountRoutes(app, options.services);
  endpointRoutes(app, options.services);
  deliveryRoutes(app, options.services);
  otherMethods.answer();

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  app.get('/healthz', { schema: { hide: true } }, async () => 'ok\n');
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => ((await options.ready()) ? 'ready\n' : reply.code(503).send('the store does not answer\n')));
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => reply.type(options.metrics.registry.contentType).send(await options.metrics.registry.metrics()));
  portalRoutes(app, options.portalFiles);
  return app;
}

function answerError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answer = errorAnswer(error);
  if (answer.status >= 500) request.log.error({ err: errorMessage(error), route: request.routeOptions.url }, 'webhooks api: request failed');
  return reply.code(answer.status).send(answer.body);
}

function portalRoutes(app: ApiApp, files: ReadonlyMap<string, PortalFile>): void {
  const send = (name: string) => files.get(name);
  app.get('/portal', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/portal/', 301));
  app.get<{ Params: { file?: string } }>('/portal/:file', { schema: { hide: true } }, async (request, reply) => {
    const name = request.params.file || 'index.html';
    const file = send(name);
    if (file === undefined) return reply.code(404).headers(PORTAL_HEADERS).type('text/plain; charset=utf-8').send('not found\n');
    return reply
      .headers(PORTAL_HEADERS)
      .header('cache-control', name === 'index.html' ? 'no-store' : 'no-cache')
      .type(file.contentType)
      .send(file.body);
  });
}
