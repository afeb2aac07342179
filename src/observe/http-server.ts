import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface HttpEndpoints {
  readonly registry: Registry;
  /** Readiness with a short reason, e.g. [true, 'active'] or [false, 'starting']. */
  readonly readiness: () => readonly [boolean, string];
  /** Liveness with a short reason: false when the process runs but cannot make progress. */
  readonly liveness: () => readonly [boolean, string];
}

/**
 * /metrics for Prometheus; /healthz (liveness: alive and able to make progress; Kubernetes
 * restarts the pod when it fails) and /readyz (streaming, or a healthy standby).
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
    const probe = path === '/healthz' ? endpoints.liveness : path === '/readyz' ? endpoints.readiness : null;
    if (probe) {
      const [ok, reason] = probe();
      response.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' });
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
