import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Requests of `webhooks api`, by route (its pattern, never its ids), method and status. */
export function createApiMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    requests: new Counter({ name: 'outbox_webhook_api_requests_total', help: 'Requests answered by webhooks api, by route pattern, method and status.', labelNames: ['route', 'method', 'status'] as const, registers }),
    seconds: new Histogram({
      name: 'outbox_webhook_api_request_duration_seconds',
      help: 'Time to answer each request of webhooks api, by route pattern and method.',
      labelNames: ['route', 'method'] as const,
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
  };
}

export type ApiMetrics = ReturnType<typeof createApiMetrics>;
