import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RelayError } from '../../errors.js';
import { HttpSchemaRegistry } from './registry.js';

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
  readonly body: unknown;
}

let server: Server | null = null;

/** A registry at the network port: answers from `reply`, records each request. */
async function fakeRegistry(reply: (seen: Seen) => { status: number; body: unknown }): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => {
      const entry = { method: request.method ?? '', url: request.url ?? '', authorization: request.headers.authorization, body: JSON.parse(text) as unknown };
      seen.push(entry);
      const { status, body } = reply(entry);
      response.writeHead(status, { 'content-type': 'application/vnd.schemaregistry.v1+json' }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { url: `http://user:p%40ss@127.0.0.1:${(server.address() as AddressInfo).port}/apis/ccompat/v7/`, seen };
}

afterEach(async () => {
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = null;
});

describe('HttpSchemaRegistry', () => {
  it('registers with POST /subjects/{s}/versions, credentials from the URL as basic auth', async () => {
    const { url, seen } = await fakeRegistry(() => ({ status: 200, body: { id: 7 } }));
    const registry = new HttpSchemaRegistry({ url });
    expect(await registry.register('billing.invoice-value', '{"type":"string"}')).toBe(7);
    expect(seen).toEqual([{ method: 'POST', url: '/apis/ccompat/v7/subjects/billing.invoice-value/versions', authorization: `Basic ${Buffer.from('user:p@ss').toString('base64')}`, body: { schema: '{"type":"string"}' } }]);
    expect(registry.location).not.toContain('p%40ss');
  });

  it('looks up with POST /subjects/{s}; 404 means no such version', async () => {
    const { url, seen } = await fakeRegistry((request) => (request.url.endsWith('/known') ? { status: 200, body: { id: 3, version: 1 } } : { status: 404, body: { error_code: 40403, message: 'no match' } }));
    const registry = new HttpSchemaRegistry({ url });
    expect(await registry.lookup('known', 's')).toBe(3);
    expect(await registry.lookup('unknown', 's')).toBeNull();
    expect(seen.map((request) => request.url)).toEqual(['/apis/ccompat/v7/subjects/known', '/apis/ccompat/v7/subjects/unknown']);
  });

  it("carries the registry's reason for a 409 as SCHEMA_INCOMPATIBLE, not retriable", async () => {
    const { url } = await fakeRegistry(() => ({ status: 409, body: { error_code: 409, message: 'reader type: LONG not compatible with writer type: STRING at /fields/0/type' } }));
    const error = await new HttpSchemaRegistry({ url }).register('s', '{}').catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'SCHEMA_INCOMPATIBLE', retriable: false });
    expect((error as Error).message).toContain('subject "s"');
    expect((error as Error).message).toContain('LONG not compatible with writer type: STRING');
  });

  it('5xx is retriable, 401 is not', async () => {
    let status = 503;
    const { url } = await fakeRegistry(() => ({ status, body: { message: 'busy' } }));
    const registry = new HttpSchemaRegistry({ url });
    await expect(registry.register('s', '{}')).rejects.toMatchObject({ code: 'ENCODE_REGISTRY', retriable: true });
    status = 401;
    await expect(registry.register('s', '{}')).rejects.toMatchObject({ code: 'ENCODE_REGISTRY_REFUSED', retriable: false });
  });

  it('an unreachable registry is a retriable ENCODE_REGISTRY error, counted', async () => {
    const { url } = await fakeRegistry(() => ({ status: 200, body: { id: 1 } }));
    await new Promise((resolve) => server!.close(resolve));
    server = null;
    const outcomes: string[] = [];
    const registry = new HttpSchemaRegistry({ url, onRequest: (operation, outcome) => outcomes.push(`${operation}:${outcome}`) });
    const error = await registry.register('s', '{}').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RelayError);
    expect(error).toMatchObject({ code: 'ENCODE_REGISTRY', retriable: true });
    expect((error as Error).message).toMatch(/unreachable/);
    expect(outcomes).toEqual(['register:error']);
  });
});
