/**
 * Replaces kafkajs 2.2.4's request framing (kafkajs/src/protocol/request.js): the size, the
 * request header and the body, as one buffer for the socket. kafkajs 2.2.4 copies the body twice
 * to frame it, each time into a zero-filled buffer grown to the next power of two: for a 1 MB
 * Produce request that is two 1-2 MB allocations and two copies, 5-6% of the relay's CPU on 2 KB
 * events, and the external memory those buffers hold brought on more garbage collections. Here a
 * body encoded with room before it (the relay's Produce request, requests/produce/v3/request.ts)
 * is framed in place; any other body is copied once into a buffer of the exact size. Same bytes
 * as kafkajs's (fork/install.test.ts).
 */

export const KAFKAJS_REQUEST = 'kafkajs/src/protocol/request.js';

/** Bytes the relay's Produce encoder leaves before the body: the header with a client id of up to 50 bytes. */
export const REQUEST_HEADER_ROOM = 64;

/** What an encoder gives: `buffer` is the body; `headerRoom` bytes before it in its memory are free to write. */
export interface EncodedBody {
  readonly buffer: Buffer;
  readonly headerRoom?: number;
}

export interface RequestToFrame {
  readonly correlationId: number;
  readonly clientId: string | null;
  readonly request: { readonly apiKey: number; readonly apiVersion: number; encode(): Promise<EncodedBody> | EncodedBody };
}

/** Size (int32), api key, api version, correlation id, client id (int16 length, -1 for none). */
const FIXED_HEADER_BYTES = 4 + 2 + 2 + 4 + 2;

/** kafkajs's createRequest: what the connection writes is `.buffer`. */
export async function frameRequest({ correlationId, clientId, request: { apiKey, apiVersion, encode } }: RequestToFrame): Promise<{ readonly buffer: Buffer }> {
  const body = await encode();
  const clientIdBytes = clientId === null ? 0 : Buffer.byteLength(clientId, 'utf8');
  const headerBytes = FIXED_HEADER_BYTES + clientIdBytes;
  const bodyBytes = body.buffer.length;
  let framed: Buffer;
  if ((body.headerRoom ?? 0) >= headerBytes) {
    framed = Buffer.from(body.buffer.buffer, body.buffer.byteOffset - headerBytes, headerBytes + bodyBytes);
  } else {
    framed = Buffer.allocUnsafe(headerBytes + bodyBytes);
    body.buffer.copy(framed, headerBytes);
  }
  let at = framed.writeInt32BE(headerBytes - 4 + bodyBytes, 0);
  at = framed.writeInt16BE(apiKey, at);
  at = framed.writeInt16BE(apiVersion, at);
  at = framed.writeInt32BE(correlationId, at);
  at = framed.writeInt16BE(clientId === null ? -1 : clientIdBytes, at);
  if (clientId !== null) framed.write(clientId, at, 'utf8');
  return { buffer: framed };
}
