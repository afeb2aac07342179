/**
 * The package's main entry is what applications import: the outbox writer and the idempotent
 * consumer (the same as `outbox-relay/client`). The relay itself runs as `outbox-relay run`.
 */
export * from './client/index.js';
