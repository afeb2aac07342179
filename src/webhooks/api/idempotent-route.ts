import type { FastifyReply, FastifyRequest } from 'fastify';
import { callerOf, type ApiServices } from './app.js';
import { callerKey } from './tokens.js';

/**
 * A create's answer, with `status`: run once per Idempotency-Key when the request has one (the
 * same key and request answered as the first time), every time when it has none.
 */
export async function idempotent(services: ApiServices, request: FastifyRequest, reply: FastifyReply, status: number, work: () => Promise<unknown>): Promise<FastifyReply> {
  const key = request.headers['idempotency-key'];
  if (typeof key !== 'string') return reply.code(status).send(await work());
  const scope = { caller: callerKey(callerOf(request)), route: `${request.method} ${request.url.split('?')[0]}`, key };
  const answer = await services.idempotency.once(scope, request.body ?? null, async () => ({ statusCode: status, body: await work() }));
  return reply.code(answer.statusCode).send(answer.body);
}
