import { PoisonEventError, RelayError } from '../errors.js';
import type { OutboxEvent } from '../event.js';

export const PLACEHOLDERS = { aggregate_type: 'aggregateType', event_type: 'eventType' } as const;
type Placeholder = keyof typeof PLACEHOLDERS;
const LEGAL_TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;
const KNOWN_TOPICS_MAX = 1_000;

export type TopicRouter = (event: OutboxEvent) => string;

/**
 * Compiles a template such as `billing.{aggregate_type}` once into a function. An unknown
 * placeholder fails at start; a topic that Kafka would refuse makes the event poison.
 */
export function compileTopicTemplate(template: string): TopicRouter {
  const parts = template.split(/(\{[^}]*\})/).filter((part) => part !== '');
  const pieces = parts.map((part): { literal: string } | { field: 'aggregateType' | 'eventType' } => {
    if (!part.startsWith('{')) return { literal: part };
    const name = part.slice(1, -1);
    if (!(name in PLACEHOLDERS)) {
      throw new RelayError('CONFIG_INVALID', `OUTBOX_TOPIC_TEMPLATE: unknown placeholder ${part}; expected one of ${Object.keys(PLACEHOLDERS).map((key) => `{${key}}`).join(', ')}`);
    }
    return { field: PLACEHOLDERS[name as Placeholder] };
  });
  const fields = [...new Set(pieces.flatMap((piece) => ('field' in piece ? [piece.field] : [])))];
  const build = (event: OutboxEvent): string => {
    let topic = '';
    for (const piece of pieces) topic += 'literal' in piece ? piece.literal : event[piece.field];
    if (!LEGAL_TOPIC.test(topic) || topic === '.' || topic === '..') {
      throw new PoisonEventError('ROUTE_BAD_TOPIC', `topic "${topic}" from template "${template}" is not a legal Kafka topic name (letters, digits, . _ -, at most 249)`);
    }
    return topic;
  };
  // Topics already built and checked, by the placeholder values: a handful of topics take
  // every event. Bounded, as the values come from rows.
  const known = new Map<string, string>();
  // A null aggregate type never gets here with {aggregate_type}: the configuration refuses that template.
  const keyOf = fields.length === 1 ? (event: OutboxEvent) => event[fields[0]!] ?? '' : (event: OutboxEvent) => fields.map((field) => event[field]).join('\u0000');
  return (event) => {
    const key = keyOf(event);
    const cached = known.get(key);
    if (cached !== undefined) return cached;
    const topic = build(event);
    if (known.size < KNOWN_TOPICS_MAX) known.set(key, topic);
    return topic;
  };
}
