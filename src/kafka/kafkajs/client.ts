import type { Logger } from 'pino';
import { kafkaClientSecurity, PLAINTEXT, type KafkaSecurity } from '../../security/kafka-security.js';
import { kafkajs, type Kafka, type KafkaConfig } from './kafkajs.js';

/** The level a kafkajs log line goes to the relay's log at. */
export type KafkajsLineLevel = 'debug' | 'warn' | 'error';

/** One of kafkajs's log lines, its message apart from its fields. */
export interface KafkajsLine {
  readonly namespace: string;
  /** kafkajs's level: logLevel.ERROR (1) or WARN (2); the clients log nothing below. */
  readonly level: number;
  readonly message: string;
  readonly extra: Record<string, unknown>;
}

export interface KafkajsClientOptions {
  readonly clientId: string;
  readonly brokers: readonly string[];
  readonly security?: KafkaSecurity;
  /**
   * Where kafkajs's warnings and errors go, and at which level each (kafkajs's own by default;
   * null: the line was taken otherwise, e.g. counted). Absent: nowhere, for a short-lived admin
   * whose failures are thrown to its caller.
   */
  readonly log?: { readonly logger: Logger; readonly levelOf?: (line: KafkajsLine) => KafkajsLineLevel | null };
  readonly connectionTimeout?: number;
  readonly retry?: KafkaConfig['retry'];
}

/** A kafkajs client with the relay's TLS and SASL, its log lines in the relay's log: what every kafkajs producer, admin and consumer of the relay is made from. */
export function kafkajsClient(options: KafkajsClientOptions): Kafka {
  const { Kafka, logLevel } = kafkajs();
  const { log } = options;
  return new Kafka({
    clientId: options.clientId,
    brokers: [...options.brokers],
    ...kafkaClientSecurity(options.security ?? PLAINTEXT),
    ...(options.connectionTimeout !== undefined && { connectionTimeout: options.connectionTimeout }),
    ...(options.retry && { retry: options.retry }),
    logLevel: log ? logLevel.WARN : logLevel.NOTHING,
    ...(log && {
      logCreator: () => ({ namespace, level, log: entry }) => {
        const { message, ...extra } = entry;
        const line = { namespace, level, message, extra };
        const at = log.levelOf ? log.levelOf(line) : kafkajsLevel(line);
        if (at) log.logger[at]({ kafkajs: namespace, ...extra }, message);
      },
    }),
  });
}

/** kafkajs's own level for a line. */
export function kafkajsLevel(line: Pick<KafkajsLine, 'level'>): 'error' | 'warn' {
  return line.level <= kafkajs().logLevel.ERROR ? 'error' : 'warn';
}
