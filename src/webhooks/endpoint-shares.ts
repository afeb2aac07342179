import { createHash } from 'node:crypto';

/*
 * Each endpoint's limit of deliveries in flight (max_in_flight, one while its circuit is
 * half-open) holds over every webhooks process, without a write per delivery: each process
 * counts its own deliveries in flight in memory and takes no more than its share of the limit.
 *
 * The shares are cut by membership: the processes alive (process-heartbeat.ts: a row each,
 * renewed every second, stale after MEMBER_TTL_MS) sorted by name, the limit divided evenly
 * and the remainder given, one each, to the members after a place the endpoint's id hashes to
 * (so that an endpoint with a limit of 1 and two processes is not always the same process's).
 * Every member computing the same view, the shares add up to the limit.
 *
 * While the view changes (a process starts, stops or dies), a process keeps to the smallest of
 * its shares in every view it moved through since the last one every member agreed on, and a
 * new process takes nothing: a view is agreed once every member of it reported, in its
 * heartbeat, that it moved to that view and holds no more than its share of it. The shares of
 * different processes then never add up to more than the limit, whichever views they hold; a
 * process whose heartbeat failed for MEMBER_TTL_MS (the others may have counted it out) takes
 * nothing until it is a member again. What a process that died had in flight ended with it
 * (its requests' connections closed); its share is free once its heartbeat is stale.
 */

/** A process whose heartbeat is older than this is counted out of the membership. */
export const MEMBER_TTL_MS = 5_000;

/** See EndpointShares.heard. */
const MAX_VIEWS_MOVED_THROUGH = 8;

/** An endpoint's limit, as a lease of slots is asked for it. */
export interface EndpointLimit {
  readonly endpointId: string;
  readonly maxInFlight: number;
  /** Its circuit is half-open: one probe at a time, over every process. */
  readonly halfOpen: boolean;
}

/** The slots a process holds per endpoint: the port the dispatcher and the intake take and give back through. */
export interface EndpointSlots {
  /** Up to `wanted` of this process's free share of the endpoint's limit, held until released. */
  take(limit: EndpointLimit, wanted: number): number;
  release(endpointId: string, slots: number): void;
}

/** What a member wrote in its last heartbeat. */
export interface MemberReport {
  readonly owner: string;
  /** The view it moved to (viewDigest). */
  readonly view: string;
  /** It holds no more than its share of that view for every endpoint. */
  readonly settled: boolean;
}

type View = readonly string[];

interface Held {
  inFlight: number;
  limit: number;
}

export class EndpointShares implements EndpointSlots {
  private readonly held = new Map<string, Held>();
  /** The last view every member agreed on (empty: none yet, this process takes nothing). */
  private agreed: View = [];
  /** The views moved through since, newest last: this process keeps to its smallest share of each. */
  private moving: View[] = [];
  /** Performance.now() of the last heartbeat written; null before the first. */
  private lastHeartbeatAt: number | null = null;

  /** `agreed`: a fixed membership (a test's, or one process's), taken as agreed from the start. */
  constructor(
    private readonly owner: string,
    agreed: View = [],
    private readonly now: () => number = () => performance.now(),
  ) {
    this.agreed = [...agreed].sort();
    if (agreed.length > 0) this.lastHeartbeatAt = Infinity;
  }

  /** One process alone, its membership agreed without a heartbeat: for tests of the dispatcher and the store. */
  static alone(owner: string): EndpointShares {
    return new EndpointShares(owner, [owner]);
  }

  take(limit: EndpointLimit, wanted: number): number {
    const held = this.held.get(limit.endpointId);
    const inFlight = held?.inFlight ?? 0;
    const max = limit.halfOpen ? 1 : limit.maxInFlight;
    const taken = Math.max(0, Math.min(wanted, this.share(limit.endpointId, max) - inFlight));
    if (taken > 0 || held) this.held.set(limit.endpointId, { inFlight: inFlight + taken, limit: max });
    return taken;
  }

