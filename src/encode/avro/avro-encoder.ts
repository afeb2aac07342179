import type avro from 'avsc';
import type { Logger } from 'pino';
import { errorMessage, PoisonEventError, RelayError } from '../../errors.js';
import type { OutboxEvent } from '../../event.js';
import type { PayloadEncoder } from '../encoder.js';
import type { SchemaRegistryPort } from './registry.js';
import type { LocalSchema } from './schema-set.js';
import { subjectName, subjectNeedsTopic, type SubjectStrategy } from './subjects.js';
import { compileTranscoder, type Transcoder } from './transcoder.js';
import { validationProblems } from './validation.js';
import { frame, frameBody } from './wire.js';
import { JsonText } from '../../decode/json-text.js';

/** The Avro schema of the Kafka key: `"string"` (aggregate id as Avro string) or a record of one string field. */
export interface KeySchema {
  readonly file: string;
  readonly fullName: string | undefined;
  readonly definition: string;
  readonly type: avro.Type;
  /** The record field holding the aggregate id; undefined for a plain string schema. */
  readonly field: string | undefined;
}

export interface AvroEncoderOptions {
  readonly schemas: ReadonlyMap<string, LocalSchema>;
  readonly schemasDir: string;
  readonly registry: SchemaRegistryPort;
  readonly strategy: SubjectStrategy;
  /** Register local schemas (development), or only look up versions registered by others (production). */
  readonly autoRegister: boolean;
  readonly keySchema?: KeySchema | null;
  readonly logger: Logger;
}

interface Registrable {
  readonly file: string;
  readonly fullName: string | undefined;
  readonly definition: string;
}

/**
 * Payload -> Confluent-framed Avro, with the schema of the event type. Types are compiled once
 * (at load); schema ids are cached per schema and subject, so once an id is known encoding is
 * synchronous. Only a first use awaits the registry.
 *
 * The id cache is dropped whenever the registry cannot be reached: a registry that comes back
 * may have lost its state (in-memory storage) and give new ids, so every schema is registered
 * or looked up again rather than framed with an id that may now mean something else.
 */
export class AvroEncoder implements PayloadEncoder {
  readonly format = 'avro' as const;
  /** schema -> topic ('' when the subject does not depend on it) -> id. */
  private readonly ids = new Map<Registrable, Map<string, number>>();
  private readonly pending = new Map<string, Promise<number>>();
  /** Per schema: JSON bytes -> Avro body, compiled at first use (null: that schema always takes the parsing path). */
  private readonly transcoders = new Map<LocalSchema, Transcoder | null>();

  constructor(private readonly options: AvroEncoderOptions) {}

  encode(event: OutboxEvent, topic: string): Buffer | Promise<Buffer> {
    const schema = this.options.schemas.get(event.eventType);
    if (!schema) {
      throw new PoisonEventError('ENCODE_NO_SCHEMA', `no Avro schema for event type "${event.eventType}" (expected ${this.options.schemasDir}/**/${event.eventType}.avsc)`, {
        details: { eventType: event.eventType },
      });
    }
    if (event.payload instanceof JsonText) {
      const body = this.transcoderOf(schema)?.(event.payload.bytes);
      if (body) return this.withIdFramed(schema, topic, body);
    }
    // Anything the transcoder does not take: parsed, checked (naming every misfit) and encoded by avsc.
    const payload = jsonValueOf(event.payload);
    check(schema.type, payload, () => `payload of ${event.eventType} does not fit ${schema.file}`);
    return this.withId(schema, 'value', topic, payload);
  }

  private transcoderOf(schema: LocalSchema): Transcoder | null {
    let transcoder = this.transcoders.get(schema);
    if (transcoder === undefined) this.transcoders.set(schema, (transcoder = compileTranscoder(schema.type)));
    return transcoder;
  }

  /** `body` (from the transcoder, with room for the header) framed with the value schema's id. */
  private withIdFramed(schema: LocalSchema, topic: string, body: Buffer): Buffer | Promise<Buffer> {
    const cacheTopic = subjectNeedsTopic(this.options.strategy) ? topic : '';
    const id = this.ids.get(schema)?.get(cacheTopic);
    if (id !== undefined) return frameBody(id, body);
    return this.resolveId(schema, 'value', cacheTopic).then((resolved) => frameBody(resolved, body));
  }

  /** The Avro key for `event`, when a key schema is configured; the aggregate id as a string otherwise. */
  encodeKey(event: OutboxEvent, topic: string): Buffer | string | Promise<Buffer> {
    const key = this.options.keySchema;
    if (!key) return event.aggregateId;
    const value = key.field === undefined ? event.aggregateId : { [key.field]: event.aggregateId };
    check(key.type, value, () => `aggregate id does not fit the key schema ${key.file}`);
    return this.withId(key, 'key', topic, value);
  }

