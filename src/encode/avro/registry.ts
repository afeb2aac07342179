import http from 'node:http';
import https from 'node:https';
import { RelayError } from '../../errors.js';
import type { Secret } from '../../security/secret.js';
import { isTlsTrustError } from '../../security/tls-errors.js';

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
  /** Basic auth (instead of user:password@ in the URL); the password is read at each request, so a rotated file applies at once. */
  readonly auth?: { readonly username: string; readonly password: Secret } | null;
  /** PEM CAs to trust for an https:// registry, beside the system's. */
  readonly ca?: string | null;
  readonly timeoutMs?: number;
  /** Called once per request, for metrics. */
  readonly onRequest?: (operation: RegistryOperation, outcome: 'ok' | 'error') => void;
}

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

/**
 * The Confluent REST endpoints over Node's http(s) client (fetch cannot be given a CA). A registry that cannot be reached or answers
 * 5xx is a retriable ENCODE_REGISTRY error (the stream restarts later); a refusal (4xx) is
 * ENCODE_REGISTRY_REFUSED, which retrying does not cure.
 */
export class HttpSchemaRegistry implements SchemaRegistryPort {
  private readonly base: string;
  private readonly credentials: (() => string) | undefined;
  private readonly timeoutMs: number;
  private readonly agent: http.Agent;

  constructor(private readonly options: HttpSchemaRegistryOptions) {
    const url = new URL(options.url);
    const { auth } = options;
    if (auth) {
      this.credentials = () => `${auth.username}:${auth.password.reveal()}`;
    } else if (url.username || url.password) {
      const inUrl = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
      this.credentials = () => inUrl;
    }
    url.username = '';
    url.password = '';
    this.base = url.toString().replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.agent = url.protocol === 'https:' ? new https.Agent({ keepAlive: true, ...(options.ca ? { ca: options.ca } : {}) }) : new http.Agent({ keepAlive: true });
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
    if (this.credentials) headers.authorization = `Basic ${Buffer.from(this.credentials()).toString('base64')}`;
    let response: { status: number; text: string };
    try {
      response = await this.request(`${this.base}${route}`, headers, JSON.stringify(body));
    } catch (error) {
      this.options.onRequest?.(operation, 'error');
      const reason = error instanceof Error ? error.message : String(error);
      if (isTlsTrustError(error)) {
        // Retrying does not make a certificate trusted: stop and say which setting decides it.
        throw new RelayError('ENCODE_REGISTRY_REFUSED', `schema registry at ${this.base}: its TLS certificate is not trusted (${reason}); set SCHEMA_REGISTRY_CA_FILE to the CA that signed it`, { cause: error });
      }
      throw new RelayError('ENCODE_REGISTRY', `schema registry at ${this.base} unreachable (${operation}): ${reason}`, { cause: error });
    }
    const ok = response.status >= 200 && response.status < 300;
    this.options.onRequest?.(operation, ok ? 'ok' : 'error');
    let parsed: { id?: unknown; message?: unknown } | undefined;
    try {
      parsed = JSON.parse(response.text) as typeof parsed;
    } catch {
      parsed = undefined;
    }
    const message = typeof parsed?.message === 'string' ? parsed.message : response.text.slice(0, 500);
    return { status: response.status, body: parsed, message };
  }

  private request(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
    const client = url.startsWith('https:') ? https : http;
    return new Promise((resolve, reject) => {
      const request = client.request(url, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, agent: this.agent, timeout: this.timeoutMs }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', reject);
      });
      request.on('timeout', () => request.destroy(new Error(`no answer within ${this.timeoutMs}ms`)));
      request.on('error', reject);
      request.end(body);
    });
  }
}

interface RegistryResponse {
  readonly status: number;
  readonly body: { id?: unknown } | undefined;
  readonly message: string;
}
