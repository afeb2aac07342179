/**
 * The relay's producer runs kafkajs 2.2.4 (its last release, pinned in package.json) with three
 * internal modules replaced in kafkajs's module cache by the fork, each file of it at the path
 * of the kafkajs file it replaces:
 * - `send-messages`: acknowledgement tracked per partition, so a leader change can never drop
 *   a partition's messages while the send reports success (producer/sendMessages.ts). Always.
 * - `produce-encoder`: the Produce request encoded into one exact-size buffer, the same bytes as
 *   kafkajs's (protocol/requests/produce/v3/request.ts), and every request framed without
 *   copying it twice (protocol/request.ts), for CPU. OUTBOX_KAFKA_FAST_ENCODER=false uses
 *   kafkajs's own encoder and framing instead.
 *
 * kafkajs modules capture these when they load (messageProducer.js captures sendMessages, the
 * Produce v4-v7 encoders capture v3), so the replacements must go in before kafkajs loads:
 * ../kafkajs.ts, the only module that loads it, installs them right before it does. Whether
 * that worked is checked when a producer is created (`verifyKafkajsPatches`): a kafkajs loaded
 * too early, another kafkajs version or a moved file stops the relay at start, instead of
 * running without the fix.
 */
import { createRequire } from 'node:module';
import { RelayError } from '../../../errors.js';
import { createSendMessages, KAFKAJS_SEND_MESSAGES } from './producer/sendMessages.js';
import { encodesProduceRequest, KAFKAJS_PRODUCE_V3, produceRequestV3, type ProduceRequest, type ProduceRequestArgs } from './protocol/requests/produce/v3/request.js';
import { frameRequest, KAFKAJS_REQUEST, type RequestToFrame } from './protocol/request.js';

/** The kafkajs release whose internals the replacements were written and tested against. */
export const KAFKAJS_VERSION = '2.2.4';

export type KafkajsPatch = 'send-messages' | 'produce-encoder';

/** kafkajs modules that capture a replaced module when they load. */
const CAPTURED_BY: Readonly<Record<string, readonly string[]>> = {
  [KAFKAJS_SEND_MESSAGES]: ['kafkajs/src/producer/messageProducer.js'],
  [KAFKAJS_PRODUCE_V3]: [4, 5, 6, 7].map((version) => `kafkajs/src/protocol/requests/produce/v${version}/request.js`),
  [KAFKAJS_REQUEST]: ['kafkajs/src/network/connection.js'],
};

type ProduceEncoder = (args: ProduceRequestArgs) => ProduceRequest;
type RequestFraming = (request: RequestToFrame) => Promise<{ readonly buffer: Buffer }>;

const require = createRequire(import.meta.url);
let useFastEncoder = true;
let kafkajsProduceV3: ProduceEncoder | null = null;
let kafkajsRequest: RequestFraming | null = null;

/** The v3 encoder kafkajs calls (v4-v7 too): the relay's, or kafkajs's own when turned off or for a compressed batch. */
function produceEncoderSwitch(args: ProduceRequestArgs): ProduceRequest {
  return (useFastEncoder && encodesProduceRequest(args)) || !kafkajsProduceV3 ? produceRequestV3(args) : kafkajsProduceV3(args);
}

/** The request framing kafkajs's connection calls: the relay's, or kafkajs's own when turned off. */
function requestFramingSwitch(request: RequestToFrame): Promise<{ readonly buffer: Buffer }> {
  return useFastEncoder || !kafkajsRequest ? frameRequest(request) : kafkajsRequest(request);
}

/** kafkajs module path -> what it should export. */
export const KAFKAJS_REPLACEMENTS: Readonly<Record<string, unknown>> = {
  [KAFKAJS_SEND_MESSAGES]: createSendMessages,
  [KAFKAJS_PRODUCE_V3]: produceEncoderSwitch,
  [KAFKAJS_REQUEST]: requestFramingSwitch,
};

/** What went wrong while installing, reported by verifyKafkajsPatches (importing ../kafkajs.ts installs, and must not throw: `status` needs no producer). */
let installProblems: readonly string[] = [];

/** Puts the replacements into kafkajs's module cache: ../kafkajs.ts calls it once, right before it loads kafkajs. */
export function installKafkajsFork(): void {
  const problems: string[] = [];
  for (const [module, replacement] of Object.entries(KAFKAJS_REPLACEMENTS)) {
    let path: string;
    try {
      path = require.resolve(module);
    } catch {
      problems.push(`kafkajs has no ${module}`);
      continue;
    }
    for (const capturer of CAPTURED_BY[module] ?? []) {
      const capturerPath = resolveOrNull(capturer);
      if (capturerPath && require.cache[capturerPath]) problems.push(`${capturer} was loaded before the relay replaced ${module}: something loaded kafkajs before src/kafka/kafkajs/kafkajs.ts, which installs the replacements first`);
    }
    const original = require(path) as unknown;
    if (module === KAFKAJS_PRODUCE_V3) kafkajsProduceV3 = original as ProduceEncoder;
    if (module === KAFKAJS_REQUEST) kafkajsRequest = original as RequestFraming;
    require.cache[path]!.exports = replacement;
  }
  installProblems = problems;
}

/**
 * Checks that every replacement is in place and chooses the Produce encoder; returns the
 * replacements now active. Throws (not retriable) if kafkajs would run with its own sendMessages.
 */
export function verifyKafkajsPatches(options: { readonly fastEncoder: boolean }): KafkajsPatch[] {
  const problems = [...installProblems];
  const version = (require('kafkajs/package.json') as { version: string }).version;
  if (version !== KAFKAJS_VERSION) problems.push(`kafkajs ${version} is installed, the relay needs ${KAFKAJS_VERSION} exactly (run npm ci)`);
  for (const [module, replacement] of Object.entries(KAFKAJS_REPLACEMENTS)) {
    const path = resolveOrNull(module);
    if (path && require.cache[path]?.exports !== replacement) problems.push(`kafkajs's ${module} is not the relay's any more`);
  }
  if (problems.length > 0) {
    throw new RelayError('SINK_CLIENT', `the Kafka producer cannot run safely: ${problems.join('; ')}. Without the relay's sendMessages, kafkajs ${KAFKAJS_VERSION} loses events when a partition leader moves`);
  }
  useFastEncoder = options.fastEncoder;
  return options.fastEncoder ? ['send-messages', 'produce-encoder'] : ['send-messages'];
}

function resolveOrNull(module: string): string | null {
  try {
    return require.resolve(module);
  } catch {
    return null;
  }
}
