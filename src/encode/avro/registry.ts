import { RelayError } from '../../errors.js';

/**
 * What the encoder needs from a schema registry (Confluent API). Only these calls: the relay
 * never reads or sets a subject's compatibility, so it needs no permission to change it.
 */
export interface SchemaRegistryPort {
  /** Registers `schema` under `subject` (idempotent) and returns its id. 409 -> SCHEMA_INCOMPATIBLE. */
  register(subject: string, schema: string): Promise<number>;
  /** The id of the version of `subject` equal to `schema`, or null when none is. */
  lookup(subject: string, schema: string): Promise<number | null>;
}

export type RegistryOperation = 'register' | 'lookup';

export interface HttpSchemaRegistryOptions {
  /** e.g. http://registry:8081 or http://apicurio:8080/apis/ccompat/v7; user:password@ becomes basic auth. */
  readonly url: string;
  readonly timeoutMs?: number;
  /** Called once per request, for metrics. */
  readonly onRequest?: (operation: RegistryOperation, outcome: 'ok' | 'error') => void;
}

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

/**
 * The Confluent REST endpoints over Node's fetch. A registry that cannot be reached or answers
 * 5xx is a retriable ENCODE_REGISTRY error (the stream restarts later); a refusal (4xx) is
 * ENCODE_REGISTRY_REFUSED, which retrying does not cure.
 */
export class HttpSchemaRegistry implements SchemaRegistryPort {
  private readonly base: string;
  private readonly authorization: string | undefined;
  private readonly timeoutMs: number;

  constructor(private readonly options: HttpSchemaRegistryOptions) {
    const url = new URL(options.url);
    if (url.username || url.password) {
      this.authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
      url.username = '';
      url.password = '';
    }
    this.base = url.toString().replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  /** The URL without credentials, for messages. */
  get location(): string {
    return this.base;
  }

  async register(subject: string, schema: string): Promise<number> {
    const response = await this.post('register', `/subjects/${encodeURIComponent(subject)}/versions`, { schema });
    if (response.status === 409) {
      throw new RelayError('SCHEMA_INCOMPATIBLE', `the registry refused the schema for subject "${subject}" as incompatible: ${response.message}`, { details: { subject } });
    }
    if (response.status === 422) {
      throw new RelayError('SCHEMA_INVALID', `the registry refused the schema for subject "${subject}" as invalid: ${response.message}`, { details: { subject } });
    }
    return this.idOf('register', subject, response);
  }

  async lookup(subject: string, schema: string): Promise<number | null> {
    const response = await this.post('lookup', `/subjects/${encodeURIComponent(subject)}`, { schema });
    if (response.status === 404) return null;
    return this.idOf('lookup', subject, response);
  }

  private idOf(operation: RegistryOperation, subject: string, response: RegistryResponse): number {
    if (response.status === 200 && typeof response.body?.id === 'number') return response.body.id;
    // Server errors may pass; a refusal (auth, bad request) will not by retrying.
    const code = response.status >= 500 || response.status === 429 ? 'ENCODE_REGISTRY' : 'ENCODE_REGISTRY_REFUSED';
    throw new RelayError(code, `schema registry ${operation} for subject "${subject}" answered ${response.status}: ${response.message}`, { details: { subject, status: response.status } });
  }

  private async post(operation: RegistryOperation, route: string, body: unknown): Promise<RegistryResponse> {
    const headers: Record<string, string> = { 'content-type': CONTENT_TYPE, accept: CONTENT_TYPE };
    if (this.authorization) headers.authorization = this.authorization;
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${this.base}${route}`, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(this.timeoutMs) });
      text = await response.text();
    } catch (error) {
      this.options.onRequest?.(operation, 'error');
      const reason = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
      throw new RelayError('ENCODE_REGISTRY', `schema registry at ${this.base} unreachable (${operation}): ${reason}`, { cause: error });
    }
    this.options.onRequest?.(operation, response.ok ? 'ok' : 'error');
    let parsed: { id?: unknown; message?: unknown } | undefined;
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      parsed = undefined;
    }
    const message = typeof parsed?.message === 'string' ? parsed.message : text.slice(0, 500);
    return { status: response.status, body: parsed, message };
  }
}

interface RegistryResponse {
  readonly status: number;
  readonly body: { id?: unknown } | undefined;
  readonly message: string;
}
