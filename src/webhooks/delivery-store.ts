import type pg from 'pg';
import type { Closing } from './endpoint-gate.js';
import { EndpointHealthStore, type EndpointChange, type EndpointRules } from './endpoint-health-store.js';
import type { EndpointSlots } from './endpoint-shares.js';
import type { LoadedEndpoints } from './endpoint-store.js';
import { LeaseStore, type GrantedSlots } from './lease-store.js';
import type { ClaimedDelivery, EventToDeliver } from './lifecycle.js';
import { OwedStore } from './owed-store.js';
import { ResultStore, type ResultsToWrite, type ResultsWritten } from './result-store.js';
import { WithoutCustomerStore, type EventWithoutCustomer } from './without-customer-store.js';
import type { WebhookTables } from './webhook-tables.js';

export type { ClaimedDelivery, Completion, EventToDeliver, HeldBack } from './lifecycle.js';
export type { EndpointChange, EndpointRules } from './endpoint-health-store.js';

/**
 * The delivery store as a webhooks process uses it, one session pool for the modules that each
 * keep one thing: what is owed (owed-store.ts), leases (lease-store.ts), results
 * (result-store.ts), endpoints' health (endpoint-health-store.ts), events without a customer
 * (without-customer-store.ts). Every statement takes `now` from the caller's clock, so tests
 * drive the schedule.
 */
export class DeliveryStore {
  private readonly owed: OwedStore;
  private readonly leases: LeaseStore;
  private readonly health: EndpointHealthStore;
  private readonly results: ResultStore;
  private readonly withoutCustomer: WithoutCustomerStore;

  constructor(pool: pg.Pool, tables: WebhookTables) {
    this.owed = new OwedStore(tables);
    this.leases = new LeaseStore(pool, tables);
    this.health = new EndpointHealthStore(pool, tables);
    this.results = new ResultStore(pool, tables, this.owed, this.health, this.leases);
    this.withoutCustomer = new WithoutCustomerStore(pool, tables);
  }

  /** Owed deliveries recorded due, in the caller's transaction (OwedStore.record). */
  record(client: pg.ClientBase, events: readonly EventToDeliver[], firstAttemptAt: () => Date): Promise<number> {
    return this.owed.record(client, events, firstAttemptAt);
  }

  recordWithoutCustomer(events: readonly EventWithoutCustomer[]): Promise<void> {
    return this.withoutCustomer.record(events);
  }

  /** A lease of due deliveries (LeaseStore.claim). */
  claim(owner: string, now: Date, limit: number, leaseMs: number, rules: EndpointRules, slots: EndpointSlots, endpointsPerClaim?: number): Promise<ClaimedDelivery[]> {
    return this.leases.claim(owner, now, limit, leaseMs, rules, slots, endpointsPerClaim);
  }

  /** The fast path's lease: slots for first attempts sent before their rows are written (LeaseStore.takeSlots). */
  takeSlots(wanted: ReadonlyMap<string, number>, now: Date, slots: EndpointSlots, known: LoadedEndpoints): Promise<Map<string, GrantedSlots>> {
    return this.leases.takeSlots(wanted, now, slots, known);
  }

  /** Every result of a write, in one transaction (ResultStore.write). */
  write(results: ResultsToWrite, rules: EndpointRules): Promise<ResultsWritten> {
    return this.results.write(results, rules);
  }

  /** What closed an endpoint's gate, written at once (EndpointHealthStore.close). */
  closeEndpoint(closing: Closing, now: Date): Promise<EndpointChange | null> {
    return this.health.close(closing, now);
  }
}