  /**
   * Resolves at start every subject that does not depend on an event: registering (auto-register
   * on) or finding (off) each schema, so an incompatible change or a missing version stops the
   * start with every file named. `topicsFor` gives an event type's topics when the topic templates
   * allows knowing it in advance (null otherwise: that subject is resolved on first use).
   */
  async prepare(topicsFor: (eventType: string) => readonly string[]): Promise<number> {
    const failures: RelayError[] = [];
    let resolved = 0;
    const attempt = async (schema: Registrable, part: 'key' | 'value', topic: string) => {
      try {
        await this.resolveId(schema, part, topic);
        resolved += 1;
      } catch (error) {
        if (error instanceof RelayError && !error.retriable) failures.push(error);
        else throw error;
      }
    };
    for (const schema of this.options.schemas.values()) {
      for (const topic of subjectNeedsTopic(this.options.strategy) ? topicsFor(schema.eventType) : ['']) {
        await attempt(schema, 'value', topic);
        if (this.options.keySchema) await attempt(this.options.keySchema, 'key', topic);
      }
    }
    if (failures.length === 1) throw failures[0]!;
    if (failures.length > 1) {
      throw new RelayError(failures[0]!.code, `${failures.length} schemas cannot be used:\n  - ${failures.map((failure) => failure.message).join('\n  - ')}`, { cause: failures[0] });
    }
    return resolved;
  }

  /** `value` (already checked) framed with its schema's id; waits only for an id not known yet. */
  private withId(schema: Registrable & { readonly type: avro.Type }, part: 'key' | 'value', topic: string, value: unknown): Buffer | Promise<Buffer> {
    const cacheTopic = subjectNeedsTopic(this.options.strategy) ? topic : '';
    const id = this.ids.get(schema)?.get(cacheTopic);
    if (id !== undefined) return frame(id, schema.type, value);
    return this.resolveId(schema, part, cacheTopic).then((resolved) => frame(resolved, schema.type, value));
  }

  private resolveId(schema: Registrable, part: 'key' | 'value', topic: string): Promise<number> {
    const subject = subjectName(this.options.strategy, part, topic, schema.fullName);
    const pendingKey = `${subject}\u0000${schema.file}`;
    const inFlight = this.pending.get(pendingKey);
    if (inFlight) return inFlight;
    const request = this.fetchId(schema, subject)
      .then((id) => {
        let byTopic = this.ids.get(schema);
        if (!byTopic) this.ids.set(schema, (byTopic = new Map()));
        byTopic.set(topic, id);
        this.options.logger.info({ subject, schemaId: id, file: schema.file }, this.options.autoRegister ? 'schema registered' : 'schema found in the registry');
        return id;
      })
      .catch((error: unknown) => {
        if (error instanceof RelayError && error.retriable) {
          this.ids.clear();
          this.options.logger.warn({ subject, code: error.code, err: errorMessage(error) }, 'schema registry unavailable; schema ids will be resolved again');
        }
        throw error;
      })
      .finally(() => this.pending.delete(pendingKey));
    this.pending.set(pendingKey, request);
    return request;
  }

  private async fetchId(schema: Registrable, subject: string): Promise<number> {
    const { registry, autoRegister } = this.options;
    if (autoRegister) {
      try {
        return await registry.register(subject, schema.definition);
      } catch (error) {
        if (error instanceof RelayError && (error.code === 'SCHEMA_INCOMPATIBLE' || error.code === 'SCHEMA_INVALID')) {
          throw new RelayError(error.code, `${schema.file}: ${error.message}`, { cause: error, details: { ...error.details, file: schema.file } });
        }
        throw error;
      }
    }
    const id = await registry.lookup(subject, schema.definition);
    if (id === null) {
      throw new RelayError('SCHEMA_NOT_REGISTERED', `subject "${subject}" has no version equal to ${schema.file} and OUTBOX_AUTO_REGISTER is off: register the schema first, or enable auto-register`, {
        details: { subject, file: schema.file },
      });
    }
    return id;
  }
}

/** Throws unless `value` fits `type`: undeclared fields and every failing path are reported, never dropped. */
function check(type: avro.Type, value: unknown, what: () => string): void {
  const problems = validationProblems(type, value);
  if (problems.length > 0) throw new PoisonEventError('ENCODE_SCHEMA_MISMATCH', `${what()}: ${problems.join('; ')}`);
}

/**
 * The payload as a JSON value: json/jsonb arrive as their text (a JsonText); a text, varchar or
 * bytea column holds JSON text; each is parsed here (a payload that is not JSON is a dead letter, never a guess).
 */
function jsonValueOf(payload: unknown): unknown {
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload) && !(payload instanceof JsonText)) return payload;
  try {
    return JSON.parse(payload instanceof JsonText ? payload.text : typeof payload === 'string' ? payload : payload.toString('utf8')) as unknown;
  } catch (error) {
    throw new PoisonEventError('DECODE_BAD_VALUE', `the payload is text that is not JSON (${(error as Error).message}); with the Avro format a text or bytea payload must hold the JSON of the event`);
  }
}
