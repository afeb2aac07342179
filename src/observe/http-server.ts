import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface HttpEndpoints {
  readonly registry: Registry;
  /** Readiness with a short reason, e.g. [true, 'active'] or [false, 'starting']. */
  readonly readiness: () => readonly [boolean, string];
}

/**
 * /metrics for Prometheus, /healthz (the process answers) and /readyz (streaming, or a healthy
 * standby) for Kubernetes probes.
 */
export async function startHttpServer(host: string, port: number, endpoints: HttpEndpoints): Promise<Server> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      endpoints.registry.metrics().then(
        (body) => {
          response.writeHead(200, { 'content-type': endpoints.registry.contentType });
          response.end(body);
        },
        (error: unknown) => {
          response.writeHead(500, { 'content-type': 'text/plain' });
          response.end(String(error));
        },
      );
      return;
    }
    if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('ok\n');
      return;
    }
    if (path === '/readyz') {
      const [ready, reason] = endpoints.readiness();
      response.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' });
      response.end(`${reason}\n`);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' });
    response.end('not found: try /metrics, /healthz or /readyz\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
