import type { ApiApp } from './app.js';

/**
 * 405 with `Allow` for a method a /v1 path does not take (DELETE /v1/session), rather than the
 * 404 of a path that does not exist: the caller learns the path is right and which methods it
 * takes. The methods are collected as the routes are added, so the answer cannot go stale.
 */
export class OtherMethods {
  private readonly taken = new Map<string, Set<string>>();
  private answering = false;

  /** Call before the routes are added: records each /v1 path's methods. */
  constructor(private readonly app: ApiApp) {
    app.addHook('onRoute', (route) => {
      if (this.answering || !route.url.startsWith('/v1/')) return;
      const methods = this.taken.get(route.url) ?? new Set<string>();
      for (const method of [route.method].flat()) methods.add(method);
      this.taken.set(route.url, methods);
    });
  }

  /** Call once every route is added: each /v1 path answers every other method 405. */
  answer(): void {
    this.answering = true;
    for (const [url, methods] of this.taken) {
      // Fastify answers HEAD wherever GET is.
      if (methods.has('GET')) methods.add('HEAD');
      const allow = [...methods].sort().join(', ');
      const path = url.replaceAll(/:(\w+)/g, '{$1}');
      this.app.route({
        method: this.app.supportedMethods.filter((method) => !methods.has(method)),
        url,
        schema: { hide: true },
        handler: async (request, reply) =>
          reply.code(405).header('allow', allow).send({ error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: `${request.method} is not a method of ${path}: it takes ${allow} (docs/openapi.json)` } }),
      });
    }
  }
}
