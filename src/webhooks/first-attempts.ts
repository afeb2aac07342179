import { GroupedWrites } from './grouped-writes.js';
import type { ClaimedDelivery, DeliveryStore, EndpointRules, FirstAttemptsToRecord } from './delivery-store.js';
import type { FirstAttempts, FirstAttemptWait, Reservation } from './dispatcher.js';
import type { ConsumedBatch, ConsumedMessage } from '../kafka/group-consumer.js';
import type { LoadedEndpoints } from './endpoint-store.js';
import type { DecodedEvent, SendAtOnce } from './intake.js';
import type { WebhookMetrics } from './metrics.js';

/**
 * How long a chunk's recording waits for its first attempts (sent before it) to end: those that
 * did are written once, with their results; those still in flight are recorded leased and their
 * results written when they come, as a claimed delivery's are. At most half a second (far
 * above a healthy endpoint's answer, far below a hanging one's timeout); once half of the
 * chunk's attempts ended, as long again as they took, at least 50 ms: a hanging endpoint
 * among healthy ones is handed over soon, not half a second later each time.
 */
const FIRST_ATTEMPT_WAIT: FirstAttemptWait = { maxMs: 500, stragglerMs: 50 };

/** What the send-first path shares with the intake's other path: reading a batch, and the dispatcher's slots. */
export interface BatchReader {
  decode(topic: string, partition: number, message: ConsumedMessage): Promise<DecodedEvent | null>;
  /** The endpoints an event is owed to, by the subscriptions as last loaded. */
  owedTo(event: DecodedEvent): readonly string[];
  /** The endpoints as loaded with those subscriptions: what a first attempt to each needs. */
  loadedEndpoints(): LoadedEndpoints;
  /** The dispatcher's free slots for the next chunk, for at most `messages` more events. */
  reserve(messages: number): Promise<Reservation>;
  /** The most deliveries one chunk holds. */
  chunkBound(reserved: Reservation | null): number;
}

export interface FirstAttemptOptions {
  readonly store: DeliveryStore;
  readonly sendAtOnce: SendAtOnce;
  readonly rules: EndpointRules;
  readonly metrics: WebhookMetrics;
  readonly firstAttemptAt: () => Date;
  /** Called after deliveries were recorded due: the dispatcher looks for them at once. */
  readonly onRecorded: () => void;
}

/** One chunk's share of a recording: the recording's own time, lease and schedule apply to every chunk in it. */
type ChunkToRecord = Pick<FirstAttemptsToRecord, 'events' | 'due' | 'ended' | 'heldBack' | 'inFlight'>;

/** A delivery owed, before it is known whether it goes at once or is recorded due. */
interface Owed {
  readonly event: DecodedEvent;
  readonly endpointId: string;
}

/**
 * The intake's path for a batch nobody recorded before (see WebhookIntake.take): a healthy
 * endpoint's delivery is sent first, then written once, with its first attempt's result.
 */
export class FirstAttemptPath {
  /** Chunks' recordings: one transaction at a time, each taking every chunk that came meanwhile (see record). */
  private readonly recordings = new GroupedWrites<ChunkToRecord, ReadonlyMap<ClaimedDelivery, string>>((chunks) => this.recordChunks(chunks));

  constructor(
    private readonly options: FirstAttemptOptions,
    private readonly reader: BatchReader,
  ) {}

  /**
   * A batch whose first attempts go before their deliveries are recorded: per chunk, the
   * endpoints' slots are taken (DeliveryStore.takeSlots), the first attempts sent, and then each
   * delivery written once, with its attempt's result (or leased, if still in flight after
   * FIRST_ATTEMPT_WAIT), in one transaction with the deliveries that got no slot (recorded
   * due) — committed before the chunk's offset. The next chunk is sent meanwhile; chunks are
   * recorded in order. A crash before a chunk's recording sends it again (its offset was not
   * committed), with the same webhook-id. False if the partition went elsewhere meanwhile.
   */
  async take(batch: ConsumedBatch): Promise<boolean> {
    const { sendAtOnce } = this.options;
    const { reader } = this;
    let chunk: Owed[] = [];
    let reserved: Reservation | null = null;
    /** The offset up to which every message's deliveries are in a chunk sent (null: none yet). */
    let upTo: string | null = null;
    let chunkUpTo: string | null = null;
    /** The last chunk's recording (settled, whatever its outcome), and its offset marked after every one before it. */
    let recorded: Promise<void> = Promise.resolve();
    let recording: Promise<void> = Promise.resolve();
    const send = async () => {
      const items = chunk;
      const slots = reserved?.slots ?? 0;
      const offset = upTo;
      chunk = [];
      reserved = null;
      chunkUpTo = upTo;
      if (items.length === 0 && offset === null) {
        sendAtOnce.release(slots);
        return;
      }
      const attempts = await this.sendChunk(items, slots);
      const [previousRecorded, previous] = [recorded, recording];
      let settled: () => void = () => undefined;
      recorded = new Promise((resolve) => (settled = resolve));
      recording = (async () => {
        const sent = await attempts.sent;
        try {
          // Recorded in consumption order (an ordered endpoint's deliveries get their ids in it),
          // and whether the chunk before was recorded or not: what was sent is in the store then,
          // so that a re-read does not send it again.
          await previousRecorded;
          const ids = await this.record({ ...attempts.toRecord, ...sent }).finally(settled);
          for (const delivery of sent.inFlight) {
            const id = ids.get(delivery);
            if (id === undefined) sendAtOnce.abandon(delivery);
            else sendAtOnce.adopt(delivery, id);
          }
        } catch (error) {
          for (const delivery of sent.inFlight) sendAtOnce.abandon(delivery);
          await previous.catch(() => undefined);
          throw error;
        } finally {
          sendAtOnce.release(sent.ended.length + sent.heldBack.length);
        }
        // Offsets in order: a chunk whose recording failed stops the ones after it.
        await previous;
        if (offset !== null) await batch.recorded(offset);
      })();
      // Awaited by the next chunk's recording, or at the end: never left unhandled.
      recording.catch(() => undefined);
    };
    let whole = true;
    try {
      for (const [index, message] of batch.messages.entries()) {
        if (!batch.owned()) {
          whole = false;
          break;
        }
        const event = await reader.decode(batch.topic, batch.partition, message);
        for (const endpointId of event ? reader.owedTo(event) : []) {
          reserved ??= await reader.reserve(batch.messages.length - index);
          if (chunk.length >= reader.chunkBound(reserved)) {
            await send();
            reserved = await reader.reserve(batch.messages.length - index);
          }
          chunk.push({ event: event!, endpointId });
        }
        upTo = message.offset;
      }
      // A partition gone elsewhere: the chunk being made is its next reader's (nothing of it was sent).
      if (whole && (chunk.length > 0 || upTo !== chunkUpTo)) await send();
    } finally {
      if (reserved) sendAtOnce.release((reserved as Reservation).slots);
      await recording.catch(() => undefined);
    }
    await recording;
    return whole;
  }

