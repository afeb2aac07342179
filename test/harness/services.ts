/**
 * Where the integration tests find Postgres, Kafka and the schema registry, and how fault
 * tests stop, kill and start them. Resolved once per run by global-setup.ts and handed to the
 * test files through vitest's provide/inject.
 */
export type ServiceName = 'pg' | 'kafka' | 'registry';

export interface ServiceEndpoints {
  readonly databaseUrl: string;
  readonly kafkaBrokers: string;
  readonly schemaRegistryUrl: string;
  /**
   * How fault tests control the services: the local stack script, docker container ids, or
   * nothing (services given in the environment belong to someone else).
   */
  readonly control:
    | {
        readonly kind: 'stack';
        readonly script: string;
        readonly stackDir: string;
        /** The stack's service that `pg` means: pg, or pg14 ... pg18 (OUTBOX_TEST_POSTGRES). */
        readonly postgres: string;
      }
    | { readonly kind: 'docker'; readonly containers: Readonly<Record<ServiceName, string>> }
    | { readonly kind: 'none'; readonly reason: string };
}

declare module 'vitest' {
  export interface ProvidedContext {
    services: ServiceEndpoints;
  }
}