  release(endpointId: string, slots: number): void {
    const held = this.held.get(endpointId);
    if (!held || slots <= 0) return;
    held.inFlight -= slots;
    if (held.inFlight <= 0) this.held.delete(endpointId);
  }

  /** What this process writes in its next heartbeat. */
  report(): { readonly view: string; readonly settled: boolean } {
    const target = this.moving.at(-1) ?? this.agreed;
    return { view: viewDigest(target), settled: this.holdsWithin(target) };
  }

  /**
   * A heartbeat was written at (Postgres's) `writtenAt`, the one before it at `previousAt` (null:
   * none), and these are the other members' reports. Moves to the view they make, and agrees on
   * it once every member of it reported being settled in it.
   */
  heard(others: readonly MemberReport[], previousAt: Date | null, writtenAt: Date): void {
    this.lastHeartbeatAt = this.now();
    // Longer than a member's life since the last heartbeat: the others may have counted this
    // process out (and taken its share): it starts again as a new member.
    if (previousAt === null || writtenAt.getTime() - previousAt.getTime() >= MEMBER_TTL_MS) {
      this.agreed = [];
      this.moving = [];
    }
    const live = [this.owner, ...others.map((member) => member.owner)].sort();
    const target = this.moving.at(-1) ?? this.agreed;
    if (!sameView(live, target)) {
      if (sameView(live, this.agreed)) this.moving = [];
      // Views changing faster than the members agree (processes flapping): holding to none of
      // them, and taking nothing until the latest is agreed, is as safe and keeps this bounded.
      else if (this.moving.length >= MAX_VIEWS_MOVED_THROUGH) [this.agreed, this.moving] = [[], [live]];
      else this.moving.push(live);
    }
    const moved = this.moving.at(-1);
    if (!moved) return;
    const digest = viewDigest(moved);
    const reports = new Map(others.map((member) => [member.owner, member]));
    const everyone = moved.every((owner) => owner === this.owner || (reports.get(owner)?.view === digest && reports.get(owner)?.settled));
    if (everyone && this.holdsWithin(moved)) {
      this.agreed = moved;
      this.moving = [];
    }
  }

  /** The membership as this process holds it, for logs and status. */
  describe(): { readonly members: number; readonly agreed: boolean } {
    return { members: (this.moving.at(-1) ?? this.agreed).length, agreed: this.moving.length === 0 && this.agreed.length > 0 };
  }

  /** This process's share of an endpoint's limit now: its smallest in every view it holds to. */
  private share(endpointId: string, max: number): number {
    if (this.lastHeartbeatAt === null || this.now() - this.lastHeartbeatAt >= MEMBER_TTL_MS) return 0;
    let share = shareOf(this.agreed, this.owner, endpointId, max);
    for (const view of this.moving) share = Math.min(share, shareOf(view, this.owner, endpointId, max));
    return share;
  }

  private holdsWithin(view: View): boolean {
    for (const [endpointId, held] of this.held) if (held.inFlight > shareOf(view, this.owner, endpointId, held.limit)) return false;
    return true;
  }
}

/** `owner`'s share of `max` in `view` (0 if not a member): an even part, and one of the remainder for the members after the endpoint's place. */
export function shareOf(view: View, owner: string, endpointId: string, max: number): number {
  const rank = view.indexOf(owner);
  if (rank < 0) return 0;
  const members = view.length;
  const place = endpointPlace(endpointId) % members;
  return Math.floor(max / members) + ((rank - place + members) % members < max % members ? 1 : 0);
}

/** FNV-1a of the id: where an endpoint's remainder starts, the same in every process. */
function endpointPlace(endpointId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < endpointId.length; i += 1) {
    hash ^= endpointId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

function sameView(a: View, b: View): boolean {
  return a.length === b.length && a.every((owner, i) => owner === b[i]);
}

export function viewDigest(view: View): string {
  return createHash('sha1').update(view.join('\n')).digest('hex').slice(0, 16);
}