  /**
   * Takes `slots` of the chunk's endpoints' in-flight slots and sends those deliveries' first
   * attempts; the rest of the chunk is recorded due. Resolves once they are sent (their
   * results come with `sent`).
   */
  private async sendChunk(items: readonly Owed[], slots: number): Promise<{ readonly sent: Promise<FirstAttempts>; readonly toRecord: Omit<ChunkToRecord, keyof FirstAttempts> }> {
    const { store, sendAtOnce } = this.options;
    const wanted = new Map<string, number>();
    for (const { endpointId } of items) wanted.set(endpointId, (wanted.get(endpointId) ?? 0) + 1);
    let granted: Awaited<ReturnType<DeliveryStore['takeSlots']>> = new Map();
    try {
      const readAt = performance.now();
      if (slots > 0) granted = await store.takeSlots(wanted, sendAtOnce.lease().now, sendAtOnce.slots, this.reader.loadedEndpoints());
      for (const endpointId of granted.keys()) sendAtOnce.leasedFrom(endpointId, readAt);
    } catch (error) {
      sendAtOnce.release(slots);
      throw error;
    }
    const first: ClaimedDelivery[] = [];
    const due = new Map<DecodedEvent, string[]>();
    const left = new Map([...granted].map(([endpointId, endpoint]) => [endpointId, endpoint.slots]));
    for (const { event, endpointId } of items) {
      const endpoint = granted.get(endpointId);
      const free = left.get(endpointId) ?? 0;
      // Of an endpoint's deliveries, the first in consumption order get its slots.
      if (endpoint && free > 0 && first.length < slots) {
        left.set(endpointId, free - 1);
        first.push({ id: '', eventId: event.eventId, eventType: event.eventType, endpointId, attempt: 1, failures: 0, body: event.body, producedAt: event.producedAt, url: endpoint.url, secrets: endpoint.secrets, headers: endpoint.headers });
      } else {
        const endpoints = due.get(event);
        if (endpoints) endpoints.push(endpointId);
        else due.set(event, [endpointId]);
      }
    }
    sendAtOnce.release(slots - first.length);
    // An endpoint's slots beyond the process's (the chunk's first attempts fill them in order) go back to its share.
    for (const [endpointId, unused] of left) sendAtOnce.slots.release(endpointId, unused);
    const events = [...new Set(items.map((item) => item.event))].map((event) => ({ ...event, endpointIds: [] }));
    return {
      sent: sendAtOnce.sendFirst(first, FIRST_ATTEMPT_WAIT),
      toRecord: { events, due: [...due].map(([event, endpointIds]) => ({ ...event, endpointIds })) },
    };
  }

  /**
   * Records first attempts (DeliveryStore.recordFirstAttempts), one transaction at a time for
   * every chunk that came meanwhile (the partitions taken at once), as the intake does for
   * chunks recorded first. Resolves with the ids of those still in flight.
   */
  private record(input: ChunkToRecord): Promise<ReadonlyMap<ClaimedDelivery, string>> {
    // Messages that owed nothing (no subscriber, not an event): their offsets need no transaction.
    if (input.ended.length === 0 && input.heldBack.length === 0 && input.inFlight.length === 0 && input.due.length === 0) return Promise.resolve(new Map());
    return this.recordings.push(input);
  }

  private async recordChunks(inputs: readonly ChunkToRecord[]): Promise<ReadonlyMap<ClaimedDelivery, string>[]> {
    const { options } = this;
    // The recording's own time and lease, for every chunk in it: attempts still in flight are leased from now.
    const result = await options.store.recordFirstAttempts(
      {
        ...options.sendAtOnce.lease(),
        events: inputs.flatMap((input) => input.events),
        ended: inputs.flatMap((input) => input.ended),
        inFlight: inputs.flatMap((input) => input.inFlight),
        heldBack: inputs.flatMap((input) => input.heldBack),
        due: inputs.flatMap((input) => input.due),
        firstAttemptAt: options.firstAttemptAt,
      },
      options.rules,
    );
    options.metrics.deliveriesRecorded.inc(result.added);
    options.sendAtOnce.reportEndpointChanges(result.changes);
    if (inputs.some((input) => input.due.length > 0 || input.heldBack.length > 0)) options.onRecorded();
    return inputs.map(() => result.inFlight);
  }
}
